"""The warm session's process: one trial in a fresh fork of a template that has done the imports, then gone.

    python -m grpo_ablate.trainer.session              # a session (launch/warm.py starts it)
    python -m grpo_ablate.trainer.session --template   # a template that forks sessions (launchers/template.py)

A session reads one request on stdin ({"spec": path, "env": {...}}), runs that trial as a trial
process would (worker.py's `run_spec` and `record_result`), answers one JSON line ({"exit",
"outcome"}) on what was its stdout, and exits. It is thrown away after its one trial, so no
state of a trial (environment variables set at the C level, process priority, CPU affinity,
resource limits, a pending alarm, `sys.meta_path`, the garbage collector, decimal and NumPy state,
the time zone, codec registrations, patched libraries, threads, descriptors...) can reach another
trial: not by a list of what to put back, which can never be complete, but by construction.

What keeps it warm is the template (`serve_template`): it pays the imports once (torch,
transformers, TRL, datasets, accelerate, this package's trial modules: about 8 s of CPU on a
2-core machine) and forks a session per trial, at the cost of a fork. The forked child takes the
pipes, log, working folder and environment it is sent, and from there is a process that has just
done its imports (nothing else runs in the template: no trial, no thread of ours, no CUDA). The
template's protocol is one datagram per message on its stdin, a Unix socket: a request {"id",
"env", "cwd", "log"} with the session's stdin and stdout as passed descriptors, answered {"id",
"pid"}; when a session ends, {"exited": id, "returncode": ...} (Popen's convention: minus the
signal that killed it). A session started on its own (no template here: a GPU is visible, a CPU
memory cap, GRPO_ABLATE_SESSION_TEMPLATE=0) is a fresh process that pays the imports itself.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import select
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.core.child_processes import adopt_orphans, die_with_parent
from grpo_ablate.core.vocab import LOG_FILE

from .lease import keep_lease
from .memory_cap import start_memory_watch
from .signals import stop_on_sigterm
from grpo_ablate.contract.env import TEMPLATE_FLAG
from grpo_ablate.contract.spec import TrialSpec
from .worker import (
    EXIT_FAILED,
    LAUNCHED_AT_ENV,
    PARENT_PID_ENV,
    apply_spec_environment,
    end_left_processes,
    import_trial_modules,
    record_result,
    run_spec,
    watch_parent,
)

__all__ = ["FORKED_SESSION_NAME", "TEMPLATE_NAME", "main", "serve_session", "serve_template"]

# A forked session keeps its template's command line; its process name (ps -o comm, top) tells them apart.
TEMPLATE_NAME, FORKED_SESSION_NAME = "grpo-template", "grpo-session"
_PR_SET_NAME = 15
_MESSAGE_BYTES = 1 << 20  # one request: an environment of a few kB


def _name_process(name: str) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _log_to(path: Path) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at the trial's log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _apply_threads(env: dict[str, str]) -> None:
    """The trial's CPU share: torch read OMP_NUM_THREADS when the template imported it, under the template's value."""
    threads = env.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        import torch  # lazy: launch/template.py imports this module in the parent, which never loads torch

        torch.set_num_threads(int(threads))


def serve_session() -> int:
    """The child side of a warm session: one request on stdin, one trial, one JSON answer line; then the process ends.

    It leaves without the interpreter's teardown once the result and the answer are written
    (exit handlers run): the process is thrown away, and its teardown is no trial's time.
    """
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and watch_parent(int(parent)) is None:
        return EXIT_FAILED
    adopt_orphans()  # a trial's grandchildren stay below the session, where end_descendants finds them
    reply = os.fdopen(os.dup(1), "w", buffering=1)  # the answer; fds 1 and 2 become the trial's log
    import_trial_modules()  # done already in a session forked from a template
    line = next((text for text in sys.stdin if text.strip()), None)
    if line is None:
        return 0  # the parent closed it before sending a trial
    request = json.loads(line)
    spec = TrialSpec.load(request["spec"])
    _log_to(spec.path / LOG_FILE)
    os.environ.clear()
    os.environ.update(request["env"])
    _apply_threads(request["env"])
    watch = start_memory_watch(spec.trial_dir, spec.hardware)
    apply_spec_environment(spec)
    stop_on_sigterm(spec.trial_dir)  # a scheduler's SIGTERM: this trial stops after its step (trainer/signals.py)
    keep_lease(spec.trial_dir)  # another host's sign that this trial still trains (study/liveness.py)
    launched = os.environ.get(LAUNCHED_AT_ENV)
    outcome, payload = run_spec(spec, launched_at=float(launched) if launched else None)
    payload["session_pid"] = os.getpid()
    end_left_processes(payload)
    watch.close()  # memory.json before result.json: the parent reads both once the result is there
    code = record_result(spec, outcome, payload)
    reply.write(json.dumps({"exit": code, "outcome": outcome.value}) + "\n")
    reply.close()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


# --------------------------------------------------------------------------------------------
# The template: sessions at the cost of a fork
# --------------------------------------------------------------------------------------------


def serve_template() -> bool:
    """Import what a session imports, then fork one session per request on stdin (a Unix socket).

    Returns False in the template when its parent closes the socket (the template then exits,
    and the kernel ends the sessions it forked: each dies with its parent), True in a forked
    session, which the caller then serves (`serve_session`). The template reaps its sessions
    and reports each one's exit status: the parent cannot wait for a process that is not its child.
    """
    control = socket.socket(fileno=0)  # type: ignore[call-arg]  # the family and type are read from the descriptor
    _name_process(TEMPLATE_NAME)
    import_trial_modules()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD writes to the wake-up pipe
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a scheduler's TERM to every process: the sessions stop their trials gracefully (trainer/signals.py), and die with this template; it ends when its parent closes the socket
    signal.set_wakeup_fd(wake_write)
    sessions: dict[int, int] = {}  # pid -> the request's id
    while True:
        ready, _, _ = select.select([control.fileno(), wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
        for pid in list(sessions):
            ended, status = os.waitpid(pid, os.WNOHANG)
            if ended:
                control.send(json.dumps({"exited": sessions.pop(pid), "returncode": os.waitstatus_to_exitcode(status)}).encode())
        if control.fileno() not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, _MESSAGE_BYTES, 2)
        if not message:
            return False  # the parent is done with this template
        request = json.loads(message)
        preexec = die_with_parent()
        pid = os.fork()
        if pid == 0:
            try:
                control.detach()  # fd 0 becomes the session's stdin below: never closed as a socket
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.close(wake_read)
                os.close(wake_write)
                _become_session(request, fds, preexec)
            except BaseException:  # noqa: BLE001 - never back into the template's loop
                os._exit(EXIT_FAILED)
            return True
        for fd in fds:
            os.close(fd)
        sessions[pid] = request["id"]
        control.send(json.dumps({"id": request["id"], "pid": pid}).encode())


def _become_session(request: dict[str, Any], fds: list[int], die_with_template: Callable[[], None]) -> None:
    """In the forked child: take what a session started on its own gets from its parent.

    Its own process group (so a launcher can signal the whole tree), death with the template,
    stdin and stdout from the parent's pipes, stderr to the trial's log, the working folder,
    the environment (its launch time and thread counts are this session's own) and the argv.
    """
    os.setsid()
    die_with_template()
    _name_process(FORKED_SESSION_NAME)
    stdin_fd, stdout_fd = fds
    os.dup2(stdin_fd, 0)
    os.dup2(stdout_fd, 1)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    for fd in (log, stdin_fd, stdout_fd):
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    del sys.argv[1:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == [TEMPLATE_FLAG]:
        if not serve_template():
            return 0
    elif argv:
        print(f"usage: python -m grpo_ablate.trainer.session [{TEMPLATE_FLAG}]", file=sys.stderr)
        return 2
    return serve_session()


if __name__ == "__main__":
    raise SystemExit(main())
