"""A warm session: consecutive single-process trials in one long-lived child process.

A trial in its own process pays the process start, the imports of torch, transformers and TRL
(about 7-12 s on a 2-core CPU) every time; on the tiny demo that is more than its training. A
session pays it once. The parent (this class, no torch) sends each trial's spec path and
environment as one line on the child's stdin; the child (`python -m grpo_ablate.trainer.session`,
trainer/session.py) resets what a fresh process would start with (environment, threads, RNG states,
determinism flags, accelerate's state, the study's own modules: SessionBaseline), runs the
trial with the worker's own `run_spec`, writes the trial's files as a trial process would, and
answers one line. Everything else (STOP, timeout, progress, classification) is Launcher.run's,
so an outcome means the same as with a process per trial.

Isolation where it matters: the session is ended, and the next trial gets a fresh one, after
any trial that did not end cleanly (failed, out of memory, timed out, stopped by force,
interrupted) or left what the child cannot restore (threads, processes, open descriptors,
atexit handlers, names on `sys`/`builtins`: the child's answer says which, and so does the
trial's log); `keep_after` widens that (the probe keeps its session after an in-process CUDA
OOM, which the caching allocator recovers from: `for_probe`). A trial that failed after earlier
trials in the same process runs again in a fresh one, which decides: its modules were imported
in this process before (forgotten and imported again), and a registry that refuses a repeat
fails only then. A trial whose
environment differs from the session's in anything the child cannot apply at run time (all but
the CPU share's thread counts) also gets a fresh session. Only single-process trials without
vLLM share a session (`shares_a_session`); others get a process of their own.

    GRPO_ABLATE_LAUNCHER=process grpo-ablate run studies/tiny-cpu.yaml    # opt out (or `warm` to opt in)
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path
from typing import Any, Iterable

from grpo_ablate.trainer.spec import TrialResult, TrialSpec
from grpo_ablate.trainer.worker import LAUNCHED_AT_ENV
from grpo_ablate.vocab import LOG_FILE, Outcome

from .base import TERM_GRACE_SECONDS
from .local import LocalLauncher
from .process import ProcessLauncher, command_name, kill_tree
from .template import SessionProcess, start_session

__all__ = ["CLEAN_OUTCOMES", "SESSION_ATTEMPT_LOG", "WarmSession", "shares_a_session"]

_THREAD_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # the child applies these per trial (torch.set_num_threads)
CLEAN_OUTCOMES = frozenset({Outcome.COMPLETED, Outcome.PRUNED})
SESSION_ATTEMPT_LOG = "log.session.txt"  # a trial that failed in a session and ran again: the session's attempt


def shares_a_session(spec: TrialSpec) -> bool:
    """True when this spec's trial may run inside a session: one process, no vLLM."""
    vllm = str((spec.hardware.get("vllm") or {}).get("mode") or "none")
    return spec.num_processes == 1 and command_name(spec) == "python" and vllm == "none"


