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
A rank of a multi-process trial then leaves without the interpreter's teardown (`exit_ranked`).

The trial's single-process twin, many trials in one process, is the warm session
(trainer/session.py): it calls this module's `run_spec` and `record_result` for each trial.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from grpo_ablate.core.child_processes import adopt_orphans, end_descendants, process_start_time
from grpo_ablate.core.errors import machine_fault, write_probe
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX, RANK_RESULT_GLOB, RESOLVED_CONFIG_FILE, RESULT_FILE, Outcome

from grpo_ablate.contract.checkpoints import BranchPointInvalid
from .lease import keep_lease
from .memory_cap import start_memory_watch
from .signals import stop_on_sigterm
from grpo_ablate.contract.env import LAUNCHED_AT_ENV, PARENT_PID_ENV, forced_environment
from grpo_ablate.contract.spec import TrialSpec

__all__ = [
    "apply_spec_environment",
    "classify_exception",
    "end_left_processes",
    "exit_ranked",
    "import_trial_modules",
    "main",
    "oom_evidence",
    "rank_result_file",
    "record_result",
    "run_spec",
    "watch_parent",
]

EXIT_FAILED = 1
EXIT_OOM = 3


def rank_result_file(rank: int) -> str:
    return RANK_RESULT_GLOB.replace("*", str(rank))


# torch raises these out-of-memory errors as plain RuntimeError: its CPU allocator always, CUDA's
# (cuBLAS, a kernel launch) only where CUDA is in use. They count as evidence only on such an
# exception object, never as text in a log.
_CPU_ALLOCATOR_OOM = "DefaultCPUAllocator: can't allocate memory"
_CUDA_OOM = ("CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED")


def watch_parent(pid: int, interval: float = 1.0) -> threading.Thread | None:
    """Kill this trial's process group once process `pid` (the orchestrator) is gone.

    A daemon thread polls every `interval` seconds. The group is this trial's own (run_trial
    starts it in a new session; torchrun gives each rank its own); if it is somehow the
    orchestrator's group too, only this process is killed. None when `pid` is already gone
    at the start: then the caller ends at once.
    """
    identity = process_start_time(pid)
    if identity is None:
        return None
    try:
        shared_group = os.getpgid(pid) == os.getpgrp()
    except OSError:
        shared_group = False

    def watch() -> None:
        while process_start_time(pid) == identity:
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


def classify_exception(exc: BaseException, folder: str | os.PathLike[str] | None = None,
                       write_bytes: int = 0) -> tuple[Outcome, str]:
    """(outcome, reason) for an exception: a reward's own error first, then a storage fault by type and errno
    (errors.machine_fault; else, for an error that lost its errno, a write probe in `folder` of `write_bytes`, the
    largest write the trial makes: its weights, as a checkpoint saves them): interrupted, to be queued again; then
    OOM by type (oom_evidence)."""
    from .rewards import RewardFunctionError  # here: rewards loads torch, and the parent (launch/) imports this module

    chain = _chain(exc)
    for item in chain:
        if isinstance(item, RewardFunctionError):
            return Outcome.FAILED, str(item)
        if isinstance(item, BranchPointInvalid):  # the prefix is trained again (study/prefixes.py): not the cell's fault
            return Outcome.INTERRUPTED, str(item)
    fault = machine_fault(exc)
    found = _oom_in_chain(exc)
    if fault is None and found is None and folder is not None:
        probed = write_probe(folder, write_bytes)
        fault = None if probed is None else machine_fault(probed)
    if fault is not None:
        return Outcome.INTERRUPTED, f"infrastructure fault: {fault} (behind {type(exc).__name__}: {str(exc)[:300]})"
    if found is not None:
        return Outcome.OOM, f"{found[0]}: {str(found[1])[:500]}"
    return Outcome.FAILED, f"{type(exc).__name__}: {str(exc)[:1000]}"


