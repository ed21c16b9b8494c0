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

A `kill -9` of the orchestrator kills its direct children through that signal, but what they
started in sessions of their own, or left to PID 1 (a reward's `setsid` child, a daemon's double
fork), outlives them. So every process a run starts carries a mark in its environment
(TREE_ENV, `tree_token`), and a supervisor tied to the run by a pipe SIGKILLs every marked
process when the run is gone, however it ended.

The other direction: what a trial starts (a reward that forks, even a grandchild whose parent
already exited) ends with the trial. The trial's process adopts its orphans (`adopt_orphans`)
and, when the trial is over, ends every process below it (`end_descendants`).

    python -c "from grpo_ablate.core.children import die_with_parent"    # stdlib only
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

__all__ = ["PACKAGE_ROOT", "TREE_ENV", "adopt_orphans", "importing_this_checkout", "descendants", "die_with_parent", "end_descendants", "marked", "popen_for_process",
           "process_start_time", "stopped", "tree_token"]

_PR_SET_PDEATHSIG = 1

# The folder that holds the `grpo_ablate` package (the checkout, or site-packages): a child process started with
# it first on PYTHONPATH imports this very copy of the package, installed or not. Anything else first there (the
# checkout's parent, say) could shadow real packages inside trials with a sibling folder named `trl` or `datasets`.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def importing_this_checkout(env: dict[str, str]) -> dict[str, str]:
    """`env` with PACKAGE_ROOT first on PYTHONPATH (what was there before kept after it): for every child
    process that runs a module of this package by name (`python -m grpo_ablate...`)."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != PACKAGE_ROOT]
    return {**env, "PYTHONPATH": os.pathsep.join([PACKAGE_ROOT, *rest])}


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


def stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, a job-control stop, a tracer's stop: /proc/<pid>/stat state T or t).

    A stopped process answers nothing and reaps nothing, yet is alive: a wait on it, or on what only it reports,
    must notice this state rather than wait for an answer that cannot come. False where /proc cannot tell.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode(errors="replace")
    except OSError:
        return False
    state = stat[stat.rindex(")") + 2:].split()[:1]
    return state in (["T"], ["t"])


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


# --------------------------------------------------------------------------------------------
# Every process a run started dies with the run, kill -9 included: the tree supervisor
# --------------------------------------------------------------------------------------------

TREE_ENV = "GRPO_ABLATE_TREE"  # marks every process a run started (inherited: setsid and double forks keep it)
_tree_lock = threading.Lock()
_tree_token = ""  # one per process: a warm session's startup key holds it, so it never changes
_tree: tuple[int, "subprocess.Popen[bytes]"] | None = None  # (the pipe's write end, the supervisor)


def tree_token() -> str:
    """The mark to put in the environment of every process this one starts: TREE_ENV=<token>.

    Starts, once per process (again if it died), the tree supervisor: a small stdlib process in
    a session of its own that holds the read end of a pipe whose only write end this process
    keeps (close-on-exec, so no child holds it). When this process ends, however it ends, the
    kernel closes the write end; the supervisor reads EOF and SIGKILLs every process whose
    environment carries the mark, until none is left. A child that moves to a session of its
    own, or whose parent exits first (a daemon's double fork), keeps its environment, and with
    it the mark; only one that replaces its whole environment escapes (and PR_SET_PDEATHSIG
    still covers the direct children).
    """
    global _tree, _tree_token
    with _tree_lock:
        if not _tree_token:
            _tree_token = f"{os.getpid()}-{secrets.token_hex(8)}"
        if _tree is not None and _tree[1].poll() is None:
            return _tree_token
        if _tree is not None:
            os.close(_tree[0])
        read, write = os.pipe()  # both close-on-exec; the child gets `read` as its stdin only
        try:
            supervisor = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), _SUPERVISE, _tree_token],
                                          stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, close_fds=True)
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        _tree = (write, supervisor)
        return _tree_token


def marked(token: str) -> list[int]:
    """The live processes whose environment carries TREE_ENV=<token>."""
    mark = f"{TREE_ENV}={token}".encode()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                entries = handle.read().split(b"\0")
        except OSError:
            continue
        if mark in entries:
            found.append(int(name))
    return found


_SUPERVISE = "--supervise"
SUPERVISOR_DEADLINE_S = 60.0  # how long the supervisor keeps ending marked processes (new forks included)


def _supervise(token: str) -> None:
    """The supervisor's life: wait for EOF on stdin (its run ended), then end every marked process."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only the pipe ends it: a Ctrl-C meant for the run is not for it
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    deadline = time.monotonic() + SUPERVISOR_DEADLINE_S
    me = os.getpid()
    while time.monotonic() < deadline:
        left = [pid for pid in marked(token) if pid != me]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.1)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == _SUPERVISE:
    _supervise(sys.argv[2])
