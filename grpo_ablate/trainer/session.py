"""The warm session's process: many trials in one process, each starting from what a fresh one has.

    python -m grpo_ablate.trainer.session              # a session (trainer/launchers/warm.py starts it)
    python -m grpo_ablate.trainer.session --template   # a template that forks sessions (launchers/template.py)

A session reads one request per stdin line ({"spec": path, "env": {...}}), restores what a fresh
process would start with (SessionBaseline), runs the trial as a trial process would (worker.py's
`run_spec` and `record_result`), checks for what no restore undoes, and answers one JSON line
({"exit", "outcome", "clean", "why"}) on what was its stdout; after an unclean trial it exits,
and the parent starts a fresh one.

A session's start is its imports of torch, transformers and TRL (about 8 s of CPU on a 2-core
machine), and a study replaces its session after every trial that did not end cleanly. A
template pays the imports once, then forks each session (`serve_template`): the forked child
takes the pipes, log, working folder and environment it is sent, and from there is a session
that has just done its imports, as one started on its own would be (nothing else runs in the
template: no trial, no thread of ours, no CUDA). The template's protocol is one datagram per
message on its stdin, a Unix socket: a request {"id", "env", "cwd", "log"} with the session's
stdin and stdout as passed descriptors, answered {"id", "pid"}; when a session ends,
{"exited": id, "returncode": ...} (Popen's convention: minus the signal that killed it).
"""

from __future__ import annotations

import atexit
import builtins
import gc
import json
import logging
import os
import random
import select
import signal
import socket
import sys
import sysconfig
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.children import adopt_orphans, die_with_parent
from grpo_ablate.vocab import LOG_FILE, Outcome

from .memory_cap import start_memory_watch
from .signals import stop_on_sigterm
from .spec import TrialSpec
from .worker import (
    EXIT_FAILED,
    LAUNCHED_AT_ENV,
    PARENT_PID_ENV,
    apply_spec_environment,
    end_left_processes,
    record_result,
    run_spec,
    watch_parent,
)

__all__ = ["FORKED_SESSION_NAME", "TEMPLATE_FLAG", "TEMPLATE_NAME", "SessionBaseline", "main", "release_memory", "serve_session", "serve_template"]

TEMPLATE_FLAG = "--template"  # `python -m grpo_ablate.trainer.session --template`: forks sessions
# A forked session keeps its template's command line; its process name (ps -o comm, top) tells them apart.
TEMPLATE_NAME, FORKED_SESSION_NAME = "grpo-template", "grpo-session"
_PR_SET_NAME = 15


def _name_process(name: str) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
_MESSAGE_BYTES = 1 << 20  # one request: an environment of a few kB


def _cuda_in_use() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def release_memory() -> None:
    """Hand a finished trial's memory back, so the next trial's peak starts where a fresh process's would.

    gc for the trainer's reference cycles; CUDA's caching allocator; glibc keeps freed heap
    pages mapped until malloc_trim returns them to the kernel (RSS is what the CPU cap reads).
    """
    gc.collect()
    if _cuda_in_use():
        sys.modules["torch"].cuda.empty_cache()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the allocator keeps what it keeps
        pass