def _weight_bytes(built: Any) -> int:
    """The bytes of the trial's model weights (what one safetensors file of a checkpoint holds); 0 before it loaded."""
    try:
        return int(sum(p.numel() * p.element_size() for p in built.trainer.model.parameters()))
    except Exception:  # noqa: BLE001 - not built, or no parameters to count: the probe's small write is the answer
        return 0


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
        # here: launch/ imports this module in the parent, which never loads torch; the trial pays it, timed
        import torch
        import transformers
        import trl
        from trl import GRPOConfig, GRPOTrainer  # noqa: F401 - lazy modules: pay the import here, timed

        # the trial's own modules load torch and transformers: here, timed, never in the parent that imports this one
        from .build import build_trial
        from .callbacks import TAKEN_REASON
        from .checkpoint_callback import restore_failed
        from .collective import leave_process_group

        transformers.logging.set_verbosity_warning()
        transformers.utils.logging.disable_progress_bar()  # log.txt gets one line per step instead
        import datasets  # here: as above, timed in the trial

        datasets.disable_progress_bars()
        payload["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__}
        timings["import_seconds"] = time.perf_counter() - t0
        if "startup_seconds" in timings:
            timings["startup_seconds"] += timings["import_seconds"]
        built = build_trial(spec, log=lambda m: print(f"[grpo-ablate] {m}", flush=True))
        if str(spec.model.name_or_path).startswith(BUILTIN_MODEL_PREFIX) and "OMP_NUM_THREADS" not in os.environ:
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
            try:
                built.trainer.train(resume_from_checkpoint=built.resume_from)
            except Exception as exc:  # noqa: BLE001 - a checkpoint that fails to load: start over, never fail
                failed = restore_failed(built.trainer) if built.resume_from else None
                if failed is None:
                    raise
                print(f"[grpo-ablate] checkpoint not resumed: loading {Path(str(built.resume_from)).name} failed "
                      f"({type(exc).__name__}: {str(exc)[:300]}); the trial starts over from step 0", flush=True)
                failed.forget(log=None)
                payload.pop("resumed_from", None)
                built = build_trial(spec, log=lambda m: print(f"[grpo-ablate] {m}", flush=True))
                built.trainer.train()
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
        elif reason is not None and reason.startswith(TAKEN_REASON):  # another run resumes it: nothing here counts
            outcome = Outcome.INTERRUPTED
            payload["reason"] = f"{reason} (stopped after step {payload['steps']})"
        else:
            outcome = Outcome.COMPLETED
            payload["reason"] = reason  # a budget stop, or None
        # the last checkpoint stays until the study's storage recorded this end (study/lifecycle.py removes it then)
        leave_process_group()  # every rank ended training in step; see its docstring for why
    except BaseException as exc:  # noqa: BLE001 - the whole point is to record any failure
        if isinstance(exc, KeyboardInterrupt):
            outcome, reason_text = Outcome.INTERRUPTED, "KeyboardInterrupt"
        else:
            outcome, reason_text = classify_exception(exc, spec.trial_dir, _weight_bytes(built))
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


def import_trial_modules() -> None:
    """Import what every trial needs (the libraries and this package's trial modules), then freeze them
    out of the garbage collector.

    Call it once the trial's environment is set: the libraries read it at import (HF_HUB_OFFLINE, for
    one). A warm-session template calls it before it forks sessions, so a fork has them for free.

    Why freeze: the Trainer collects garbage at the start of training (accelerate's free_memory ends in
    gc.collect()), and a full collection walks every object the imports made (torch, transformers,
    TRL: about 0.26 s of CPU here). Those objects live as long as the process, so the collector gains
    nothing by walking them. In a session forked from a template the walk also writes each object's
    header, which copies every page the template shares with its sessions. gc.freeze() moves them
    to a generation the collector never scans (the use the Python manual gives it for processes that
    fork without exec): a forked 4-step trial of the tiny model spends about 0.63x the CPU, with the
    same rewards (`python benchmarks/gc_freeze.py`; figures in docs/benchmarks.md).
    """
    import datasets  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401

    from . import build, checkpoint_callback, evaluation  # noqa: F401 - the trial's own modules

    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.worker <trial_dir>/spec.json", file=sys.stderr)
        return 2
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and watch_parent(int(parent)) is None:
        print(f"[grpo-ablate] the orchestrator (pid {parent}) is gone before the trial started", flush=True)
        return EXIT_FAILED
    spec = TrialSpec.load(argv[0])
    stop_on_sigterm(spec.trial_dir)  # a scheduler's SIGTERM (scancel, preemption, time limit): one graceful stop
    keep_lease(spec.trial_dir)  # another host's sign that this trial still trains (study/liveness.py)
    adopt_orphans()  # a reward's grandchildren stay below this process, and end with it
    start_memory_watch(spec.trial_dir, spec.hardware)  # memory.json; hardware.memory_limit_mb
    apply_spec_environment(spec)
    import_trial_modules()
    launched = os.environ.get(LAUNCHED_AT_ENV)
    outcome, payload = run_spec(spec, launched_at=float(launched) if launched else None)
    end_left_processes(payload)
    code = record_result(spec, outcome, payload)
    if payload["world_size"] > 1:
        exit_ranked(code)
    return code


def exit_ranked(code: int) -> NoReturn:
    """End one rank of a multi-process trial with `code`: exit handlers run, the interpreter's teardown does not.

    When a rank's main thread finishes, one of gloo's worker threads may still be releasing the
    last collective's work, whose tensors Python already let go; releasing them takes the GIL,
    and a finalizing interpreter ends any thread that asks for it, which aborts the process
    (SIGABRT, "terminate called without an active exception": torch 2.13 on CPU, 5 of 76 2-rank
    runs of the tiny trial here). destroy_process_group leaves those threads running. The result
    is written by then, but torchrun reports the run failed and SIGTERMs the other ranks. So a
    rank runs the exit handlers (memory.json, trackers' final syncs), flushes its streams and
    leaves with os._exit, as multiprocessing's own children do.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def end_left_processes(payload: dict[str, Any]) -> list[str]:
    """End every process the trial started and left running (children.end_descendants); say so in the log."""
    left = end_descendants()
    if left:
        payload["ended_processes"] = left
        print(f"[grpo-ablate] the trial left {len(left)} process(es) running, ended now: {left}", flush=True)
    return left


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


if __name__ == "__main__":
    raise SystemExit(main())
