"""Every process the tool starts dies with the tool: one parent-death signal for all of them.

A child started in its own session (trials, the warm session, the vLLM server) or simply left
running (advise's sampler) outlives a `kill -9` of its parent and runs on under PID 1. Linux's
PR_SET_PDEATHSIG makes the kernel send the child SIGKILL when its parent goes, whatever the
parent died of. Every `subprocess` start in the package passes `preexec_fn=die_with_parent()`.

The signal follows the *thread* that started the child, not the process: start a child from a
thread that lives at least as long as the child should (the study's worker threads wait on
their trial), or through `popen_for_process`, whose one starting thread lives as long as the
process (a warm session outlives the worker thread that first used it). Elsewhere than Linux
it does nothing; trial workers also watch their orchestrator's pid (trainer/worker.py).

The other direction: what a trial starts (a reward that forks, even a grandchild whose parent
already exited) ends with the trial. The trial's process adopts its orphans (`adopt_orphans`)
and, when the trial is over, ends every process below it (`end_descendants`).

    python -c "from grpo_ablate.children import die_with_parent"    # stdlib only
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

__all__ = ["adopt_orphans", "descendants", "die_with_parent", "end_descendants", "popen_for_process", "process_start_time"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn`: the kernel SIGKILLs the child when the starting thread ends.

    libc is loaded here, in the parent, so the forked child only makes the call. If the parent
    died between fork and the call, nobody would signal the child: it then ends itself.
    """
    parent_pid = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


_starter: ThreadPoolExecutor | None = None
_starter_lock = threading.Lock()


def popen_for_process(args: list[str], **kwargs: Any) -> "subprocess.Popen[bytes]":
    """`subprocess.Popen(args, preexec_fn=die_with_parent(), **kwargs)`, started from a thread that
    lives as long as this process: the child dies with the process, not with the calling thread."""
    global _starter
    with _starter_lock:
        if _starter is None:
            _starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="child-starter")
    preexec = die_with_parent()

    def start() -> "subprocess.Popen[bytes]":
        return subprocess.Popen(args, preexec_fn=preexec, **kwargs)

    return _starter.submit(start).result()


# --------------------------------------------------------------------------------------------
# A trial's whole process tree ends with the trial
# --------------------------------------------------------------------------------------------

_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux's PR_SET_CHILD_SUBREAPER).

    A reward that forks a grandchild and lets the middle process exit (`sh -c "sleep 300 &"`, a
    daemon's double fork, even one in a session of its own) leaves the grandchild to PID 1,
    where no trial can find it. With this set, the grandchild is re-parented to this process
    instead, so `end_descendants` still finds it. False where the call is not available.
    """
    if not sys.platform.startswith("linux"):
        return False
    return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def process_start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot, /proc/<pid>/stat field 22); None when it is gone or a zombie.

    With the pid it names one process for the machine's uptime: a pid the kernel gave to another
    process since has another start time. Elsewhere than Linux: "?" for a live pid (no better identity).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode(errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    fields = stat[stat.rindex(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live, non-zombie process (from /proc; empty elsewhere)."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields and fields[0] not in ("Z", "X"):
            out[int(name)] = int(fields[1])
    return out


def descendants(pid: int | None = None) -> list[int]:
    """The live processes below `pid` (default: this process), at any depth."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return sorted(found)


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200] or f"pid {pid}"
    except OSError:
        return f"pid {pid}"


def _reap() -> None:
    """Collect the exit status of this process's ended children (re-parented orphans included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_descendants(grace: float = 5.0) -> list[str]:
    """End every process below this one: SIGTERM, then SIGKILL after `grace` seconds; their command lines.

    Called where a trial is over and nothing it started may outlive it (the trial worker as it
    exits, the warm session between trials). With `adopt_orphans` set, a grandchild whose parent
    already exited is below this process too.
    """
    found = descendants()
    if not found:
        return []
    names = [_command_line(pid) for pid in found]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in descendants():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap()
            if not descendants():
                return names
            time.sleep(0.05)
    _reap()
    return names
