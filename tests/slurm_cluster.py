"""A real single-node SLURM cluster for the tests: munged, slurmctld and slurmd, all private.

Debian's `slurm-wlm` and `munge` (`.ci/run` installs them). Nothing is written outside one temp
folder and nothing in /etc is read but the binaries' defaults: a munge key of its own, a
slurm.conf whose node is this host as `slurmd -C` describes it, ports chosen free, state, spool,
logs and pid files under the folder. Clients find it through `SLURM_CONF` (in `cluster.env`),
so two pytest workers can each run a cluster of their own at once. Stopped by pid: whatever the
cluster started (job steps included: slurmd ends them) is gone after `stop()`.

    with SlurmCluster.start(Path(tempfile.mkdtemp())) as cluster:
        subprocess.run(["srun", "hostname"], env=cluster.env, check=True)

No accounting (no slurmdbd): `sacct` answers nothing here; job states come from
`scontrol show job` while the controller remembers the job (MinJobAge below).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SlurmCluster", "missing_binaries"]

_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "scancel", "scontrol", "squeue", "sinfo")
START_TIMEOUT_S = 30.0
# A job step credential's lifetime, which is also how long SLURM holds a requeued job before it may start
# again (slurm.conf(5), AuthInfo cred_expire; default 120 s): a node set DOWN mid-job waited 121 s for the
# requeued job, doing nothing (tests/test_slurm_faults.py). 30 s is still ample to launch a step here.
CRED_EXPIRE_S = 30


def missing_binaries() -> list[str]:
    """The cluster's programs not found on PATH (or /usr/sbin), empty when it can run here."""
    return [name for name in _BINARIES if _which(name) is None]


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def _free_ports(count: int) -> list[int]:
    """`count` distinct free ports (held open together while chosen, so they differ)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def _node_line() -> tuple[str, str]:
    """(node name, the rest of its NodeName line) from `slurmd -C`: this host's CPUs and memory."""
    out = subprocess.run([str(_which("slurmd")), "-C"], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("NodeName="))
    fields = dict(part.split("=", 1) for part in line.split())
    name = fields.pop("NodeName")
    return name, " ".join(f"{k}={v}" for k, v in fields.items())


