"""A trial as a SLURM job: one `grpo-ablate run` on a login node, every trial submitted with `sbatch`.

    hardware: {launcher: slurm}            # or GRPO_ABLATE_LAUNCHER=slurm
    GRPO_ABLATE_SLURM_OPTIONS='--partition=gpu --account=me'   # more sbatch options, if the cluster needs them

`start` submits the trial's own command (process.build_command: python, torchrun or accelerate,
the worker reading spec.json) with the trial's resources: `--gres=gpu:N` for hardware.gpus,
`--cpus-per-task` for its processes, `--mem` from hardware.memory_limit_mb, `--time` from the
trial's timeout (the study's estimate, study/limits.py) plus the stop grace. The job's output
is the trial's log.txt. `poll` reads the job's state; `stop` is `scancel` (after the STOP file's
grace: Launcher.run). The trial folder is the contract, so it must be on a filesystem the
nodes share, as SLURM clusters have.

How a job ended becomes an exit status the one classification reads (outcome.classify): the
job's own exit code when it ran to its end; a cancel, a preemption or the time limit is
SIGTERM (-15: interrupted, queued again; the trial's handler, trainer/signals.py, stops it
after its step first); a node failure is SIGKILL (-9: interrupted). Out of memory is SLURM's
OUT_OF_MEMORY state (its cgroup's kill), read from `sacct` where the cluster keeps accounting,
else from `scontrol show job` while the controller remembers the job (MinJobAge, 300 s by
default) — a cluster without accounting, like the tests' (tests/slurm_cluster.py), has only that.
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from grpo_ablate.trainer.spec import TrialSpec

from .base import STOP_GRACE_SECONDS, Launcher
from .process import build_command

__all__ = ["SLURM_OPTIONS_ENV", "SlurmLauncher", "exit_status", "resource_options"]

SLURM_OPTIONS_ENV = "GRPO_ABLATE_SLURM_OPTIONS"
POLL_FLOOR_S = 2.0  # the controller is asked at most this often per trial
CLIENT_TIMEOUT_S = 60.0
_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
          "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
_TERMINATED = {"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE", "REVOKED"}  # SLURM sent SIGTERM, then SIGKILL
_LOST = {"NODE_FAIL", "BOOT_FAIL"}  # the node went away under the job


def resource_options(spec: TrialSpec, *, grace_s: float = STOP_GRACE_SECONDS) -> list[str]:
    """The sbatch options for the trial's GPUs, CPUs, memory and time limit."""
    options = [f"--job-name=grpo-ablate-{Path(spec.trial_dir).name}", "--nodes=1", "--ntasks=1",
               f"--cpus-per-task={max(1, spec.num_processes)}"]
    gpus = spec.hardware.get("gpus")
    if gpus:
        options.append(f"--gres=gpu:{int(gpus)}")
    memory = spec.hardware.get("memory_limit_mb")
    if memory:
        options.append(f"--mem={int(memory)}M")
    if spec.timeout_s is not None:  # its own timeout ends it first; the job's limit is the backstop
        options.append(f"--time={max(1, math.ceil((spec.timeout_s + grace_s) / 60))}")
    return options


def exit_status(state: str, exit_code: str) -> int | None:
    """The trial's exit status from a job's state and `ExitCode=N:S`; None while it has not ended."""
    state = state.split()[0].rstrip("+") if state else ""
    if state not in _ENDED:
        return None
    code, _, sig = exit_code.partition(":")
    number = int(code) if code.isdigit() else 1
    signal_number = int(sig) if sig.isdigit() else 0
    if state in _TERMINATED:
        return -15
    if state in _LOST:
        return -9
    if state == "OUT_OF_MEMORY":
        return -9 if signal_number == 9 or number == 0 else number
    if signal_number:
        return -signal_number
    return number


class SlurmLauncher(Launcher):
    """Each trial a SLURM batch job, submitted from this host (registry name "slurm")."""

    def __init__(self) -> None:
        self._job: str | None = None
        self._state = ""
        self._exit_code = ""
        self._env: dict[str, str] = {}

    @classmethod
    def describe(cls, spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
        """The sbatch line that submits the trial (its output, folder and job id are the run's)."""
        extra = shlex.split(os.environ.get(SLURM_OPTIONS_ENV, ""))
        return {"launch": ["sbatch", "--parsable", *resource_options(spec), *extra, "--wrap",
                           "exec " + shlex.join(build_command(spec, spec_path))]}

    def _client(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self._env or None, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)

    def start(self, spec: TrialSpec, env: dict[str, str], log_path: Path) -> None:
        spec_path = spec.save()
        command = build_command(spec, spec_path)
        if command[0] == sys.executable:  # the same interpreter, by a path the nodes share
            command[0] = os.fspath(Path(sys.executable).absolute())
        extra = shlex.split(os.environ.get(SLURM_OPTIONS_ENV, ""))
        argv = ["sbatch", "--parsable", f"--output={log_path}", "--open-mode=append", f"--chdir={os.getcwd()}",
                "--export=ALL", *resource_options(spec), *extra, "--wrap", "exec " + shlex.join(command)]
        with log_path.open("a") as log:
            log.write("$ " + shlex.join(argv) + "\n")
        self._env = env
        out = self._client(*argv)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch refused the trial (exit {out.returncode}): {(out.stderr or out.stdout).strip()[:500]}")
        self._job = out.stdout.strip().split(";")[0]
        self._state, self._exit_code = "PENDING", ""
        self.processes_started += 1

    def _read_state(self) -> None:
        """The job's state and exit code: sacct where there is accounting, else scontrol, else squeue."""
        assert self._job is not None
        acct = self._client("sacct", "-n", "-P", "-X", "-j", self._job, "-o", "State,ExitCode")
        line = acct.stdout.strip().splitlines()[0] if acct.returncode == 0 and acct.stdout.strip() else ""
        if line and "|" in line:
            self._state, self._exit_code = line.split("|", 1)
            return
        show = self._client("scontrol", "-o", "show", "job", self._job)
        if show.returncode == 0 and "JobState=" in show.stdout:
            fields = dict(part.split("=", 1) for part in show.stdout.split() if "=" in part)
            self._state, self._exit_code = fields.get("JobState", ""), fields.get("ExitCode", "")
            return
        queued = self._client("squeue", "-h", "-j", self._job, "-o", "%T")
        if queued.returncode == 0 and queued.stdout.strip():
            self._state = queued.stdout.strip()
        else:  # forgotten by the controller and no accounting: it ended, how is unknown
            self._state, self._exit_code = "COMPLETED" if self._state == "COMPLETING" else "NODE_FAIL", ""

    def poll(self) -> int | None:
        if self._job is None:
            return None
        if exit_status(self._state, self._exit_code) is None:
            self._read_state()
        return exit_status(self._state, self._exit_code)

    def wait(self, seconds: float) -> int | None:
        time.sleep(max(seconds, POLL_FLOOR_S))
        return self.poll()

    def stop(self) -> None:
        if self._job is None or self.poll() is not None:
            return
        self._client("scancel", self._job)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S * 2
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(POLL_FLOOR_S)

    def oom_evidence(self, marker: object) -> str | None:
        if self._state.split()[0:1] == ["OUT_OF_MEMORY"]:
            return f"SLURM ended job {self._job} OUT_OF_MEMORY (its cgroup's memory limit)"
        return None

    def ended(self) -> None:
        if self._job is not None and self.poll() is None:
            self._client("scancel", self._job)
        self._job = None
