"""A trial as a SLURM job: one `grpo-ablate run` on a login node, every trial submitted with `sbatch`.

    hardware: {launcher: slurm}            # or GRPO_ABLATE_LAUNCHER=slurm
    GRPO_ABLATE_SLURM_OPTIONS='--partition=gpu --account=me'   # more sbatch options, if the cluster needs them

`start` submits the trial's own command (process.build_command: python, torchrun or accelerate,
the worker reading spec.json) with the trial's resources: `--gres=gpu:N` for hardware.gpus,
`--cpus-per-task` for its processes, `--mem` from hardware.memory_limit_mb, else the host
memory `grpo-ablate probe` measured for the trial's shape (the spec's host_memory_mb, which the parent
resolves from the study's probe.json: CPU points only, a GPU's CUDA peak says nothing of the host's)
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

A client that knows what it does not know. A controller that does not answer (a restart, an
outage: a client command that times out, a "Unable to contact slurm controller" or socket error, or
any failure while `scontrol ping` finds no controller) tells nothing about a job: the job is taken as
it was last seen and asked again with backoff (POLL_FLOOR_S doubling to BACKOFF_MAX_S), never mapped
to an outcome. A job is gone only on positive evidence: the controller answers and does not know it
(FORGOTTEN: `squeue -t all` by its name answers without it), or reports NODE_FAIL. `sbatch` submits
under a unique job name (`grpo-ablate-<trial>-<random>`), recorded in the trial folder before the
answer is awaited; an unanswered or slow sbatch is followed by a look for that name before any new
submission, so a second job is never submitted beside one that lives. A refusal (the controller
answered no) fails the trial; a controller away past SUBMIT_DEADLINE_S interrupts it (queued again).
Every wait on the controller has a deadline and a stated outcome (STOP_WAIT_S, RECLAIM_WAIT_S,
UNANSWERED_GIVE_UP_S: a running job unanswered for an hour is taken as lost, its record kept).

The job record is kept in the trial folder (JOB_FILE: its name, then its id). When the orchestrator
dies its jobs run on; the next run that queues the dead run's trial again first calls
`reclaim(trial_dir)`, which cancels the job (SIGTERM: the trial stops after its step and checkpoints
it) and waits for its end, so two jobs never train one trial and the retry resumes from the old job's
last step; a retry in the same run does the same for the attempts it follows. When that end cannot
be confirmed (no controller) it raises ReclaimPending and the retry waits.
Cancelled, not adopted: the dead run's trial is already recorded as lost and its cell queued
again under a new trial number, and a job cannot be handed to another Optuna trial; adopting it
would mean waiting on a trial no live run records, so its result would reach no record.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shlex
import subprocess
import sys
import time
from pathlib import Path

from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.core.vocab import RESULT_FILE

from .base import STOP_GRACE_SECONDS, Launcher, NotStarted, ReclaimPending
from .process import build_command

__all__ = ["CLIENT_TIMEOUT_ENV", "JOB_FILE", "MEMORY_MARGIN", "SLURM_OPTIONS_ENV", "SlurmLauncher", "exit_status",
           "job_state", "memory_mb", "read_job", "read_record", "resource_options"]

MEMORY_MARGIN = 1.5  # --mem over the probe's measured peak: a longer trial's data, logs and allocator growth
JOB_FILE = "slurm-job.json"  # in the trial folder: {"job": "<id>"} of the job that runs it

SLURM_OPTIONS_ENV = "GRPO_ABLATE_SLURM_OPTIONS"
CLIENT_TIMEOUT_ENV = "GRPO_ABLATE_SLURM_CLIENT_TIMEOUT"  # seconds one client command may take (default 60)
POLL_FLOOR_S = 2.0  # the controller is asked at most this often per trial
BACKOFF_MAX_S = 60.0  # while the controller does not answer, it is asked again at most this far apart
CLIENT_TIMEOUT_S = 60.0
SUBMIT_DEADLINE_S = 1800.0  # sbatch retried this long while the controller does not answer; then the trial is queued again
STOP_WAIT_S = 2 * CLIENT_TIMEOUT_S + STOP_GRACE_SECONDS  # a cancelled job's end is waited for this long
RECLAIM_WAIT_S = STOP_GRACE_SECONDS + 2 * CLIENT_TIMEOUT_S  # ... and a job another attempt left
UNANSWERED_GIVE_UP_S = 3600.0  # a running job whose controller has not answered this long: the trial is taken as lost
LOST_GRACE_S = 30.0  # a node set DOWN may still run the job's processes while SLURM ends them: their result may yet come
FORGOTTEN = "FORGOTTEN"  # the controller answered and does not know the job (no accounting, past MinJobAge)
_INVALID_JOB = "Invalid job id specified"  # squeue -j / scontrol: the controller's answer for a job it does not know
# What SLURM's clients print when the controller did not answer (slurm_strerror of the communication errors): a
# failure saying one of these, or any failure while `scontrol ping` finds no controller, concludes nothing
_TRANSIENT = ("Unable to contact slurm controller", "Socket timed out", "Zero Bytes were transmitted",
              "Communication connection failure", "Connection refused", "Resource temporarily unavailable",
              "Transport endpoint is not connected", "temporarily unable to accept", "backup controller in standby",
              "Slurm controller not responding")
_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
          "DEADLINE", "REVOKED", "SPECIAL_EXIT", FORGOTTEN}
_TERMINATED = {"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE", "REVOKED"}  # SLURM sent SIGTERM, then SIGKILL
_LOST = {"NODE_FAIL", "BOOT_FAIL", FORGOTTEN}  # the node went away under the job; or the job is gone, how unknown


def resource_options(spec: TrialSpec, *, grace_s: float = STOP_GRACE_SECONDS) -> list[str]:
    """The sbatch options for the trial's GPUs, CPUs, memory and time limit."""
    options = [f"--job-name=grpo-ablate-{Path(spec.trial_dir).name}", "--nodes=1", "--ntasks=1", "--no-requeue",
               f"--cpus-per-task={max(1, spec.num_processes)}"]
    gpus = spec.hardware.gpus
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
    limit = spec.hardware.memory_limit_mb
    if limit:
        return int(limit)
    peak = spec.host_memory_mb  # the parent resolved it from the study's probe.json (study/trial_spec.py)
    return math.ceil(peak * MEMORY_MARGIN) if peak else None


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