def slurm_conf(base: Path, *, cluster: str, ctld_port: int, slurmd_port: int, munge_socket: Path,
               node: str, node_spec: str) -> str:
    """The cluster's slurm.conf text: one node, private ports and folders, no accounting, no cgroups."""
    return f"""\
ClusterName={cluster}
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire={CRED_EXPIRE_S}
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool/%n
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/slurmctld.log
SlurmdLogFile={base}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
KillWait=20
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
PlugStackConfig={base}/plugstack.conf
NodeName={node} NodeAddr=127.0.0.1 {node_spec} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


@dataclass
class SlurmCluster:
    """A running private cluster: its folder, node, environment for clients, and daemons by pid."""

    base: Path
    node: str
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.base / "slurm.conf"

    @classmethod
    def start(cls, base: Path, name: str = "ga") -> "SlurmCluster":
        """Write the configuration under `base` (an empty folder), start the three daemons, wait for an idle node."""
        base.mkdir(parents=True, exist_ok=True)
        os.chmod(base, 0o755)  # munged (user munge) must reach its folder below
        munge_dir = base / "munge"
        munge_dir.mkdir()
        for sub in ("state", "spool"):
            (base / sub).mkdir()
        (base / "plugstack.conf").write_text("")
        as_root = os.geteuid() == 0
        user: list[str] = []
        if as_root:  # munged refuses to run as root
            munge_user = pwd.getpwnam("munge")
            os.chown(munge_dir, munge_user.pw_uid, munge_user.pw_gid)
            user = ["runuser", "-u", "munge", "--"]
        os.chmod(munge_dir, 0o700)
        key = munge_dir / "munge.key"
        subprocess.run(user + [str(_which("mungekey")), "--create", f"--keyfile={key}"], check=True, capture_output=True)
        socket_path = munge_dir / "munge.socket"
        ctld_port, slurmd_port = _free_ports(2)
        node, node_spec = _node_line()
        env = dict(os.environ, SLURM_CONF=str(base / "slurm.conf"))
        for key_name in [k for k in env if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SQUEUE_")) and k != "SLURM_CONF"]:
            del env[key_name]  # a test run from inside a job must not talk to that job's cluster
        (base / "slurm.conf").write_text(slurm_conf(base, cluster=name, ctld_port=ctld_port, slurmd_port=slurmd_port,
                                                    munge_socket=socket_path, node=node, node_spec=node_spec))
        cluster = cls(base=base, node=node, env=env)
        try:
            cluster._spawn(user + [str(_which("munged")), "--foreground", f"--socket={socket_path}", f"--key-file={key}",
                                   f"--pid-file={munge_dir / 'munged.pid'}", f"--seed-file={munge_dir / 'munged.seed'}",
                                   f"--log-file={munge_dir / 'munged.log'}", "--force"], "munged")
            cluster._wait_for(lambda: socket_path.exists(), "munged's socket", munge_dir / "munged.log")
            cluster._spawn([str(_which("slurmctld")), "-D", "-i"], "slurmctld")
            cluster._spawn([str(_which("slurmd")), "-D"], "slurmd")
            cluster._wait_for(cluster._node_idle, f"node {node} idle in sinfo", base / "slurmctld.log")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, argv: list[str], name: str) -> None:
        log = open(self.base / f"{name}.out", "wb")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.base,
                                           start_new_session=True))
        log.close()

    def _wait_for(self, ready, what: str, log: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                break
            time.sleep(0.1)
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
        raise RuntimeError(f"the test SLURM cluster did not start: waiting for {what}; log {log}:\n{tail}")

    def _node_idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip() == "idle"

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A client command (sbatch, scontrol, ...) against this cluster."""
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, check=check, timeout=timeout)

    def job_state(self, job_id: str) -> str:
        """The job's state word from `scontrol show job` ("PENDING", "RUNNING", "COMPLETED", "CANCELLED", ...)."""
        out = self.run("scontrol", "-o", "show", "job", job_id).stdout
        for part in out.split():
            if part.startswith("JobState="):
                return part.split("=", 1)[1]
        raise RuntimeError(f"no JobState for job {job_id}: {out[:300]}")

    def wait_idle(self, timeout: float = 120) -> None:
        """Wait until no job is queued or running (the next test starts on an empty node)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", "-o", "%i").stdout.strip():
                return
            time.sleep(0.5)
        raise TimeoutError(f"jobs still in the queue after {timeout:g} s: {self.run('squeue').stdout}")

    def reset(self, timeout: float = 60) -> None:
        """After a test: every job cancelled and its processes gone, the node up again (the next test starts clean)."""
        self.run("scancel", "--full", "--signal=KILL", "--user", pwd.getpwuid(os.getuid()).pw_name, check=False)
        deadline = time.monotonic() + timeout
        while (self.job_processes() or self.run("squeue", "-h", "-o", "%i", check=False).stdout.strip()) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        if not self._node_idle():
            self.resume_node()

    def resume_node(self) -> None:
        """Bring the node back after a test set it DOWN."""
        self.run("scontrol", "update", f"nodename={self.node}", "state=resume", check=False)
        self._wait_for(self._node_idle, f"node {self.node} idle again", self.base / "slurmctld.log")

    def job_processes(self, *, daemons: bool = False) -> list[int]:
        """Pids of the processes of this cluster's jobs (SLURM_CONF its own, a SLURM_JOB_ID set): job scripts and their
        children. With `daemons`, also whatever else runs under its SLURM_CONF (slurmstepd, a daemon's children)."""
        marker = f"SLURM_CONF={self.conf}".encode() + b"\0"
        own = {p.pid for p in self.procs} | {os.getpid()}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in own:
                continue
            try:
                environ = (entry / "environ").read_bytes()
                if marker in environ and (daemons or b"\0SLURM_JOB_ID=" in environ or environ.startswith(b"SLURM_JOB_ID=")):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def _controller(self) -> subprocess.Popen[bytes]:
        return next(p for p in self.procs if "slurmctld" in str(p.args[0]))

    def stop_controller(self) -> None:
        """End slurmctld (SIGTERM: it saves its state) while slurmd and the jobs run on: a controller outage."""
        ctld = self._controller()
        os.killpg(ctld.pid, signal.SIGTERM)
        ctld.wait(timeout=60)

    def start_controller(self) -> None:
        """Start slurmctld again (it recovers the jobs from its state folder) and wait until it answers."""
        ctld = self._controller()
        self.procs.remove(ctld)
        self._spawn([str(_which("slurmctld")), "-D", "-i"], "slurmctld")
        self._wait_for(lambda: self.run("scontrol", "ping", check=False).returncode == 0, "slurmctld answering again",
                       self.base / "slurmctld.log")

    def stop(self) -> None:
        """Cancel every job, end the daemons by pid (newest first), then SIGKILL any job process left.

        slurmstepd outlives slurmd, and a job's processes outlive both: they are found by the
        SLURM_CONF in their environment (this cluster's alone) and killed by pid.
        """
        if self.procs and all(p.poll() is None for p in self.procs):
            self.run("scancel", "--full", "--signal=KILL", "--user", pwd.getpwuid(os.getuid()).pw_name, check=False)
            try:
                self.wait_idle(timeout=30)
            except (TimeoutError, subprocess.SubprocessError):
                pass
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self.procs.clear()
        for pid in self.job_processes(daemons=True):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> "SlurmCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
