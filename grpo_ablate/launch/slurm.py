"""A trial as a SLURM job: one `grpo-ablate run` on a login node, every trial submitted with `sbatch`.

    hardware: {launcher: slurm}            # or GRPO_ABLATE_LAUNCHER=slurm
    GRPO_ABLATE_SLURM_OPTIONS='--partition=gpu --account=me'   # more sbatch options, if the cluster needs them

`start` submits the trial's own command (process.build_command: python, torchrun or accelerate,
the worker reading spec.json) with the trial's resources: `--gres=gpu:N` for hardware.gpus,
`--cpus-per-task` for its processes, `--mem` from hardware.memory_limit_mb, else the host
memory `grpo-ablate probe` measured for the trial's shape (probe.json in the study's folder,
CPU points only: on GPUs the probe measures CUDA memory, which says nothing of the host's)
times MEMORY_MARGIN, `--time` from the trial's timeout plus the stop grace (`study.trial_timeout:
auto` is the estimate's long end, measured or assumed, times a margin plus slack:
study/limits.py). `plan --commands` shows the line (describe). The job's output
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
A job counts as ended only once its processes are gone (not while COMPLETING): the retry's
resume point is read after the stopped trial wrote its last checkpoint. A job lost with its node
(NODE_FAIL) is marked ended at once while a node set DOWN may still be ending its processes, so
it counts as ended once the trial's result.json is there, or LOST_GRACE_S later.

Retries are the orchestrator's, not SLURM's: every job is `--no-requeue`, since a job SLURM
requeues (a node failure) would run the same trial folder again from the spec's start, training
twice what the checkpoint holds; the orchestrator queues the interrupted trial again and its
retry resumes the checkpoint.

The job id is kept in the trial folder (JOB_FILE). When the orchestrator dies its jobs run on;
the next run that queues the dead run's trial again first calls `reclaim(trial_dir)`, which
cancels the job (SIGTERM: the trial stops after its step and checkpoints it) and waits for its
end, so two jobs never train one trial and the retry resumes from the old job's last step.
Cancelled, not adopted: the dead run's trial is already recorded as lost and its cell queued
again under a new trial number, and a job cannot be handed to another Optuna trial; adopting it
would mean waiting on a trial no live run records, so its result would reach no record.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from grpo_ablate.trainer.spec import TrialSpec
from grpo_ablate.vocab import PROBE_FILE, RESULT_FILE

from .base import STOP_GRACE_SECONDS, Launcher
from .process import build_command

__all__ = ["JOB_FILE", "MEMORY_MARGIN", "SLURM_OPTIONS_ENV", "SlurmLauncher", "exit_status", "memory_mb", "read_job",
           "resource_options"]

MEMORY_MARGIN = 1.5  # --mem over the probe's measured peak: a longer trial's data, logs and allocator growth
JOB_FILE = "slurm-job.json"  # in the trial folder: {"job": "<id>"} of the job that runs it

SLURM_OPTIONS_ENV = "GRPO_ABLATE_SLURM_OPTIONS"
POLL_FLOOR_S = 2.0  # the controller is asked at most this often per trial
CLIENT_TIMEOUT_S = 60.0
LOST_GRACE_S = 30.0  # a node set DOWN may still run the job's processes while SLURM ends them: their result may yet come
_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
          "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
_TERMINATED = {"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE", "REVOKED"}  # SLURM sent SIGTERM, then SIGKILL
_LOST = {"NODE_FAIL", "BOOT_FAIL"}  # the node went away under the job


def resource_options(spec: TrialSpec, *, grace_s: float = STOP_GRACE_SECONDS) -> list[str]:
    """The sbatch options for the trial's GPUs, CPUs, memory and time limit."""
    options = [f"--job-name=grpo-ablate-{Path(spec.trial_dir).name}", "--nodes=1", "--ntasks=1", "--no-requeue",
               f"--cpus-per-task={max(1, spec.num_processes)}"]
    gpus = spec.hardware.get("gpus")
    if gpus:
        options.append(f"--gres=gpu:{int(gpus)}")
    memory = memory_mb(spec)
    if memory:
        options.append(f"--mem={memory}M")
    if spec.timeout_s is not None:  # its own timeout ends it first; the job's limit is the backstop
        options.append(f"--time={max(1, math.ceil((spec.timeout_s + grace_s) / 60))}")
    return options


def memory_mb(spec: TrialSpec) -> int | None:
    """The job's memory in MB: hardware.memory_limit_mb, else the probe's host-memory peak for the trial's
    (G, generation batch) times MEMORY_MARGIN; None without either (the cluster's default applies)."""
    limit = spec.hardware.get("memory_limit_mb")
    if limit:
        return int(limit)
    try:  # the study's own probe.json: its folder is the study's (study/owner.py), so the file is this study's
        points = json.loads((Path(spec.trial_dir).parents[1] / PROBE_FILE).read_text()).get("points") or []
    except (OSError, ValueError, AttributeError, IndexError):
        return None
    batch = spec.trainer.get("generation_batch_size")
    peaks = [float(p["peak_memory_mb"]) for p in points if isinstance(p, dict) and p.get("fits")
             and p.get("memory_kind", "rss") == "rss" and isinstance(p.get("peak_memory_mb"), (int, float))
             and p.get("num_generations") == spec.num_generations
             and (batch is None or p.get("generation_batch_size") == batch)]
    return math.ceil(max(peaks) * MEMORY_MARGIN) if peaks else None


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