def read_record(trial_dir: str | os.PathLike[str]) -> dict[str, str | None] | None:
    """The trial folder's job record: {"name": the job's unique name, "job": its id once sbatch answered (None
    before)}; None when nothing was ever submitted from the folder. Written before sbatch is called."""
    try:
        raw = json.loads((Path(trial_dir) / JOB_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    job, name = raw.get("job"), raw.get("name")
    job = job if isinstance(job, str) and job else None
    name = name if isinstance(name, str) and name else None
    return {"job": job, "name": name} if job or name else None


def read_job(trial_dir: str | os.PathLike[str]) -> str | None:
    """The id of the job that ran (or runs) the trial in `trial_dir`; None if none was submitted from it (or its
    submission's answer never came: its name is in read_record)."""
    record = read_record(trial_dir)
    return None if record is None else record["job"]


def _write_record(trial_dir: str | os.PathLike[str], *, name: str, job: str | None) -> None:
    path = Path(trial_dir) / JOB_FILE
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps({"name": name, "job": job}) + "\n")
    os.replace(part, path)  # whole or absent: a reader never sees half a record


def client_timeout() -> float:
    """Seconds one client command (sbatch, squeue, ...) may take before it counts as unanswered."""
    try:
        return max(1.0, float(os.environ.get(CLIENT_TIMEOUT_ENV) or CLIENT_TIMEOUT_S))
    except ValueError:
        return CLIENT_TIMEOUT_S


def _run(env: dict[str, str] | None, *argv: str) -> subprocess.CompletedProcess[str] | None:
    """A client command's answer; None when it gave none in time (it is killed). A missing program raises."""
    try:
        return subprocess.run(list(argv), env=env or None, capture_output=True, text=True, timeout=client_timeout())
    except subprocess.TimeoutExpired:
        return None


def _controller_up(env: dict[str, str] | None) -> bool:
    """Whether the controller answers `scontrol ping` (it returns at once either way)."""
    out = _run(env, "scontrol", "ping")
    return out is not None and out.returncode == 0 and " is UP" in out.stdout


def _unanswered(out: subprocess.CompletedProcess[str] | None, env: dict[str, str] | None) -> bool:
    """Whether a failed client command means "the controller did not answer" (a timeout, a connection or socket
    error, the controller busy), never an answer: then nothing about the job may be concluded from it."""
    if out is None:
        return True
    if out.returncode == 0:
        return False
    text = f"{out.stderr}\n{out.stdout}"
    return any(words in text for words in _TRANSIENT) or not _controller_up(env)


def _find(name: str, env: dict[str, str] | None) -> str | None:
    """The id of the job named `name` (jobs this package submits have unique names); "" when the controller
    answered and knows none; None when it did not answer."""
    out = _run(env, "squeue", "-h", "-t", "all", "-n", name, "-o", "%i")
    if out is None or out.returncode != 0:
        return None
    ids = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return ids[0] if ids else ""


def job_state(job: str, env: dict[str, str] | None = None, before: str = "", name: str | None = None
              ) -> tuple[str, str] | None:
    """(state, ExitCode) of a job: sacct where there is accounting, else scontrol, else squeue; None when the
    controller did not answer (nothing may be concluded: the job is taken as it was).

    A job whose processes are still ending reads COMPLETING (squeue's word), whatever state it will end in. A job
    the controller answers for and does not know (forgotten after MinJobAge, with no accounting) reads FORGOTTEN,
    or COMPLETED when it was last seen COMPLETING (`before`): that is the positive evidence a job is gone.
    """
    state, code = "", ""
    acct = _run(env, "sacct", "-n", "-P", "-X", "-j", job, "-o", "State,ExitCode")
    line = acct.stdout.strip().splitlines()[0] if acct is not None and acct.returncode == 0 and acct.stdout.strip() else ""
    if line and "|" in line:
        state, code = line.split("|", 1)
    else:
        show = _run(env, "scontrol", "-o", "show", "job", job)
        if show is not None and show.returncode == 0 and "JobState=" in show.stdout:
            fields = dict(part.split("=", 1) for part in show.stdout.split() if "=" in part)
            state, code = fields.get("JobState", ""), fields.get("ExitCode", "")
    queued = (_run(env, "squeue", "-h", "-t", "all", "-n", name, "-o", "%i|%T") if name
              else _run(env, "squeue", "-h", "-t", "all", "-j", job, "-o", "%i|%T"))
    if queued is None or queued.returncode != 0:
        known = queued is not None and not name and _INVALID_JOB in queued.stderr and not _unanswered(queued, env)
        if not known:
            return (state, code) if state else None  # no answer: only what sacct or scontrol said, if anything
        now = ""
    else:
        now = next((s for i, s in (row.split("|", 1) for row in queued.stdout.split() if "|" in row) if i == job), "")
    if now == "COMPLETING" or (now and not state):  # its processes are not all gone yet
        return now, code
    if not state and not now:  # the controller answered and does not know it: gone; how is unknown
        return ("COMPLETED" if before == "COMPLETING" else FORGOTTEN), ""
    return state, code


def _backoff(delay: float) -> float:
    return min(BACKOFF_MAX_S, max(POLL_FLOOR_S, delay * 2))


class SlurmLauncher(Launcher):
    """Each trial a SLURM batch job, submitted from this host (registry name "slurm")."""

    def __init__(self) -> None:
        self._job: str | None = None
        self._name: str | None = None
        self._state = ""
        self._exit_code = ""
        self._env: dict[str, str] = {}
        self._result: Path | None = None
        self._log: Path | None = None
        self._lost_at: float | None = None
        self._unanswered_since: float | None = None  # the controller has not answered since (monotonic)
        self._next_ask = 0.0
        self._delay = POLL_FLOOR_S

    @classmethod
    def describe(cls, spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
        """The sbatch line that submits the trial (its output, folder and job id are the run's)."""
        extra = shlex.split(os.environ.get(SLURM_OPTIONS_ENV, ""))
        return {"launch": ["sbatch", "--parsable", *resource_options(spec), *extra, "--wrap",
                           "exec " + shlex.join(build_command(spec, spec_path))]}

    @classmethod
    def reclaim(cls, trial_dir: str | os.PathLike[str]) -> str | None:
        """End the job still running a trial another attempt is about to retry, and return once it has ended (see
        the module's words). ReclaimPending when its end cannot be confirmed in RECLAIM_WAIT_S (no controller)."""
        record = read_record(trial_dir)
        if record is None:
            return None
        job, name = record["job"], record["name"]
        deadline = time.monotonic() + RECLAIM_WAIT_S
        delay = POLL_FLOOR_S
        while job is None:  # sbatch never answered: find its job, if it made one, by its unique name
            found = _find(str(name), None)
            if found == "":
                return None  # the controller answered: nothing was submitted under that name
            if found is not None:
                job = found
                break
            if time.monotonic() > deadline:
                raise ReclaimPending(f"the SLURM controller did not answer for {RECLAIM_WAIT_S:.0f} s: whether trial "
                                     f"folder {Path(trial_dir).name}'s job {name} runs cannot be told yet")
            time.sleep(delay)
            delay = _backoff(delay)
        answer = job_state(job, name=name)
        cancelled = False
        while answer is None or exit_status(*answer) is None:
            if answer is not None and not cancelled:
                out = _run(None, "scancel", job)  # SIGTERM to its processes: the trial stops after its step, checkpointed
                cancelled = out is not None and out.returncode == 0
            if time.monotonic() > deadline:
                raise ReclaimPending(f"SLURM job {job} (trial folder {Path(trial_dir).name}) may still run: "
                                     + ("the controller did not answer" if answer is None else f"still {answer[0]}")
                                     + f" after {RECLAIM_WAIT_S:.0f} s")
            time.sleep(delay if answer is None else POLL_FLOOR_S)
            delay = _backoff(delay) if answer is None else POLL_FLOOR_S
            answer = job_state(job, before=answer[0] if answer else "", name=name)
        if not cancelled:
            return None  # it had ended by itself
        return f"cancelled SLURM job {job}, which still ran trial folder {Path(trial_dir).name} of another attempt (ended)"

    def _say(self, words: str) -> None:
        if self._log is not None:
            with self._log.open("a") as log:
                log.write(f"[grpo-ablate] {words}\n")

    def start(self, spec: TrialSpec, env: dict[str, str], log_path: Path) -> None:
        """Submit under a unique job name recorded first (JOB_FILE), so an answer that is slow or lost is found by
        name and never submitted twice; a controller that does not answer is asked again with backoff up to
        SUBMIT_DEADLINE_S (then NotStarted: the trial is queued again); a refusal is the trial's (RuntimeError)."""
        spec_path = spec.save()
        command = build_command(spec, spec_path)
        if command[0] == sys.executable:  # the same interpreter, by a path the nodes share
            command[0] = os.fspath(Path(sys.executable).absolute())
        extra = shlex.split(os.environ.get(SLURM_OPTIONS_ENV, ""))
        name = f"grpo-ablate-{Path(spec.trial_dir).name}-{secrets.token_hex(4)}"
        options = [o for o in resource_options(spec) if not o.startswith("--job-name=")]
        argv = ["sbatch", "--parsable", f"--job-name={name}", f"--output={log_path}", "--open-mode=append",
                f"--chdir={os.getcwd()}", "--export=ALL", *options, *extra, "--wrap", "exec " + shlex.join(command)]
        with log_path.open("a") as log:
            log.write("$ " + shlex.join(argv) + "\n")
        self._env, self._log, self._name = env, log_path, name
        _write_record(spec.trial_dir, name=name, job=None)  # before the answer: a lost answer is found by this name
        deadline = time.monotonic() + SUBMIT_DEADLINE_S
        delay = POLL_FLOOR_S
        job: str | None = None
        tried = False
        while job is None:
            if tried:  # did the unanswered try submit after all? never a second job beside it
                found = _find(name, env)
                if found:
                    job = found
                    self._say(f"sbatch gave no answer, but job {job} ({name}) was submitted: taken as the trial's job")
                    break
            if not tried or found == "":
                out = _run(env, *argv)
                tried = True
                if out is not None and out.returncode == 0 and out.stdout.strip():
                    job = out.stdout.strip().split(";")[0]
                    break
                if not _unanswered(out, env):
                    raise RuntimeError(f"sbatch refused the trial (exit {out.returncode}): "  # type: ignore[union-attr]
                                       f"{(out.stderr or out.stdout).strip()[:500]}")  # type: ignore[union-attr]
                why = "no answer in time" if out is None else (out.stderr or out.stdout).strip()[:200]
            else:
                why = "the controller did not answer squeue"
            if time.monotonic() > deadline:
                raise NotStarted(f"the SLURM controller did not take the trial in {SUBMIT_DEADLINE_S:.0f} s ({why}); "
                                 f"its job name {name} is recorded, so a retry finds the job should it exist")
            self._say(f"sbatch: {why}; looking for job {name} and submitting again in {delay:.0f} s")
            time.sleep(delay)
            delay = _backoff(delay)
        self._job = job
        _write_record(spec.trial_dir, name=name, job=job)
        self._result, self._lost_at = Path(spec.trial_dir) / RESULT_FILE, None
        self._state, self._exit_code = "PENDING", ""
        self._unanswered_since, self._next_ask, self._delay = None, 0.0, POLL_FLOOR_S
        self.processes_started += 1

    def _read_state(self) -> None:
        """Ask the controller, unless it did not answer recently (then wait: backoff to BACKOFF_MAX_S)."""
        assert self._job is not None
        now = time.monotonic()
        if now < self._next_ask:
            return
        answer = job_state(self._job, self._env, before=self._state, name=self._name)
        if answer is None:  # nothing concluded: the job is taken as it was
            if self._unanswered_since is None:
                self._unanswered_since = now
                self._say(f"the SLURM controller does not answer about job {self._job}: taken as {self._state or 'running'}"
                          f", asked again with backoff (up to {BACKOFF_MAX_S:.0f} s apart)")
            self._next_ask = now + self._delay
            self._delay = _backoff(self._delay)
            return
        if self._unanswered_since is not None:
            self._say(f"the SLURM controller answers again after {now - self._unanswered_since:.0f} s: job {self._job} "
                      f"is {answer[0]}")
        self._unanswered_since, self._next_ask, self._delay = None, 0.0, POLL_FLOOR_S
        self._state, self._exit_code = answer

    def poll(self) -> int | None:
        if self._job is None:
            return None
        if exit_status(self._state, self._exit_code) is None:
            self._read_state()
        if self._unanswered_since is not None and time.monotonic() - self._unanswered_since > UNANSWERED_GIVE_UP_S:
            self._say(f"the SLURM controller has not answered for {UNANSWERED_GIVE_UP_S:.0f} s: the trial is taken as "
                      f"lost; its job record stays, so its retry waits for job {self._job}'s end before it starts")
            return -9
        status = exit_status(self._state, self._exit_code)
        if self._state.split()[0:1] in (["NODE_FAIL"], [FORGOTTEN]) and self._result is not None:
            if self._result.exists():
                return status  # it wrote its result: its own record says how it ended (outcome.classify reads it first)
            self._lost_at = self._lost_at or time.monotonic()
            if time.monotonic() - self._lost_at < LOST_GRACE_S:  # its processes may still be stopping on the node
                return None
        return status

    def wait(self, seconds: float) -> int | None:
        time.sleep(max(seconds, POLL_FLOOR_S))
        return self.poll()

    def stop(self) -> None:
        """scancel (asked again while the controller does not answer), then wait for the job's end; both bounded."""
        if self._job is None or self.poll() is not None:
            return
        deadline = time.monotonic() + STOP_WAIT_S
        cancelled = False
        while self.poll() is None and time.monotonic() < deadline:
            if not cancelled:
                out = _run(self._env, "scancel", self._job)
                cancelled = out is not None and out.returncode == 0
            time.sleep(POLL_FLOOR_S)
        if self.poll() is None:
            self._say(f"job {self._job} did not end within {STOP_WAIT_S:.0f} s of its cancel "
                      + ("(the controller did not answer)" if not cancelled else "") + ": its retry waits for its end")

    def oom_evidence(self, marker: object) -> str | None:
        if self._state.split()[0:1] == ["OUT_OF_MEMORY"]:
            return f"SLURM ended job {self._job} OUT_OF_MEMORY (its cgroup's memory limit)"
        return None

    def ended(self) -> None:
        if self._job is not None and self.poll() is None:
            _run(self._env, "scancel", self._job)  # its record stays: a retry's reclaim finds it should it live on
        self._job = None
