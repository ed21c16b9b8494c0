"""The trial process: read spec.json, build, train, write result.json.

    python -m grpo_ablate.trainer.worker runs/x/trials/00000/spec.json

Under torchrun or accelerate every rank runs this; rank 0 writes result.json, and a failing
other rank writes result.rank<N>.json (rank 0 may be killed before it writes). A trial in its
own process keeps memory, CUDA/vLLM state and crashes out of the sweep. The outcome, whenever
Python still runs to write it:

- completed: training reached max_steps / epochs, or a token/time budget (the reason says which);
- pruned / interrupted: the parent wrote STOP, training ended after the current step
  (interrupted also for a KeyboardInterrupt);
- oom: a MemoryError or CUDA's out-of-memory error (a kernel OOM kill leaves no file: the
  parent looks for it in the cgroup's memory events);
- failed: any other exception, with type, message and traceback tail; a reward function's
  error names the reward.

Exit status: 0 for completed/pruned/interrupted, 1 for failed, 3 for oom. Launched by a local
launcher, the worker ends its whole process group when the orchestrator (GRPO_ABLATE_PARENT_PID)
is gone: under torchrun its direct parent is torchrun, not the orchestrator. Whatever the trial
started (a reward's grandchildren included: the worker adopts orphans) is ended when it is over.

    python -m grpo_ablate.trainer.worker --session   # a warm session (trainer/launchers/warm.py)

As a warm session it reads one request per stdin line ({"spec": path, "env": {...}}), restores
what a fresh process would start with (SessionBaseline), runs the trial as above, checks for what
no restore undoes, and answers one JSON line ({"exit", "outcome", "clean", "why"}) on what was
its stdout; after an unclean trial it exits, and the parent starts a fresh one.
"""

from __future__ import annotations

import atexit
import builtins
import gc
import json
import logging
import os
import random
import signal
import sys
import sysconfig
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.children import adopt_orphans, end_descendants
from grpo_ablate.vocab import BUILTIN_MODEL_PREFIX, LOG_FILE, RANK_RESULT_GLOB, RESOLVED_CONFIG_FILE, RESULT_FILE, Outcome

from .checkpoints import remove_checkpoints
from .memory_cap import start_memory_watch
from .spec import TrialSpec

__all__ = [
    "LAUNCHED_AT_ENV",
    "PARENT_PID_ENV",
    "SESSION_FLAG",
    "SessionBaseline",
    "apply_spec_environment",
    "classify_exception",
    "forced_environment",
    "main",
    "oom_evidence",
    "rank_result_file",
    "record_result",
    "release_memory",
    "run_spec",
    "serve_session",
    "watch_parent",
]

EXIT_FAILED = 1
EXIT_OOM = 3
# The launch/worker environment contract (trainer/launchers set these; only the two sides read them).
PARENT_PID_ENV = "GRPO_ABLATE_PARENT_PID"  # the orchestrator's pid: the trial ends when it is gone
LAUNCHED_AT_ENV = "GRPO_ABLATE_LAUNCHED_AT"  # time.time() at launch, for startup_seconds
SESSION_FLAG = "--session"  # `python -m grpo_ablate.trainer.worker --session`: many trials, one process


def rank_result_file(rank: int) -> str:
    return RANK_RESULT_GLOB.replace("*", str(rank))


# torch raises these out-of-memory errors as plain RuntimeError: its CPU allocator always, CUDA's
# (cuBLAS, a kernel launch) only where CUDA is in use. They count as evidence only on such an
# exception object, never as text in a log.
_CPU_ALLOCATOR_OOM = "DefaultCPUAllocator: can't allocate memory"
_CUDA_OOM = ("CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED")