def _startup_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What a session fixes at its start: the environment, less what the child applies per trial.

    The thread counts are applied per trial when OMP and MKL agree (torch.set_num_threads sets
    both); whether they are set at all stays fixed (unset means the libraries' own default).
    Every trial gets its whole environment at run time; what is left out of the key is only
    what no library reads at import: the launch time, and pytest's name of the running test,
    which pytest changes at every test phase of a process that runs studies in its tests (only
    the libraries' own testing helpers read it).
    """
    threads = [env.get(k) for k in _THREAD_KEYS]
    runtime = {LAUNCHED_AT_ENV, "PYTEST_CURRENT_TEST"}
    if threads[1] is None or threads[0] == threads[1]:
        runtime |= set(_THREAD_KEYS)
    fixed = {k: v for k, v in env.items() if k not in runtime}
    fixed.update({f"{k} (set)": str(k in env) for k in _THREAD_KEYS})
    fixed["(cwd)"] = os.getcwd()
    return tuple(sorted(fixed.items()))


class WarmSession(LocalLauncher):
    """Run trials one after another in one child process; replace it after any unclean end.

        with WarmSession() as session:
            result = session.run(spec)     # a TrialResult, classified as a process per trial's would be
    """

    @classmethod
    def chosen_by_auto(cls, spec: TrialSpec, *, probe: bool = False) -> bool:
        """auto's choice for single-process CPU trials, and a probe's points (one or two steps each) on GPUs too."""
        cpu = spec.env.get("CUDA_VISIBLE_DEVICES") == "" or bool(spec.trainer.get("use_cpu"))
        return (cpu or probe) and shares_a_session(spec)

    @classmethod
    def describe(cls, spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
        """The worker command a fresh process would run: the session runs the same trial in its own process."""
        return ProcessLauncher.describe(spec, spec_path)

    def __init__(self, keep_after: Iterable[Outcome] = CLEAN_OUTCOMES) -> None:
        self.keep_after = frozenset(keep_after)
        self.processes_started = 0
        self._proc: SessionProcess | None = None
        self._key: tuple[tuple[str, str], ...] | None = None
        self._buffer = b""
        self._reply: dict[str, Any] | None = None
        self._returncode: int | None = None
        self._trials_in_process = 0

    # ---- the session's process

    def _spawn(self, key: tuple[tuple[str, str], ...], env: dict[str, str], log_path: Path, *, fork: bool) -> SessionProcess:
        proc, why = start_session(key, env, log_path, fork=fork)
        if why:
            with log_path.open("a") as log:
                log.write(f"[grpo-ablate] warm session started on its own ({why})\n")
        self.processes_started += 1
        self._buffer = b""
        self._trials_in_process = 0
        return proc

    def close(self) -> None:
        """End the child: EOF on its stdin, then a kill if it lingers."""
        proc, self._proc, self._key = self._proc, None, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=TERM_GRACE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            kill_tree(proc)

    @property
    def pid(self) -> int | None:
        """The session's process id while one is alive."""
        return None if self._proc is None or self._proc.poll() is not None else self._proc.pid

    # ---- the Launcher interface

    @classmethod
    def for_probe(cls) -> "WarmSession":
        """The probe's session keeps its process after an in-process out-of-memory point too.

        A probe point is a trial of one or two steps, and out-of-memory points are what a probe
        looks for: CUDA's error, caught by run_spec, is recovered from by emptying the caching
        allocator (what accelerate's find_executable_batch_size relies on). A point killed by the
        CPU cap, timed out, failed or interrupted still gets a fresh process for the next one.
        """
        return cls(keep_after=CLEAN_OUTCOMES | {Outcome.OOM})

    def run(self, spec: TrialSpec, **kwargs: Any) -> TrialResult:
        """Run one trial in the session; a trial that cannot share one (shares_a_session) gets its own process."""
        if not shares_a_session(spec):
            self.processes_started += 1
            return ProcessLauncher().run(spec, **kwargs)
        result = super().run(spec, **kwargs)
        reply, trial_number = self._reply or {}, self._trials_in_process
        if result.outcome is Outcome.FAILED and reply.get("outcome") == Outcome.FAILED.value and trial_number > 1:
            # Its own failure, after earlier trials in this process: a module of the trial that a
            # registry refuses to take twice (its first import was in an earlier trial) fails
            # only here. A fresh process decides; the session's attempt stays beside it.
            log_path = spec.path / LOG_FILE
            kept, first_reason = spec.path / SESSION_ATTEMPT_LOG, result.reason
            os.replace(log_path, kept)
            self.close()
            result = super().run(spec, **kwargs)
            with log_path.open("a") as log:
                log.write(f"[grpo-ablate] this trial failed as trial {trial_number} of a warm session ({kept.name}: "
                          f"{first_reason}); it ran again in a fresh process, as above\n")
        return result

    def start(self, spec: TrialSpec, env: dict[str, str], log_path: Path) -> None:
        spec_path = spec.save()
        # A CPU memory cap compares the trial's RSS with a number: a forked session counts the
        # template's pages only once it touches them, so its RSS is not a fresh process's
        capped = bool(spec.hardware.get("memory_limit_mb"))
        key = (*_startup_key(env), ("(memory cap)", str(capped)))
        if self._proc is not None and (self._proc.poll() is not None or key != self._key):
            self.close()  # gone, or started under another environment
        if self._proc is None:
            self._proc, self._key = self._spawn(key, env, log_path, fork=not capped), key
        self._reply, self._returncode = None, None
        self._trials_in_process += 1
        with log_path.open("a") as log:
            log.write(f"[grpo-ablate] warm session pid {self._proc.pid}: trial {self._trials_in_process} of this process\n")
        assert self._proc.stdin is not None
        request = {"spec": os.fspath(spec_path), "env": env}
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        except BrokenPipeError:  # it died between trials: wait() reads EOF
            pass

    def poll(self) -> int | None:
        return self.wait(0.0)

    def wait(self, seconds: float) -> int | None:
        """The trial's exit status from the child's answer line, or the session's own when it died."""
        if self._returncode is not None or self._proc is None:
            return self._returncode
        proc = self._proc
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], seconds)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:  # EOF: the session is gone (the CPU memory cap's kill, a crash)
                self._end_process()
                return self._returncode
            self._buffer += chunk
            seconds = 0.0
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
            self._returncode = int(reply["exit"])
            self._reply = reply
        except (ValueError, KeyError, TypeError):  # not our answer: trust nothing more from this process
            self._end_process()
        return self._returncode

    def stop(self) -> None:
        if self._returncode is None and self._proc is not None:
            self._end_process()

    def _end_process(self) -> None:
        proc, self._proc, self._key = self._proc, None, None
        if proc is None:
            return
        kill_tree(proc, grace=TERM_GRACE_SECONDS)
        self._returncode = proc.returncode if self._returncode is None else self._returncode

    def collect(self, spec: TrialSpec, returncode: int | None, **kwargs: Any) -> TrialResult:
        result = super().collect(spec, returncode, **kwargs)
        reply = self._reply or {}
        if result.outcome not in self.keep_after or not reply.get("clean"):
            self.close()  # whatever the trial left behind goes with the process
        return result