def read_job(trial_dir: str | os.PathLike[str]) -> str | None:
    """The id of the job that ran (or runs) the trial in `trial_dir`; None if none was submitted from it."""
    try:
        job = json.loads((Path(trial_dir) / JOB_FILE).read_text()).get("job")
    except (OSError, ValueError, AttributeError):
        return None
    return job if isinstance(job, str) and job else None


def _write_job(trial_dir: str | os.PathLike[str], job: str) -> None:
    path = Path(trial_dir) / JOB_FILE
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps({"job": job}) + "\n")
    os.replace(part, path)  # whole or absent: a reader never sees half an id


def _client(env: dict[str, str] | None, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env=env or None, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)


def job_state(job: str, env: dict[str, str] | None = None, before: str = "") -> tuple[str, str]:
    """(state, ExitCode) of a job: sacct where there is accounting, else scontrol, else squeue.

    A job whose processes are still ending reads COMPLETING (squeue's word), whatever state it
    will end in; `before` is the state read last, for a job the controller has forgotten.
    """
    state, code = "", ""
    acct = _client(env, "sacct", "-n", "-P", "-X", "-j", job, "-o", "State,ExitCode")
    line = acct.stdout.strip().splitlines()[0] if acct.returncode == 0 and acct.stdout.strip() else ""
    if line and "|" in line:
        state, code = line.split("|", 1)
    else:
        show = _client(env, "scontrol", "-o", "show", "job", job)
        if show.returncode == 0 and "JobState=" in show.stdout:
            fields = dict(part.split("=", 1) for part in show.stdout.split() if "=" in part)
            state, code = fields.get("JobState", ""), fields.get("ExitCode", "")
    queued = _client(env, "squeue", "-h", "-j", job, "-o", "%T")
    now = queued.stdout.strip() if queued.returncode == 0 else ""
    if now == "COMPLETING" or (now and not state):  # its processes are not all gone yet
        return now, code
    if not state:  # forgotten by the controller and no accounting: it ended, how is unknown
        return ("COMPLETED" if before == "COMPLETING" else "NODE_FAIL"), ""
    return state, code


class SlurmLauncher(Launcher):
    """Each trial a SLURM batch job, submitted from this host (registry name "slurm")."""

    def __init__(self) -> None:
        self._job: str | None = None
        self._state = ""
        self._exit_code = ""
        self._env: dict[str, str] = {}
        self._result: Path | None = None
        self._lost_at: float | None = None

    @classmethod
    def describe(cls, spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
        """The sbatch line that submits the trial (its output, folder and job id are the run's)."""
        extra = shlex.split(os.environ.get(SLURM_OPTIONS_ENV, ""))
        return {"launch": ["sbatch", "--parsable", *resource_options(spec), *extra, "--wrap",
                           "exec " + shlex.join(build_command(spec, spec_path))]}

    def _client(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return _client(self._env, *argv)

    @classmethod
    def reclaim(cls, trial_dir: str | os.PathLike[str]) -> str | None:
        """Cancel the job still running a dead run's trial, and return once it has ended (see the module's words)."""
        job = read_job(trial_dir)
        if job is None:
            return None
        state, code = job_state(job)
        if exit_status(state, code) is not None:
            return None
        _client(None, "scancel", job)  # SIGTERM to its processes: the trial stops after its step, checkpointed
        deadline = time.monotonic() + STOP_GRACE_SECONDS + CLIENT_TIMEOUT_S
        while exit_status(state, code) is None and time.monotonic() < deadline:
            time.sleep(POLL_FLOOR_S)
            state, code = job_state(job, before=state)
        ended = "ended" if exit_status(state, code) is not None else f"still {state or 'unknown'} after the wait"
        return f"cancelled SLURM job {job}, which still ran trial folder {Path(trial_dir).name} of a dead run ({ended})"

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
        _write_job(spec.trial_dir, self._job)
        self._result, self._lost_at = Path(spec.trial_dir) / RESULT_FILE, None
        self._state, self._exit_code = "PENDING", ""
        self.processes_started += 1

    def _read_state(self) -> None:
        assert self._job is not None
        self._state, self._exit_code = job_state(self._job, self._env, before=self._state)

    def poll(self) -> int | None:
        if self._job is None:
            return None
        if exit_status(self._state, self._exit_code) is None:
            self._read_state()
        status = exit_status(self._state, self._exit_code)
        if self._state.split()[0:1] == ["NODE_FAIL"] and self._result is not None and not self._result.exists():
            self._lost_at = self._lost_at or time.monotonic()
            if time.monotonic() - self._lost_at < LOST_GRACE_S:  # its processes may still be stopping on the node
                return None
        return status

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
