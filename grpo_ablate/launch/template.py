"""Warm sessions forked from a template that has done their imports: a fresh session at fork cost.

A session's start is its imports (torch, transformers, TRL: about 8 s of CPU on 2 cores), and
every warm trial gets a session of its own, thrown away after it (trainer/session.py). A template
(`python -m grpo_ablate.trainer.session --template`, started under the first session's
environment) imports once and forks every later session with that environment; the child
(trainer/session.py) then is what a session started on its own is after its imports.

The parent side here: `start_session(key, env, log_path)` returns the session's process, forked
from the template kept for `key` (a session's startup key: its environment less what a session
applies per trial) or, where no template answers, started on its own as before. The process
it returns behaves as a `subprocess.Popen` does for a warm session (pid, stdin, stdout, poll,
wait, returncode): the template, its parent, reports its exit status. A process keeps at most
`KEEP_TEMPLATES` templates; one whose sessions have all ended is the first to go. Sessions that
could see a GPU, and those of trials under a CPU memory cap, are started on their own (see
`start_session`).

    GRPO_ABLATE_SESSION_TEMPLATE=0 grpo-ablate run study.yaml   # every session started on its own
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any, Hashable, Protocol

from grpo_ablate.core.children import popen_for_process, stopped
from grpo_ablate.contract.env import TEMPLATE_FLAG

from .base import TERM_GRACE_SECONDS

__all__ = ["KEEP_TEMPLATES", "TEMPLATE_ENV", "SessionProcess", "SessionTemplate", "close_templates", "start_session"]

TEMPLATE_ENV = "GRPO_ABLATE_SESSION_TEMPLATE"  # "0": start every session on its own
KEEP_TEMPLATES = 2
REPLY_SECONDS = 300.0  # a template answers once its imports are done: minutes on a slow disk, never hours
CHECK_SECONDS = 1.0  # how often a wait on the template looks whether it was stopped (SIGSTOP): then it never answers
_SESSION_COMMAND = ["-m", "grpo_ablate.trainer.session"]


class SessionProcess(Protocol):
    """What a warm session needs of its child process: a Popen, or a session forked from a template."""

    pid: int
    returncode: int | None

    @property
    def stdin(self) -> IO[bytes] | None: ...

    @property
    def stdout(self) -> IO[bytes] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ForkedSession:
    """A session forked from a template: Popen's interface, with the exit status the template reports."""

    def __init__(self, template: "SessionTemplate", token: int, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.args = [sys.executable, *_SESSION_COMMAND, f"(forked by template pid {template.pid})"]
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None
        self._template, self._token = template, token

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._template.exit_status(self._token, timeout=0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status the template reports; a stopped template is ended first (it would never report), and its
        sessions with it. `timeout` None waits without end only for a template that runs."""
        if self.returncode is None:
            self.returncode = self._template.exit_status(self._token, timeout=timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode


class SessionTemplate:
    """One template process and its socket; forks sessions for any thread of this process."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = popen_for_process([sys.executable, *_SESSION_COMMAND, TEMPLATE_FLAG], stdin=theirs.fileno(),
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                           start_new_session=True, cwd=os.getcwd())
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._socket = ours
        self._send_lock = threading.Lock()
        self._changed = threading.Condition()
        self._tokens = itertools.count()
        self._replies: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self._live: set[int] = set()
        self.gone = False
        threading.Thread(target=self._read, name="grpo-ablate-template-reader", daemon=True).start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def stopped(self) -> bool:
        """Whether the template process is stopped (SIGSTOP): it forks nothing and reports no session's end."""
        return not self.gone and stopped(self._proc.pid)

    def end_stopped(self) -> bool:
        """End a stopped template (SIGKILL reaches a stopped process); its sessions end with it (their parent-death
        signal) and each is reported killed. True when it was stopped and so ended."""
        if not self.stopped:
            return False
        try:
            self._proc.kill()
        except OSError:
            pass
        return True

    @property
    def busy(self) -> bool:
        """Whether a session forked from it is still running (its template must stay to report its end)."""
        with self._changed:
            return bool(self._live)

    def _read(self) -> None:
        """The template's messages: answers to fork requests, and the exit statuses of its sessions."""
        while True:
            try:
                message = self._socket.recv(65536)
            except OSError:
                message = b""
            with self._changed:
                if not message:  # the template is gone, and with it (death signal) every session it forked
                    self.gone = True
                    for token in self._live:
                        self._exits.setdefault(token, -signal.SIGKILL)
                    self._live.clear()
                    self._changed.notify_all()
                    return
                answer = json.loads(message)
                if "exited" in answer:
                    self._exits[answer["exited"]] = int(answer["returncode"])
                    self._live.discard(answer["exited"])
                else:
                    self._replies[answer["id"]] = answer
                self._changed.notify_all()

    def fork(self, env: dict[str, str], log_path: Path) -> ForkedSession:
        """A new session with this environment and its stderr on `log_path`; OSError when the template cannot give one."""
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        with self._changed:
            token = next(self._tokens)
            self._live.add(token)  # until its exit is reported (or the template goes)
        request = json.dumps({"id": token, "env": env, "cwd": os.getcwd(), "log": os.fspath(log_path)}).encode()
        try:
            with self._send_lock:
                socket.send_fds(self._socket, [request], [stdin_read, stdout_write])
            deadline = time.monotonic() + REPLY_SECONDS
            with self._changed:
                while not (token in self._replies or self.gone) and time.monotonic() < deadline and not self.stopped:
                    self._changed.wait(timeout=min(CHECK_SECONDS, max(0.0, deadline - time.monotonic())))
                reply = self._replies.pop(token, None)
                if reply is None:
                    self._live.discard(token)
                    why = (" (it is gone)" if self.gone else " (it is stopped)" if self.stopped
                           else f" in {REPLY_SECONDS:.0f} s")
                    raise OSError(f"the session template (pid {self.pid}) did not answer{why}")
        except BaseException:
            os.close(stdin_write)
            os.close(stdout_read)
            raise
        finally:
            os.close(stdin_read)
            os.close(stdout_write)
        return ForkedSession(self, token, int(reply["pid"]), os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"))

    def exit_status(self, token: int, timeout: float | None) -> int | None:
        """The session's exit status once the template reported it; None if it still runs after `timeout` seconds.

        A template found stopped while waiting is ended (`end_stopped`), so the answer comes: the session killed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while token not in self._exits:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                if self.end_stopped():  # its reader sees the socket close and reports every live session killed
                    left = CHECK_SECONDS if left is None else min(left, CHECK_SECONDS)
                self._changed.wait(timeout=CHECK_SECONDS if left is None else min(left, CHECK_SECONDS))
            return self._exits.get(token)

    def close(self) -> None:
        """End the template (sessions it forked end with it): EOF on its socket, then a kill if it lingers."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._proc.wait(timeout=0.0 if self.stopped else TERM_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._proc.kill()  # SIGKILL ends a stopped process too
            try:
                self._proc.wait(timeout=TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass  # unkillable (uninterruptible I/O): left to the kernel; this process no longer waits on it
        self._socket.close()


_templates: "OrderedDict[Hashable, SessionTemplate]" = OrderedDict()
_templates_lock = threading.Lock()


def _template_for(key: Hashable, env: dict[str, str]) -> SessionTemplate:
    """The template for this startup key, started under `env` if there is none (or it is gone)."""
    with _templates_lock:
        template = _templates.get(key)
        if template is not None and (template.gone or template.stopped):  # a stopped one would never answer: replaced
            del _templates[key]
            template.close()
            template = None
        if template is None:
            template = _templates[key] = SessionTemplate(env)
        _templates.move_to_end(key)
        for old_key, old in list(_templates.items())[:-1]:
            if len(_templates) <= KEEP_TEMPLATES:
                break
            if not old.busy:  # a busy one still reports its sessions' ends; it goes once they have
                del _templates[old_key]
                old.close()
        return template


def close_templates() -> None:
    """End every template this process keeps (the sessions they forked end with them), and wait for each."""
    with _templates_lock:
        templates = list(_templates.values())
        _templates.clear()
    for template in templates:
        template.close()


_OWNER = os.getpid()


@atexit.register
def _close_at_exit() -> None:
    """A process's templates end with it, waited for. Left to die with their parent at its exit, they were reaped
    by init, and their CPU and their sessions' (every warm trial's) was missing from the rusage of every process
    above, which is what /usr/bin/time and the shell's `time` report: 50 of the 181 CPU seconds of four of the
    test files (benchmarks/suite_cpu.py). A child forked from this process leaves its parent's templates alone."""
    if os.getpid() == _OWNER:
        close_templates()


def _gpus_visible(env: dict[str, str], driver: str = "/proc/driver/nvidia/gpus") -> bool:
    """Whether the session could see an NVIDIA GPU: a driver is loaded and CUDA_VISIBLE_DEVICES hides none of them.

    torch.cuda.is_available() (which libraries call at import) initialises the CUDA driver in
    the calling process, and a child forked after that cannot use CUDA: such sessions are
    started on their own. A CPU trial (CUDA_VISIBLE_DEVICES="") forks on any machine.
    """
    if env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.isdir(driver) and bool(os.listdir(driver))


def start_session(key: Hashable, env: dict[str, str], log_path: Path, *, fork: bool = True) -> tuple[SessionProcess, str | None]:
    """A warm session's process for a startup key; and, when it had to be started on its own, why.

    Forked from the key's template where fork and Unix-socket descriptor passing exist (Linux),
    `fork` is true, no GPU is visible to it and GRPO_ABLATE_SESSION_TEMPLATE is not "0";
    otherwise, or when the template fails to answer, `python -m grpo_ablate.trainer.session` as
    a process of its own.
    """
    why = None
    if not fork:
        why = "its trial has a CPU memory cap, which reads RSS as a fresh process counts it"
    elif _gpus_visible(env):
        why = "a GPU is visible: an import may start CUDA in the template, and CUDA does not survive a fork"
    elif env.get(TEMPLATE_ENV, os.environ.get(TEMPLATE_ENV)) == "0":
        why = f"{TEMPLATE_ENV}=0"
    elif not (sys.platform.startswith("linux") and hasattr(socket, "send_fds")):
        why = "no fork server on this platform"
    else:
        for attempt in range(2):  # a template found stopped (or gone) mid-request is replaced once
            template = _template_for(key, env)
            try:
                return template.fork(env, log_path), None
            except OSError as exc:
                why = f"no session template: {exc}"
                if attempt or not (template.stopped or template.gone):
                    break
    # started for the process, not the calling thread: a session lent to a study's worker thread
    # (registry.lend_launchers) outlives that thread
    with log_path.open("ab") as log:  # what the child prints before its first trial
        proc = popen_for_process([sys.executable, *_SESSION_COMMAND], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=log, env=env, start_new_session=True, cwd=os.getcwd())
    return proc, why
