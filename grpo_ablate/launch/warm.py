"""A warm session: each single-process trial in a fresh fork of a template that has done the imports.

A trial in its own process pays the process start and the imports of torch, transformers and TRL
(about 7-12 s on a 2-core CPU) every time; on the tiny demo that is more than its training. A
session template (launchers/template.py) pays them once and forks a session per trial; the fork
runs that one trial and is thrown away (trainer/session.py). So no state crosses from one trial
to the next by construction, whatever a trial changes in its process, and a trial starts at the
cost of a fork. The parent (this class, no torch) sends the trial's spec path and environment
as one line on the session's stdin; the session runs it with the worker's own `run_spec`, writes
the trial's files as a trial process would, and answers one line. Everything else (STOP, timeout,
progress, classification) is Launcher.run's, so an outcome means the same as with a process per
trial. Where no template can serve (a GPU is visible, a CPU memory cap, the opt-out), the
session is a process of its own, started for the trial. Only single-process trials without vLLM
run in a session (`shares_a_session`); others get a process tree of their own (ProcessLauncher).

    GRPO_ABLATE_LAUNCHER=process grpo-ablate run studies/tiny-cpu.yaml    # opt out (or `warm` to opt in)
    python benchmarks/session_template.py                                 # what a trial's fork costs
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
from pathlib import Path
from typing import Any

from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.contract.env import LAUNCHED_AT_ENV
from grpo_ablate.core.vocab import LEASE_ENV

from .base import TERM_GRACE_SECONDS
from .local import LocalLauncher
from .process import ProcessLauncher, command_name, kill_tree
from .template import SessionProcess, start_session

__all__ = ["WarmSession", "shares_a_session"]

_THREAD_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # the session applies these per trial (torch.set_num_threads)


def shares_a_session(spec: TrialSpec) -> bool:
    """True when this spec's trial may run inside a session: one process, no vLLM, the built-in trainer."""
    if spec.script is not None:
        return False  # a command trial runs the user's own script in its own environment
    vllm = str(spec.hardware.vllm.mode or "none")
    return spec.num_processes == 1 and command_name(spec) == "python" and vllm == "none"


def _startup_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What a session fixes at its start: the environment, less what the child applies per trial.

    The thread counts are applied per trial when OMP and MKL agree (torch.set_num_threads sets
    both); whether they are set at all stays fixed (unset means the libraries' own default).
    Every trial gets its whole environment at run time; what is left out of the key is only
    what no library reads at import: the launch time, the lease's period (trainer/lease.py), and pytest's name of
    the running test,
    which pytest changes at every test phase of a process that runs studies in its tests (only
    the libraries' own testing helpers read it).
    """
    threads = [env.get(k) for k in _THREAD_KEYS]
    runtime = {LAUNCHED_AT_ENV, LEASE_ENV, "PYTEST_CURRENT_TEST"}
    if threads[1] is None or threads[0] == threads[1]:
        runtime |= set(_THREAD_KEYS)
    fixed = {k: v for k, v in env.items() if k not in runtime}
    fixed.update({f"{k} (set)": str(k in env) for k in _THREAD_KEYS})
    fixed["(cwd)"] = os.getcwd()
    return tuple(sorted(fixed.items()))


class WarmSession(LocalLauncher):
    """Run each trial in a fresh session forked from the template for its environment.

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

    def __init__(self) -> None:
        self.processes_started = 0
        self._proc: SessionProcess | None = None
        self._buffer = b""
        self._reply: dict[str, Any] | None = None
        self._returncode: int | None = None

    # ---- the session's process

    def _spawn(self, key: tuple[tuple[str, str], ...], env: dict[str, str], log_path: Path, *, fork: bool) -> SessionProcess:
        proc, why = start_session(key, env, log_path, fork=fork)
        if why:
            with log_path.open("a") as log:
                log.write(f"[grpo-ablate] warm session started on its own ({why})\n")
        self.processes_started += 1
        self._buffer = b""
        return proc

    def close(self) -> None:
        """End the session: EOF on its stdin (it has answered and is leaving), then a kill if it lingers."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=TERM_GRACE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            pass
        kill_tree(proc)  # whatever of its process group outlived it

    @property
    def pid(self) -> int | None:
        """The session's process id while one is alive."""
        return None if self._proc is None or self._proc.poll() is not None else self._proc.pid

    # ---- the Launcher interface

    def run(self, spec: TrialSpec, **kwargs: Any) -> TrialResult:
        """Run one trial in a fresh session; a trial that cannot share one (shares_a_session) gets its own process."""
        if not shares_a_session(spec):
            self.processes_started += 1
            return ProcessLauncher().run(spec, **kwargs)
        return super().run(spec, **kwargs)

    def start(self, spec: TrialSpec, env: dict[str, str], log_path: Path) -> None:
        spec_path = spec.save()
        # A CPU memory cap compares the trial's RSS with a number: a forked session counts the
        # template's pages only once it touches them, so its RSS is not a fresh process's
        capped = bool(spec.hardware.memory_limit_mb)
        key = (*_startup_key(env), ("(memory cap)", str(capped)))
        self.close()  # a session serves one trial
        self._proc = self._spawn(key, env, log_path, fork=not capped)
        self._reply, self._returncode = None, None
        with log_path.open("a") as log:
            log.write(f"[grpo-ablate] warm session pid {self._proc.pid}: a fresh session for this trial\n")
        assert self._proc.stdin is not None
        request = {"spec": os.fspath(spec_path), "env": env}
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        except BrokenPipeError:  # it died before its trial: wait() reads EOF
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
        proc, self._proc = self._proc, None
        if proc is None:
            return
        ended = kill_tree(proc, grace=TERM_GRACE_SECONDS)
        if self._returncode is None:  # killed: its own status, or the SIGKILL's when nothing reported it in time
            self._returncode = proc.returncode if ended and proc.returncode is not None else -signal.SIGKILL

    def collect(self, spec: TrialSpec, returncode: int | None, **kwargs: Any) -> TrialResult:
        result = super().collect(spec, returncode, **kwargs)
        self.close()  # the session is thrown away with whatever the trial left in it
        return result