def _alive_since(pid: int) -> str | None:
    """An identity of a live process (its start time), None when it is gone or a zombie.

    The start time tells a reused pid from the original; a zombie (killed, not yet reaped by
    its own parent) counts as gone.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc here: only whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "alive"
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22 of /proc/<pid>/stat: start time in clock ticks after boot


def watch_parent(pid: int, interval: float = 1.0) -> threading.Thread | None:
    """Kill this trial's process group once process `pid` (the orchestrator) is gone.

    A daemon thread polls every `interval` seconds. The group is this trial's own (run_trial
    starts it in a new session; torchrun gives each rank its own); if it is somehow the
    orchestrator's group too, only this process is killed. None when `pid` is already gone
    at the start: then the caller ends at once.
    """
    identity = _alive_since(pid)
    if identity is None:
        return None
    try:
        shared_group = os.getpgid(pid) == os.getpgrp()
    except OSError:
        shared_group = False

    def watch() -> None:
        while _alive_since(pid) == identity:
            time.sleep(interval)
        print(f"[grpo-ablate] the orchestrator (pid {pid}) is gone: ending this trial", flush=True)
        if shared_group:
            os.kill(os.getpid(), signal.SIGKILL)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="grpo-ablate-parent-watch", daemon=True)
    thread.start()
    return thread


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _qualified(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _cuda_in_use() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def oom_evidence(exc: BaseException) -> str | None:
    """Why `exc` is an out-of-memory error, by its type; None when it is not one.

    MemoryError and torch.OutOfMemoryError (torch.cuda.OutOfMemoryError is the same class) by
    type; torch's allocator failures, raised as RuntimeError, by the allocator's own message on
    that exception, CUDA's only when this process has initialised CUDA. A reward that merely
    says "out of memory" on a CPU machine is a failure, not an OOM.
    """
    found = _oom_in_chain(exc)
    return None if found is None else found[0]


def _oom_in_chain(exc: BaseException) -> tuple[str, BaseException] | None:
    torch = sys.modules.get("torch")
    for item in _chain(exc):
        if isinstance(item, MemoryError) or (torch is not None and isinstance(item, torch.OutOfMemoryError)):
            return _qualified(item), item
        if type(item) is RuntimeError or (torch is not None and isinstance(item, getattr(torch, "AcceleratorError", ()))):
            text = str(item)
            if _CPU_ALLOCATOR_OOM in text:
                return f"{_qualified(item)} from torch's CPU allocator", item
            if _cuda_in_use() and any(marker in text for marker in _CUDA_OOM):
                return f"{_qualified(item)} from CUDA", item
    return None


def classify_exception(exc: BaseException) -> tuple[Outcome, str]:
    """(outcome, reason) for an exception: a reward's own error first, then OOM by type (oom_evidence)."""
    from .rewards import RewardFunctionError

    chain = _chain(exc)
    for item in chain:
        if isinstance(item, RewardFunctionError):
            return Outcome.FAILED, str(item)
    found = _oom_in_chain(exc)
    if found is not None:
        return Outcome.OOM, f"{found[0]}: {str(found[1])[:500]}"
    return Outcome.FAILED, f"{type(exc).__name__}: {str(exc)[:1000]}"


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, path)


def _resolved(config: Any) -> dict[str, Any]:
    """The GRPOConfig values a report needs, after TRL filled in its derived fields."""
    keys = (
        "num_generations", "generation_batch_size", "steps_per_generation", "per_device_train_batch_size",
        "gradient_accumulation_steps", "num_iterations", "max_steps", "num_train_epochs", "temperature",
        "top_p", "learning_rate", "beta", "loss_type", "scale_rewards", "max_completion_length", "seed",
        "world_size", "bf16", "use_cpu", "use_vllm", "vllm_mode", "reward_weights",
    )
    return {k: getattr(config, k, None) for k in keys}


