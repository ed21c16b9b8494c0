"""Many short trials in one process, one after another: the probe's points.

A probe point is a trial of one or two optimizer steps. In its own process it pays the process
start, the imports of torch, transformers and TRL, and the model load every time: about 12 s
on the 2-core CPU machine, against about a second for the steps themselves. A session pays that
once. The parent (`ProbeSession`, no torch) sends each point's spec.json path on the child's
stdin; the child (`python -m grpo_ablate.trainer.probe_session`) runs it with the worker's own
`run_spec`, writes the point's result.json, memory.json and log.txt into the point's folder as a
trial would, frees the point's memory, and answers one line. The parent classifies each point
with the launcher's own rules (trainer/launch.py), so a point's outcome means the same as a
trial's.

Out of memory: CUDA's error is caught by run_spec and the session goes on, after the caching
allocator is emptied (the same recovery accelerate's find_executable_batch_size relies on). On
CPU, hardware.memory_limit_mb's watch writes the point's result as `oom` and kills the process
group; the parent then starts a fresh session for the next point. A point that hangs is killed at
its timeout, and the next point gets a fresh session too.

Only single-process trials without vLLM share a session (`shares_a_session`): several ranks
would have to agree on every point, and vLLM's engine does not hand its GPU memory back within
a process. Those points keep a process each (run_trial).

    python -m grpo_ablate.trainer.probe_session     # started by ProbeSession; reads spec paths on stdin
"""

from __future__ import annotations

import gc
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..vocab import LOG_FILE, Outcome
from .launch import (_die_with_parent, _environment, _finish, _kill_tree, _launcher, _oom_kill_evidence, _prepare,
                     oom_kill_count, run_trial)
from .spec import TrialResult, TrialSpec

__all__ = ["ProbeSession", "main", "release_memory", "shares_a_session"]

POLL_SECONDS = 0.2


def shares_a_session(spec: TrialSpec) -> bool:
    """True when this spec's trial may run inside a session: one process, no vLLM."""
    vllm = str((spec.hardware.get("vllm") or {}).get("mode") or "none")
    return spec.num_processes == 1 and _launcher(spec) == "python" and vllm == "none"


class ProbeSession:
    """The parent side: run specs one after another in one long-lived child process.

        with ProbeSession() as session:
            result = session.run(spec)     # a TrialResult, classified as run_trial would
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self.processes_started = 0

    def __enter__(self) -> "ProbeSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the child: EOF on its stdin, then a kill if it lingers."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            _kill_tree(proc)

    def _start(self, spec: TrialSpec, log_path: Path) -> subprocess.Popen[bytes]:
        env = _environment(spec)
        with log_path.open("ab") as log:  # what the child prints before its first point is redirected
            proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.trainer.probe_session"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True,
                                    cwd=os.getcwd(), preexec_fn=_die_with_parent(os.getpid()))
        self._buffer = b""
        self.processes_started += 1
        return proc

    def _reply(self, proc: subprocess.Popen[bytes], deadline: float | None) -> tuple[dict[str, Any] | None, bool]:
        """The child's answer line; (None, timed_out) when it died or ran past `deadline`."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            if deadline is not None and time.monotonic() > deadline:
                return None, True
            ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:  # EOF: the child is gone (an OOM kill by the cap, a crash)
                return None, False
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line), False
        except json.JSONDecodeError:
            return None, False

    def run(self, spec: TrialSpec) -> TrialResult:
        """Run one spec in the session (starting one if none is alive); never raises for the trial's own failure.

        A spec that cannot share a session (shares_a_session) gets a process of its own (run_trial).
        """
        if not shares_a_session(spec):
            self.processes_started += 1
            return run_trial(spec)
        trial_dir = _prepare(spec)
        log_path = trial_dir / LOG_FILE
        spec_path = spec.save()
        oom_before = oom_kill_count()
        proc = self._proc
        if proc is None or proc.poll() is not None:
            proc = self._proc = self._start(spec, log_path)
        assert proc.stdin is not None
        started = time.monotonic()
        try:
            proc.stdin.write(f"{spec_path}\n".encode())
            proc.stdin.flush()
        except BrokenPipeError:  # it died between points: the reply below reads EOF
            pass
        deadline = None if spec.timeout_s is None else started + float(spec.timeout_s)
        try:
            reply, timed_out = self._reply(proc, deadline)
        except BaseException:  # Ctrl-C or the watch itself failed: never leave the child unwatched
            _kill_tree(proc)
            self._proc = None
            raise
        if reply is None:
            if proc.poll() is None:
                _kill_tree(proc)
            returncode = proc.wait()
            self._proc = None
        else:
            returncode = int(reply.get("exit", 0))
        return _finish(spec, returncode, timed_out=timed_out, stop_reason=None, log_path=log_path,
                       oom_kill=_oom_kill_evidence(oom_before, oom_kill_count()))


def release_memory() -> None:
    """Hand a finished point's memory back, so the next point's peak starts where a fresh process's would.

    gc for the trainer's reference cycles; CUDA's caching allocator; glibc keeps freed heap
    pages mapped until malloc_trim returns them to the kernel (RSS is what the CPU cap reads).
    """
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the allocator keeps what it keeps
        pass


def _log_to(path: Path) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at the point's log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """The child side: one spec path per stdin line, one JSON answer line per point."""
    from .memory_cap import start_memory_watch
    from .worker import LAUNCHED_AT_ENV, PARENT_PID_ENV, apply_spec_environment, record_result, run_spec, watch_parent

    parent = os.environ.get(PARENT_PID_ENV)
    if parent and watch_parent(int(parent)) is None:
        return 1
    reply = os.fdopen(os.dup(1), "w", buffering=1)  # the answers; fds 1 and 2 become each point's log
    launched = os.environ.get(LAUNCHED_AT_ENV)
    watch = None
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = TrialSpec.load(line.strip())
        _log_to(spec.path / LOG_FILE)
        first = watch is None  # only the first point paid the start-up
        if watch is None:
            watch = start_memory_watch(spec.trial_dir, spec.hardware)
        else:
            watch.retarget(spec.trial_dir)
        apply_spec_environment(spec)
        outcome, payload = run_spec(spec, launched_at=float(launched) if launched and first else None)
        payload["session_pid"] = os.getpid()
        release_memory()
        watch.poll()
        watch.write()
        code = record_result(spec, outcome, payload)
        reply.write(json.dumps({"exit": code, "outcome": outcome.value}) + "\n")
        if outcome is Outcome.INTERRUPTED:
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