def _installed_roots() -> tuple[str, ...]:
    """Folders whose modules are libraries: the Python installation's, and this package's."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[1])}
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


def _torch_flags() -> list[tuple[str, Callable[[], Any], Callable[[Any], None]]]:
    """torch's process-wide switches a trial may flip: (name, read, write), each restored when it differs."""
    import torch

    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn

    def anomaly(value: tuple[bool, bool]) -> None:
        torch.set_anomaly_enabled(value[0], value[1])

    def attribute(owner: Any, name: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
        return (lambda: getattr(owner, name)), (lambda value: setattr(owner, name, value))

    flags: list[tuple[str, Callable[[], Any], Callable[[Any], None]]] = [
        ("grad mode", torch.is_grad_enabled, torch.set_grad_enabled),
        ("default device", torch.get_default_device, torch.set_default_device),
        ("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        ("anomaly detection", lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()), anomaly),
        ("float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        ("deterministic algorithms", lambda: (torch.are_deterministic_algorithms_enabled(),
                                              torch.is_deterministic_algorithms_warn_only_enabled()),
         lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
        ("cudnn.deterministic", *attribute(cudnn, "deterministic")),
        ("cudnn.benchmark", *attribute(cudnn, "benchmark")),
        ("cudnn.allow_tf32", *attribute(cudnn, "allow_tf32")),
        ("cuda.matmul.allow_tf32", *attribute(cuda.matmul, "allow_tf32")),
        ("cuda.matmul.allow_fp16_reduced_precision_reduction", *attribute(cuda.matmul, "allow_fp16_reduced_precision_reduction")),
        ("cuda.matmul.allow_bf16_reduced_precision_reduction", *attribute(cuda.matmul, "allow_bf16_reduced_precision_reduction")),
    ]
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        flags.append((f"{kind} SDPA", getattr(cuda, f"{kind}_sdp_enabled"), getattr(cuda, f"enable_{kind}_sdp")))
    return flags


def _logger_state(logger: logging.Logger) -> tuple[Any, ...]:
    return logger.level, list(logger.handlers), logger.propagate, logger.disabled, list(logger.filters)


def _set_logger_state(logger: logging.Logger, state: tuple[Any, ...]) -> None:
    logger.level, handlers, logger.propagate, logger.disabled, filters = state
    logger.handlers, logger.filters = list(handlers), list(filters)


def _loggers() -> dict[str, logging.Logger]:
    found = {name: value for name, value in logging.Logger.manager.loggerDict.items() if isinstance(value, logging.Logger)}
    found[""] = logging.getLogger()
    return found


def _namespace(module: Any) -> dict[str, int]:
    """A module's names and the identity of each value: what a trial may leave on `sys` or `builtins`."""
    return {name: id(value) for name, value in vars(module).items() if name not in _VOLATILE_NAMES}


def _open_fds() -> dict[int, str]:
    """This process's open file descriptors and what each points at (none where there is no /proc)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return {}
    found = {}
    for name in names:
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile (the listing's own descriptor, a read in another thread)
            continue
    return found


def _left_open(before: dict[int, str], ignore: set[int]) -> list[str]:
    """Descriptors opened since `before` and still open a moment later (a read in flight in the
    session's own threads, such as the memory cap's, is not one)."""
    left = {fd: target for fd, target in _open_fds().items() if before.get(fd) != target and fd not in ignore}
    for _ in range(2):
        if not left:
            break
        time.sleep(0.2)
        now = _open_fds()
        left = {fd: target for fd, target in left.items() if now.get(fd) == target}
    return [f"{fd} -> {target}" for fd, target in sorted(left.items())]


# Names on `sys` that change by themselves as a process runs (restored apart, or not state).
_VOLATILE_NAMES = frozenset({"stdout", "stderr", "last_type", "last_value", "last_traceback", "last_exc", "_clear_type_cache"})
_CUDA_DEFAULT_SEED = 67280421310721  # c10's default seed: what CUDA's generators hold in a fresh process
_SESSION_THREAD_PREFIX = "grpo-ablate-"  # the session's own threads (parent watch, memory cap)


class SessionBaseline:
    """What a fresh trial process holds once its libraries are imported; put back before every trial.

    Captured once, after the session imported torch, transformers and TRL (the imports are what
    a session saves). Everything a trial can change in this process is in one of two lists:

    - restored before the next trial (`restore`): the environment it was launched with, the
      working folder, umask, sys.path, sys.stdout/stderr, recursion limit, torch's thread count
      (OMP_NUM_THREADS of the trial's CPU share), the random states of Python, NumPy, torch's CPU
      and CUDA generators, torch's switches (`_torch_flags`: grad mode, default device and dtype,
      anomaly detection, determinism, TF32, SDPA backends, matmul precision), dynamo's caches,
      warnings filters and their "once" registries (Python's and transformers' warning_once),
      every logger's level, handlers and filters, signal handlers, multiprocessing's start
      method, and accelerate's singletons (AcceleratorState, GradientState). Modules a trial
      imported from outside the installed libraries (a study's reward files) are forgotten
      after it, so their module-level state starts afresh too;
    - detected after the trial (`unrestorable`), and then the session is replaced, saying why:
      threads still running, atexit handlers added, names added to or replaced on `sys` or
      `builtins`, file descriptors left open; processes left running are ended
      (children.end_descendants) and also replace it.
    """

    def __init__(self) -> None:
        import multiprocessing

        import numpy
        import torch

        self.roots = _installed_roots()
        self.cwd = os.getcwd()
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.path = list(sys.path)
        self.modules = set(sys.modules)
        self.streams = (sys.stdout, sys.stderr)
        self.recursion_limit = sys.getrecursionlimit()
        self.threads = torch.get_num_threads()
        self.rng = (random.getstate(), numpy.random.get_state(), torch.get_rng_state())
        self.flags = [(name, read(), write) for name, read, write in _torch_flags()]
        self.warning_filters = list(warnings.filters)
        self.loggers = {name: _logger_state(logger) for name, logger in _loggers().items()}
        self.logging_disabled = logging.root.manager.disable
        self.signals = {sig: signal.getsignal(sig) for sig in signal.valid_signals() if signal.getsignal(sig) is not None}
        self.start_method = multiprocessing.get_start_method(allow_none=True)
        self.atexit_added: list[str] = []
        self.sys_names = _namespace(sys)
        self.builtin_names = _namespace(builtins)
        self.fds = _open_fds()
        self.thread_ids = {t.ident for t in threading.enumerate()}

    def restore(self, env: dict[str, str]) -> None:
        import multiprocessing

        import numpy
        import torch

        os.environ.clear()
        os.environ.update(env)
        os.chdir(self.cwd)
        os.umask(self.umask)
        sys.path[:] = self.path
        sys.stdout, sys.stderr = self.streams
        sys.setrecursionlimit(self.recursion_limit)
        threads = env.get("OMP_NUM_THREADS")
        torch.set_num_threads(int(threads) if threads and threads.isdigit() and int(threads) > 0 else self.threads)
        random.setstate(self.rng[0])
        numpy.random.set_state(self.rng[1])
        torch.set_rng_state(self.rng[2])
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(_CUDA_DEFAULT_SEED)
        for _name, value, write in self.flags:
            write(value)
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:
            dynamo.reset()
            dynamo.utils.counters.clear()
        warnings.filters[:] = self.warning_filters  # type: ignore[index]  # a list at run time
        warnings.onceregistry.clear()  # type: ignore[attr-defined]  # not in typeshed
        warnings._filters_mutated()  # type: ignore[attr-defined]  # every module's __warningregistry__ starts over
        hf_logging = sys.modules.get("transformers.utils.logging")
        if hf_logging is not None:
            for once in ("warning_once", "info_once"):
                cache_clear = getattr(getattr(hf_logging, once, None), "cache_clear", None)
                if cache_clear is not None:
                    cache_clear()
        logging.disable(self.logging_disabled)
        for name, logger in _loggers().items():
            if name in self.loggers:
                _set_logger_state(logger, self.loggers[name])
            elif not self._library_owns(name):  # the study's own logger: what getLogger gives a fresh process
                _set_logger_state(logger, (logging.NOTSET, [], True, False, []))
            # else a library made it after the baseline, once per process (as a fresh process would): kept
        logging.Logger.manager._clear_cache()  # type: ignore[attr-defined]  # the loggers' cached effective levels
        for sig, handler in self.signals.items():
            if signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        if multiprocessing.get_start_method(allow_none=True) != self.start_method:
            multiprocessing.set_start_method(self.start_method, force=True)
        accelerate_state = sys.modules.get("accelerate.state")
        if accelerate_state is not None:
            accelerate_state.AcceleratorState._reset_state(reset_partial_state=True)
            accelerate_state.GradientState._reset_state()

    def _library_owns(self, logger_name: str) -> bool:
        """Whether a logger is named after an installed library's package (torch, datasets...), not the study's code."""
        module = sys.modules.get(logger_name.split(".")[0])
        file = getattr(module, "__file__", None)
        return isinstance(file, str) and os.path.realpath(file).startswith(self.roots)

    def record_atexit(self) -> None:
        """From now on, note every atexit handler the study's own code registers (a library's, registered
        once per process as in a fresh one, is not the trial's): atexit cannot list its handlers."""
        original = atexit.register

        def register(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
            caller = sys._getframe(1).f_code.co_filename
            if not os.path.realpath(caller).startswith(self.roots):
                self.atexit_added.append(f"{getattr(func, '__qualname__', func)!s} from {caller}")
            return original(func, *args, **kwargs)

        atexit.register = register  # type: ignore[assignment]

    def forget_trial_modules(self) -> list[str]:
        """Drop the modules a trial imported from outside the libraries; their names."""
        forgotten = []
        for name in set(sys.modules) - self.modules:
            file = getattr(sys.modules.get(name), "__file__", None)
            if file and not os.path.realpath(file).startswith(self.roots):
                del sys.modules[name]
                forgotten.append(name)
        return sorted(forgotten)

    def unrestorable(self, reserved_fds: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
        """What the trial left that no restore can undo; each entry says what. Empty: the session can go on."""
        found = []
        threads = [t.name for t in threading.enumerate()
                   if t.ident not in self.thread_ids and t.is_alive() and not t.name.startswith(_SESSION_THREAD_PREFIX)]
        if threads:
            found.append(f"thread(s) still running: {sorted(threads)}")
        if self.atexit_added:
            found.append(f"atexit handler(s) registered: {self.atexit_added}")
            self.atexit_added = []
        for module, before in ((sys, self.sys_names), (builtins, self.builtin_names)):
            now = _namespace(module)
            changed = sorted(name for name in now if before.get(name) != now[name])
            removed = sorted(set(before) - set(now))
            if changed or removed:
                found.append(f"names added or replaced on `{module.__name__}`: {changed + removed}")
        left_open = _left_open(self.fds, set(reserved_fds))
        if left_open:
            found.append(f"file descriptor(s) left open: {left_open}")
        return found


def _log_to(path: Path) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at the trial's log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _start_singletons() -> None:
    """Start the libraries' once-per-process helpers before the baseline, so they are not a trial's leftovers.

    tqdm starts its monitor thread (and its atexit handler) at the first progress bar of a
    process and keeps it for the process's life: a fresh trial process gets the same one.
    """
    import io

    from tqdm import tqdm

    tqdm(total=1, file=io.StringIO()).close()


def serve_session() -> int:
    """The child side of a warm session: one request per stdin line, one JSON answer line per trial.

    The answer's `clean` is False, and `why` says what, when the trial left something a restore
    cannot undo (SessionBaseline.unrestorable, processes left running): the parent then replaces
    this process before the next trial.
    """
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and watch_parent(int(parent)) is None:
        return EXIT_FAILED
    adopt_orphans()  # a trial's grandchildren stay below the session, where end_descendants finds them
    reply_fd = os.dup(1)
    reply = os.fdopen(reply_fd, "w", buffering=1)  # the answers; fds 1 and 2 become each trial's log
    launched = os.environ.get(LAUNCHED_AT_ENV)
    _session_imports()  # done already in a session forked from a template

    _start_singletons()
    baseline = SessionBaseline()
    baseline.record_atexit()
    watch = None
    trials = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        spec = TrialSpec.load(request["spec"])
        _log_to(spec.path / LOG_FILE)  # first: what the restore says goes to the trial's log
        baseline.restore(request["env"])
        trials += 1
        if watch is None:
            watch = start_memory_watch(spec.trial_dir, spec.hardware)
        else:
            watch.retarget(spec.trial_dir, spec.hardware)
        apply_spec_environment(spec)
        stop_on_sigterm(spec.trial_dir)  # a scheduler's SIGTERM: this trial stops after its step (trainer/signals.py)
        outcome, payload = run_spec(spec, launched_at=float(launched) if launched and trials == 1 else None)
        stop_on_sigterm(None)
        payload["session_pid"] = os.getpid()
        payload["session_trial"] = trials
        release_memory()
        left = end_left_processes(payload)
        why = [f"process(es) left running, ended: {left}"] if left else []
        forgotten = baseline.forget_trial_modules()
        why += baseline.unrestorable(reserved_fds={0, 1, 2, reply_fd})  # stdin, the log, the answers
        watch.poll()
        watch.write()
        code = record_result(spec, outcome, payload)
        if why:
            print(f"[grpo-ablate] the trial left what a warm session cannot undo ({'; '.join(why)}): "
                  "the next trial gets a fresh process", flush=True)
        reply.write(json.dumps({"exit": code, "outcome": outcome.value, "clean": not why, "why": why,
                                "forgotten": forgotten}) + "\n")
        _log_to(Path(os.devnull))  # between trials no trial's file stays open (its folder may go, its disk unmount)
        if outcome is Outcome.INTERRUPTED or why:
            break
    return 0


def _session_imports() -> None:
    """The imports a session pays once (its environment is its first trial's, so the libraries
    read at import what a fresh trial process would: HF_HUB_OFFLINE, for one)."""
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401


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
    _session_imports()
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