def run_spec(spec: TrialSpec, *, launched_at: float | None = None) -> tuple[Outcome, dict[str, Any]]:
    """Build and train one trial in this process; return (outcome, result payload)."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    payload: dict[str, Any] = {"trial_dir": spec.trial_dir, "params": spec.params}
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    payload.update(rank=rank, world_size=world_size, pid=os.getpid())
    if launched_at is not None:
        timings["startup_seconds"] = max(0.0, time.time() - launched_at)
    built = None
    try:
        import torch
        import transformers
        import trl
        from trl import GRPOConfig, GRPOTrainer  # noqa: F401 - lazy modules: pay the import here, timed

        from .build import build_trial

        transformers.logging.set_verbosity_warning()
        transformers.utils.logging.disable_progress_bar()  # log.txt gets one line per step instead
        import datasets

        datasets.disable_progress_bars()
        payload["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__}
        timings["import_seconds"] = time.perf_counter() - t0
        if "startup_seconds" in timings:
            timings["startup_seconds"] += timings["import_seconds"]
        built = build_trial(spec, log=lambda m: print(f"[grpo-ablate] {m}", flush=True))
        if str(spec.model.get("name_or_path", "")).startswith(BUILTIN_MODEL_PREFIX) and "OMP_NUM_THREADS" not in os.environ:
            # A 64-wide model gains nothing from intra-op threads, and on a busy CPU (parallel trials,
            # other jobs) spinning OpenMP threads made steps ~8x slower in our measurements.
            torch.set_num_threads(1)
        timings["load_seconds"] = built.load_seconds
        timings["build_seconds"] = built.build_seconds
        payload["model_path"] = built.model_path
        payload["reward_names"] = built.reward_names
        payload["resolved_config"] = _resolved(built.config)
        if rank == 0:
            _write_json(Path(spec.trial_dir) / RESOLVED_CONFIG_FILE, payload["resolved_config"])
        started = time.perf_counter()
        if built.resume_from:
            payload["resumed_from"] = built.resume_from
        try:
            built.trainer.train(resume_from_checkpoint=built.resume_from)
        finally:
            timings["train_seconds"] = time.perf_counter() - started
            if built.evaluator is not None:  # held-out scoring is timed apart, never as training
                timings["eval_seconds"] = built.evaluator.seconds
                timings["train_seconds"] -= built.evaluator.seconds
            timings["callback_seconds"] = built.recorder.seconds_spent + built.stopper.seconds_spent
            built.recorder.close()
        payload["steps"] = int(built.trainer.state.global_step)
        reason = built.stopper.stop_reason
        if reason in ("pruned", "interrupted"):
            outcome = Outcome(reason)
            payload["reason"] = f"stopped by the parent ({reason}) after step {payload['steps']}"
        else:
            outcome = Outcome.COMPLETED
            payload["reason"] = reason  # a budget stop, or None
        if outcome in (Outcome.COMPLETED, Outcome.PRUNED) and rank == 0 and not (spec.checkpoint or {}).get("keep"):
            remove_checkpoints(spec.trial_dir)  # ended for good: nothing will resume them
    except BaseException as exc:  # noqa: BLE001 - the whole point is to record any failure
        if isinstance(exc, KeyboardInterrupt):
            outcome, reason_text = Outcome.INTERRUPTED, "KeyboardInterrupt"
        else:
            outcome, reason_text = classify_exception(exc)
        payload["reason"] = reason_text
        payload["exception_type"] = type(exc).__name__
        payload["exception_types"] = [_qualified(item) for item in _chain(exc)]
        if outcome is Outcome.OOM:
            payload["oom_evidence"] = oom_evidence(exc)
        payload["exception_message"] = str(exc)[:4000]
        payload["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
        if built is not None:
            payload["steps"] = int(built.trainer.state.global_step)
        traceback.print_exc()
    payload["outcome"] = outcome.value
    payload["timings"] = {k: round(v, 4) for k, v in timings.items()}
    return outcome, payload


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == [SESSION_FLAG]:
        return serve_session()
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.worker <trial_dir>/spec.json", file=sys.stderr)
        return 2
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and watch_parent(int(parent)) is None:
        print(f"[grpo-ablate] the orchestrator (pid {parent}) is gone before the trial started", flush=True)
        return EXIT_FAILED
    spec = TrialSpec.load(argv[0])
    adopt_orphans()  # a reward's grandchildren stay below this process, and end with it
    start_memory_watch(spec.trial_dir, spec.hardware)  # memory.json; hardware.memory_limit_mb
    apply_spec_environment(spec)
    launched = os.environ.get(LAUNCHED_AT_ENV)
    outcome, payload = run_spec(spec, launched_at=float(launched) if launched else None)
    _end_left_processes(payload)
    return record_result(spec, outcome, payload)


def _end_left_processes(payload: dict[str, Any]) -> list[str]:
    """End every process the trial started and left running (children.end_descendants); say so in the log."""
    left = end_descendants()
    if left:
        payload["ended_processes"] = left
        print(f"[grpo-ablate] the trial left {len(left)} process(es) running, ended now: {left}", flush=True)
    return left


def forced_environment(spec: TrialSpec) -> dict[str, str]:
    """What a trial's environment holds whatever its parent's says: offline for the built-in demo.

    The launcher puts it into the trial's environment before the process starts, because
    huggingface_hub reads HF_HUB_OFFLINE once, at import: a warm session imports before its
    first trial, so setting it later would leave the session online where a fresh process is not.
    """
    if str(spec.model.get("name_or_path", "")).startswith(BUILTIN_MODEL_PREFIX) and spec.data.get("task"):
        return {"HF_HUB_OFFLINE": "1"}  # the built-in demo never touches the network
    return {}


def apply_spec_environment(spec: TrialSpec) -> None:
    """The process environment a trial runs under (when started by hand): forced_environment, then the spec's own."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.update(forced_environment(spec))
    for key, value in spec.env.items():
        os.environ.setdefault(key, value)


def record_result(spec: TrialSpec, outcome: Outcome, payload: dict[str, Any]) -> int:
    """Write the trial's result file(s); the worker's exit status for `outcome`."""
    rank = payload.get("rank", 0)
    trial_dir = Path(spec.trial_dir)
    if rank == 0:
        _write_json(trial_dir / RESULT_FILE, payload)
    elif outcome in (Outcome.FAILED, Outcome.OOM):
        # A failing non-zero rank leaves its own record: rank 0 may be killed before writing.
        _write_json(trial_dir / rank_result_file(rank), payload)
    print(f"[grpo-ablate] trial {outcome.value}: {payload.get('reason')}", flush=True)
    if outcome is Outcome.OOM:
        return EXIT_OOM
    if outcome is Outcome.FAILED:
        return EXIT_FAILED
    return 0



# --------------------------------------------------------------------------------------------
# A warm session: many trials, one process, each starting from what a fresh process has
# --------------------------------------------------------------------------------------------


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
    # The environment is the first trial's (the parent starts a session per environment), so the
    # libraries read at import what a fresh trial process would (HF_HUB_OFFLINE, for one).
    import torch  # noqa: F401 - the imports a session pays once
    import transformers  # noqa: F401
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401

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
        outcome, payload = run_spec(spec, launched_at=float(launched) if launched and trials == 1 else None)
        payload["session_pid"] = os.getpid()
        payload["session_trial"] = trials
        release_memory()
        left = _end_left_processes(payload)
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


if __name__ == "__main__":
    raise SystemExit(main())
