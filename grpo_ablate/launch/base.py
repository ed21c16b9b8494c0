"""What a launcher is: start a trial, poll it, stop it, collect its result.

A launcher knows how to make a trial run somewhere and how to end it; everything else about a
trial is the same wherever it runs, and lives in `Launcher.run`: the STOP file for a graceful
stop (pruned, interrupted), the grace period after it, the trial's timeout, Ctrl-C, progress
from metrics.jsonl, and the classification of how it ended (watch.py, outcome.py). A new place
to run trials (SLURM, SkyPilot, Ray) is one subclass with four methods, and one line in the
registry (registry.py) that names it for `hardware.launcher`:

- `start(spec, env, log_path)`: begin running the trial whose spec.json is written;
- `wait(seconds)` / `poll()`: the trial's exit status once it has ended, else None;
- `stop()`: end the trial now, and return once it has ended (after the STOP file's grace);
- `collect(...)`: the TrialResult (by default: read the trial's files and classify them);
- `reclaim(trial_dir)` (a classmethod): end what a dead orchestrator's trial left running
  before it is queued again (a remote job; local trials end with their orchestrator).

Launchers are parent side: no torch here, so the orchestrator's memory stays flat.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.contract.metrics import summarize_trial
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.contract.env import LAUNCHED_AT_ENV, forced_environment
from grpo_ablate.core.vocab import LOG_FILE, METRICS_FILE, Outcome

from .watch import MetricsTail, finalize, finish, log_tail, prepare, request_stop, requested_stop, taken

__all__ = ["Capabilities", "Launcher", "NotStarted", "POLL_SECONDS", "ReclaimPending", "STOP_GRACE_SECONDS", "TERM_GRACE_SECONDS", "trial_environment"]

POLL_SECONDS = 0.5
STOP_GRACE_SECONDS = 60.0  # after a STOP, how long a step may take before the trial is ended by force
TERM_GRACE_SECONDS = 10.0  # between SIGTERM and SIGKILL


def trial_environment(spec: TrialSpec) -> dict[str, str]:
    """The environment a trial runs under wherever it runs: this process's, the spec's own, and the launch contract.

    What only holds on this host (the orchestrator's pid, this checkout on PYTHONPATH) is added
    by the local launchers (local.py).
    """
    env = dict(os.environ)
    env.update(spec.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.update(forced_environment(spec))  # read at import: it must be there before the process starts
    env[LAUNCHED_AT_ENV] = repr(time.time())
    return env


class ReclaimPending(Exception):
    """What a launcher left of a trial may still run and its end could not be confirmed in time (a cluster's
    controller that does not answer): the trial must not be run again yet (Launcher.reclaim). Says what and why."""


class NotStarted(Exception):
    """The place a trial runs did not answer while the trial was being started (a cluster's controller away longer
    than the launcher waits): nothing of the cell is to blame, so the trial is interrupted and queued again."""


@dataclass(frozen=True)
class Capabilities:
    """What a launcher's trials may be assumed to be, declared by the launcher, read by whoever must know.

    - `local_processes`: the trial's processes are this host's children (their pids mean something
      here; a dead orchestrator's trial can be found by pid);
    - `cgroup_oom`: this host's memory cgroup counts the trial's OOM kills (outcome.oom_kill_count);
    - `remote`: the trial runs where a scheduler puts it, with the GPUs it grants (this host's
      GPUs and CPU slots are not the trial's: launch/devices.py leaves them alone);
    - `auto`: `hardware.launcher: auto` may choose it (registry.launcher_name asks `chosen_by_auto`).
    """

    local_processes: bool
    cgroup_oom: bool
    remote: bool
    auto: bool = False


class Launcher(ABC):
    """Runs one trial at a time. `run` is the whole life of a trial; subclasses say where it runs."""

    capabilities = Capabilities(local_processes=False, cgroup_oom=False, remote=True)

    @classmethod
    def chosen_by_auto(cls, spec: TrialSpec, *, probe: bool = False) -> bool:
        """Whether `hardware.launcher: auto` takes this launcher for `spec` (asked in registry order)."""
        return False

    @classmethod
    def describe(cls, spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
        """The command lines that would run `spec` (for `plan --commands`), by role ("launch", ...); nothing is started."""
        return {}

    @classmethod
    def reclaim(cls, trial_dir: str | os.PathLike[str]) -> str | None:
        """A dead run's trial in `trial_dir` is being queued again: end whatever of it this kind of launcher left running.

        Called before the requeue (study/runner.py, study/ledger.StaleTrialRequeue), for every
        registered launcher, so two runs never train one trial. Return once it has ended, with
        words for the log, or None when there was nothing of this launcher's. Local launchers
        leave nothing: their trials watch the orchestrator's pid and stop when it dies.
        """
        return None

    @abstractmethod
    def start(self, spec: TrialSpec, env: dict[str, str], log_path: Path) -> None:
        """Begin the trial (spec.json is written). Raise if it cannot start: the trial is then failed."""

    @abstractmethod
    def poll(self) -> int | None:
        """The trial's exit status once it has ended (0 completed/stopped, 1 failed, 3 oom, <0 a signal); else None."""

    @abstractmethod
    def stop(self) -> None:
        """End the running trial now (no grace beyond the kill's own); return once it has ended."""

    def wait(self, seconds: float) -> int | None:
        """Wait up to `seconds` for the trial to end; its exit status, or None while it runs."""
        time.sleep(seconds)
        return self.poll()

    def collect(self, spec: TrialSpec, returncode: int | None, *, timed_out: bool, stop_reason: str | None,
                log_path: Path, oom_kill: str | None) -> TrialResult:
        """The ended trial's result: its files, classified (watch.finish)."""
        return finish(spec, returncode, timed_out=timed_out, stop_reason=stop_reason, log_path=log_path, oom_kill=oom_kill)

    def ended(self) -> None:
        """Called once the trial is over, whatever happened (release what start() took)."""

    processes_started = 0  # trial processes this launcher started (a warm session counts its sessions)

    @classmethod
    def for_probe(cls) -> "Launcher":
        """The instance `grpo-ablate probe` runs its points with."""
        return cls()

    def environment(self, spec: TrialSpec) -> dict[str, str]:
        """The trial's environment (trial_environment; a local launcher adds what holds on this host only)."""
        return trial_environment(spec)

    def oom_marker(self) -> object:
        """Taken before the trial starts, handed to oom_evidence after it ended: the place's own OOM counter."""
        return None

    def oom_evidence(self, marker: object) -> str | None:
        """Evidence from outside the trial's processes that it ran out of memory (the kernel's, a scheduler's); None without."""
        return None

    def close(self) -> None:
        """Release whatever the launcher holds between trials."""

    def __enter__(self) -> "Launcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self,
        spec: TrialSpec,
        *,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        stop_event: threading.Event | None = None,
        poll_seconds: float = POLL_SECONDS,
        stop_grace_s: float = STOP_GRACE_SECONDS,
    ) -> TrialResult:
        """Run one trial to its end and classify it; never raises for a trial's own failure.

        `on_progress(row)` is called from this thread with every new metrics.jsonl row.
        `stop_event` set ends the trial after the current step as "pruned"; a STOP file written by
        anyone (request_stop) ends it with the reason it holds. Ctrl-C in the parent stops the trial
        as "interrupted" (unless another reason came first), then re-raises. Call it from a thread
        that lives until it returns: the trial's parent-death signal follows that thread.
        """
        trial_dir = prepare(spec)
        log_path = trial_dir / LOG_FILE
        tail = MetricsTail(trial_dir / METRICS_FILE)

        def deliver(rows: list[dict[str, Any]]) -> None:
            if on_progress is not None:
                for row in rows:
                    on_progress(row)

        early = requested_stop(trial_dir)
        if early is not None:  # stopped before it started: nothing to run
            spec.save()
            outcome = Outcome(early)
            result = TrialResult(outcome, f"stopped by the parent ({outcome.value}) before it started",
                                 metrics=summarize_trial(trial_dir), trial_dir=spec.trial_dir)
            finalize(trial_dir, result, None)
            return result
        oom_before = self.oom_marker()
        started = time.monotonic()
        timed_out = False
        stop_reason: str | None = None
        stop_requested_at: float | None = None
        try:
            self.start(spec, self.environment(spec), log_path)
        except Exception as exc:  # could not even start: a failed trial (or, NotStarted, one queued again)
            self.ended()
            spec.save()
            message = f"could not start the trial: {type(exc).__name__}: {exc}"
            with log_path.open("a") as log:
                log.write(message + "\n")
            result = TrialResult(Outcome.INTERRUPTED if isinstance(exc, NotStarted) else Outcome.FAILED, message, metrics=summarize_trial(trial_dir), exception_type=type(exc).__name__,
                                 exception_message=str(exc), log_tail=log_tail(log_path), trial_dir=spec.trial_dir)
            finalize(trial_dir, result, None)
            return result
        try:
            while True:
                returncode = self.wait(poll_seconds)
                deliver(tail.read())
                if returncode is not None:
                    break
                now = time.monotonic()
                if stop_reason is None:
                    if stop_event is not None and stop_event.is_set():
                        request_stop(trial_dir, Outcome.PRUNED.value)
                    stop_reason = requested_stop(trial_dir)
                    if stop_reason is not None:
                        stop_requested_at = now
                if stop_requested_at is not None and now - stop_requested_at > stop_grace_s:
                    self.stop()
                if taken(trial_dir) is not None:  # another run took it over (study/liveness.py): end it now, no grace
                    self.stop()
                if spec.timeout_s is not None and now - started > spec.timeout_s:
                    timed_out = True
                    self.stop()
        except KeyboardInterrupt:
            try:
                request_stop(trial_dir, Outcome.INTERRUPTED.value)
            except OSError:  # no STOP can be written: end it now rather than after its step
                self.stop()
            returncode = self.wait(TERM_GRACE_SECONDS)
            if returncode is None:
                self.stop()
                returncode = self.poll()
            self.ended()
            self.collect(spec, returncode, timed_out=False, stop_reason=requested_stop(trial_dir), log_path=log_path,
                         oom_kill=self.oom_evidence(oom_before))
            raise
        except BaseException:  # the watch itself failed (a progress callback, the disk): never leave the trial unwatched
            self.stop()
            self.ended()
            raise
        self.ended()
        deliver(tail.read())
        return self.collect(spec, returncode, timed_out=timed_out, stop_reason=stop_reason, log_path=log_path,
                            oom_kill=self.oom_evidence(oom_before))
