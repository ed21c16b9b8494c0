"""Start one trial as its own process tree, watch it, stop it, and say how it ended.

The parent side of a trial: no torch here, so the orchestrator's memory stays flat over
hundreds of trials. `run_trial` writes `spec.json` and starts one of

    python -m grpo_ablate.trainer.worker <trial_dir>/spec.json
    python -m torch.distributed.run --nproc_per_node N ... -m grpo_ablate.trainer.worker <spec>
    python -m accelerate.commands.launch --num_processes N ... -m grpo_ablate.trainer.worker <spec>

with its output in `log.txt`. It tails `metrics.jsonl` for progress, kills the trial at its
timeout, passes a stop request on as a `STOP` file (the worker ends after the current step),
and classifies the outcome from the worker's `result.json`, the exit status, the log and the
kernel's OOM-kill counter. The classification is written back into `result.json`. The trial
dies with this process: a parent-death signal, and the worker watches this process's pid.

    python -m grpo_ablate.trainer.launch runs/x/trials/00000/spec.json
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..metrics import summarize_trial
from ..vocab import (BUILTIN_MODEL_PREFIX, GROUPS_FILE, LOG_FILE, METRICS_FILE, RANK_RESULT_GLOB, RESOLVED_CONFIG_FILE,
                     RESULT_FILE, STOP_FILE, Outcome)
from .spec import TrialResult, TrialSpec
from .vllm_server import server_engine_args, vllm_server
from .worker import LAUNCHED_AT_ENV, PARENT_PID_ENV

__all__ = [
    "TrialResult",
    "build_command",
    "oom_kill_count",
    "oom_kill_files",
    "parse_oom_kills",
    "request_stop",
    "requested_stop",
    "run_trial",
]

POLL_SECONDS = 0.5
STOP_GRACE_SECONDS = 60.0  # after a STOP, how long a step may take before the process is killed
TERM_GRACE_SECONDS = 10.0  # between SIGTERM and SIGKILL
LOG_TAIL_LINES = 60
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Real out-of-memory messages only: CUDA's, torch's CPU allocator's, and a raised MemoryError or
# torch.OutOfMemoryError (also as torchrun prints a rank's traceback, "[rank1]: MemoryError").
_OOM_LOG = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|DefaultCPUAllocator: can't allocate memory"
    r"|^(?:\[rank\d+\]:)?\s*(?:[\w.]+\.)?(?:OutOfMemoryError|MemoryError)\b",
    re.MULTILINE,
)
# torchrun's summary when a rank died of SIGKILL; the exit status is then torchrun's own.
_SIGKILL_LOG = re.compile(r"Signal 9 \(SIGKILL\)|exitcode\s*:\s*-9\b")
_STALE = (METRICS_FILE, GROUPS_FILE, RESULT_FILE, STOP_FILE, LOG_FILE, RESOLVED_CONFIG_FILE)


def request_stop(trial_dir: str | os.PathLike[str], reason: str) -> bool:
    """Ask a trial to end after its current optimizer step; the first reason written wins.

    `reason` is "pruned" or "interrupted". Creates the folder when the trial has not started
    yet (run_trial then never launches it). Returns True when this call's reason was written,
    False when a STOP was already there. The file appears whole: written under a temporary
    name, then hard-linked into place, which fails if a STOP exists (no reader sees a
    half-written reason, and a later "pruned" never replaces "interrupted").
    """
    folder = Path(trial_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / STOP_FILE
    tmp = folder / f".{STOP_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(reason + "\n")
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    except OSError as exc:  # a file system without hard links: exclusive create, then write
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as handle:
            handle.write(reason + "\n")
        return True
    finally:
        tmp.unlink(missing_ok=True)


def requested_stop(trial_dir: str | os.PathLike[str]) -> str | None:
    """The stop requested for a trial ("pruned" or "interrupted"), None when none was."""
    try:
        text = (Path(trial_dir) / STOP_FILE).read_text().strip().lower()
    except FileNotFoundError:
        return None
    return Outcome.INTERRUPTED.value if text.startswith("interrupt") else Outcome.PRUNED.value


# --------------------------------------------------------------------------------------------
# Evidence of running out of memory: the kernel's OOM kills in this process's memory cgroup
# --------------------------------------------------------------------------------------------


def oom_kill_files(proc_cgroup: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """The files that count OOM kills for the cgroup named in a /proc/<pid>/cgroup text.

    cgroup v2 ("0::/path"): `memory.events` (also under root/unified on a hybrid mount);
    cgroup v1 ("N:...memory...:/path"): `memory/path/memory.oom_control`. Both have a line
    "oom_kill <count>".
    """
    found: list[Path] = []
    for line in proc_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.strip().lstrip("/")
        if hierarchy == "0" and controllers == "":
            found += [root / relative / "memory.events", root / "unified" / relative / "memory.events"]
        elif "memory" in controllers.split(","):
            found.append(root / "memory" / relative / "memory.oom_control")
    return found


def parse_oom_kills(text: str) -> int | None:
    """The `oom_kill` count in a memory.events or memory.oom_control text; None if absent."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def oom_kill_count(proc_cgroup: str | os.PathLike[str] = "/proc/self/cgroup", root: Path = CGROUP_ROOT) -> int | None:
    """How many processes the kernel's OOM killer has killed in this process's memory cgroup.

    A trial starts in its parent's cgroup, so a rise while it ran is evidence that it ran out
    of memory. None where the count cannot be read (no cgroup memory controller, another OS).
    """
    try:
        text = Path(proc_cgroup).read_text()
    except OSError:
        return None
    for path in oom_kill_files(text, root):
        try:
            count = parse_oom_kills(path.read_text())
        except OSError:
            continue
        if count is not None:
            return count
    return None


# --------------------------------------------------------------------------------------------
# Dying with the parent
# --------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: the kernel sends the trial SIGKILL when the thread that started it ends.

    Linux only (elsewhere it does nothing; the worker's watch on GRPO_ABLATE_PARENT_PID still
    ends it). The signal follows the starting *thread*, which here waits in run_trial until the
    trial has ended. libc is loaded here, not in the child, so the child only makes the call.
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before the call: nobody will signal
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launcher(spec: TrialSpec) -> str:
    choice = str(spec.hardware.get("launcher") or "auto")
    if choice != "auto":
        return choice
    if spec.num_processes <= 1:
        return "python"
    # accelerate only when the study gives it a config: `accelerate launch --cpu --num_processes 2`
    # was seen starting ONE process, torchrun starts N reliably on CPU (gloo) and GPU (nccl).
    return "accelerate" if spec.hardware.get("accelerate_config") else "torchrun"


def build_command(spec: TrialSpec, spec_path: str | os.PathLike[str]) -> list[str]:
    """The argv that starts the trial's process(es)."""
    worker = ["-m", "grpo_ablate.trainer.worker", os.fspath(spec_path)]
    launcher = _launcher(spec)
    n = spec.num_processes
    if launcher == "python":
        if n != 1:
            raise ValueError(f"hardware.launcher 'python' starts one process, but num_processes is {n}; use torchrun or accelerate")
        return [sys.executable, *worker]
    if launcher == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes", "1", "--nproc_per_node", str(n),
            "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
            *worker,
        ]
    if launcher == "accelerate":
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(n), "--main_process_port", str(_free_port())]
        if spec.hardware.get("accelerate_config"):
            cmd += ["--config_file", os.fspath(spec.hardware["accelerate_config"])]
        return [*cmd, *worker]
    raise ValueError(f"hardware.launcher must be auto, python, torchrun or accelerate, got {launcher!r}")


def _environment(spec: TrialSpec) -> dict[str, str]:
    env = dict(os.environ)
    env.update(spec.env)
    # The worker imports this package by module name, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.fspath(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env[LAUNCHED_AT_ENV] = repr(time.time())
    env[PARENT_PID_ENV] = str(os.getpid())  # the worker ends its trial when this pid is gone
    return env


class _Tail:
    """Read the complete new lines of a growing JSONL file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        data = self.partial + chunk
        lines = data.split(b"\n")
        self.partial = lines.pop()
        rows = []
        for line in lines:
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict):
                rows.append(obj)
        return rows


def _kill_tree(proc: subprocess.Popen, grace: float = TERM_GRACE_SECONDS) -> None:
    """SIGTERM the trial's process group, then SIGKILL what is left after `grace` seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64_000))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return raw if isinstance(raw, dict) else None


# --------------------------------------------------------------------------------------------
# The trial
# --------------------------------------------------------------------------------------------


def _serve_vllm(spec: TrialSpec, env: dict[str, str], stack: contextlib.ExitStack) -> dict[str, str]:
    """Start the trial's vLLM server (trainer/vllm_server.py); point the trainer at it.

    Returns the training processes' environment (CUDA_VISIBLE_DEVICES without the server GPUs).
    The server stops when `stack` closes, whatever happened to the trial.
    """
    model = str(spec.model["name_or_path"])
    if model.startswith(BUILTIN_MODEL_PREFIX):
        raise ValueError("vLLM server mode needs a model folder or hub id; the built-in model is for CPU runs")
    served = stack.enter_context(
        vllm_server(
            spec.hardware, model, env, spec.path / "vllm.log",
            dtype=spec.model.get("dtype"), revision=spec.model.get("revision"),
            trust_remote_code=bool(spec.model.get("trust_remote_code")), preexec_fn=_die_with_parent(os.getpid()),
            **server_engine_args(spec.trainer),
        )
    )
    spec.trainer.update(served["trainer"])  # host, ports: this trial's server, whatever the study said
    return dict(served["env"])


def _prepare(spec: TrialSpec) -> Path:
    """Clear a previous run's files from the folder (a rerun starts clean).

    A STOP file is a previous run's only when that run also left a result; otherwise it is a
    request for this run written before it started (a study interrupted while launching), so
    it stays, and run_trial records the stop without launching the trial.
    """
    trial_dir = spec.path
    trial_dir.mkdir(parents=True, exist_ok=True)
    previous_run = (trial_dir / RESULT_FILE).exists()
    for name in _STALE:
        if name == STOP_FILE and not previous_run:
            continue
        (trial_dir / name).unlink(missing_ok=True)
    for stale in trial_dir.glob(RANK_RESULT_GLOB):
        stale.unlink()
    return trial_dir


def _oom_kill_evidence(before: int | None, after: int | None) -> str | None:
    """Words for a rise of the cgroup's OOM-kill count while the trial ran; None without one."""
    if before is None or after is None or after <= before:
        return None
    return f"the kernel's OOM killer killed {after - before} process(es) in this cgroup while the trial ran (oom_kill {before} -> {after})"


def _classify(
    spec: TrialSpec,
    returncode: int | None,
    worker: dict[str, Any] | None,
    rank_failures: list[dict[str, Any]],
    *,
    timed_out: bool,
    stop_reason: str | None,
    log_tail: str,
    oom_kill: str | None = None,
) -> tuple[Outcome, str | None]:
    """How the trial ended. OOM only on evidence: the worker's own MemoryError or CUDA OOM
    error, `oom_kill` (the kernel's OOM kill, see _oom_kill_evidence), or an OOM message in
    the log. A SIGKILL without such evidence is INTERRUPTED: something outside the trial
    ended it, and the study runs it again."""
    if timed_out:
        return Outcome.FAILED, f"timeout: the trial ran past timeout_s={spec.timeout_s:g} s and was killed"
    for failure in rank_failures:  # a non-zero rank's own record of what went wrong comes first
        return Outcome(failure.get("outcome", "failed")), f"rank {failure.get('rank')}: {failure.get('reason')}"
    if worker is not None:
        outcome = Outcome(worker.get("outcome", "failed"))
        if outcome in (Outcome.COMPLETED, Outcome.PRUNED, Outcome.INTERRUPTED):
            expected = spec.num_processes
            seen = int(worker.get("world_size") or 1)
            if seen != expected:
                return Outcome.FAILED, (
                    f"the launcher started {seen} training process(es), expected hardware.num_processes={expected}; "
                    "check the launcher (torchrun starts N on CPU; `accelerate launch --cpu` may start one)"
                )
        return outcome, worker.get("reason")
    if stop_reason is not None:
        return Outcome(stop_reason), f"stopped by the parent ({stop_reason}); the process was killed after the grace period"
    if oom_kill is not None:
        return Outcome.OOM, f"exited with code {returncode} and no result; {oom_kill}"
    message = _OOM_LOG.search(log_tail)
    if message is not None:
        line = log_tail[log_tail.rfind("\n", 0, message.start()) + 1:].split("\n", 1)[0].strip()
        return Outcome.OOM, f"exited with code {returncode}; the log shows an out-of-memory error: {line[:300]}"
    if returncode in (-signal.SIGKILL, 128 + signal.SIGKILL) or _SIGKILL_LOG.search(log_tail):
        return Outcome.INTERRUPTED, (
            f"killed by SIGKILL with no evidence of running out of memory (exit {returncode}, no result, "
            "no OOM kill in the cgroup's memory events, no OOM error in the log)"
        )
    last = next((line for line in reversed(log_tail.splitlines()) if line.strip()), "")
    return Outcome.FAILED, f"the trial process exited with code {returncode} without a result; last log line: {last[:300]}"


def run_trial(
    spec: TrialSpec,
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    stop_event: threading.Event | None = None,
    poll_seconds: float = POLL_SECONDS,
    stop_grace_s: float = STOP_GRACE_SECONDS,
) -> TrialResult:
    """Run one trial to its end and classify it; never raises for a trial's own failure.

    `on_progress(row)` is called from this thread with every new metrics.jsonl row.
    `stop_event` set ends the trial after the current step as "pruned"; a STOP file written by
    anyone (request_stop) ends it with the reason it holds. Ctrl-C in the parent stops the trial
    as "interrupted" (unless another reason came first), then re-raises. Call it from a thread
    that lives until it returns: the trial's parent-death signal follows that thread.
    """
    trial_dir = _prepare(spec)
    env = _environment(spec)
    log_path = trial_dir / LOG_FILE
    tail = _Tail(trial_dir / METRICS_FILE)
    started = time.monotonic()
    timed_out = False
    stop_reason: str | None = None
    stop_requested_at: float | None = None
    server = contextlib.ExitStack()

    def deliver(rows: list[dict[str, Any]]) -> None:
        if on_progress is not None:
            for row in rows:
                on_progress(row)

    early = requested_stop(trial_dir)
    if early is not None:  # stopped before it started: nothing to run
        spec.save()
        outcome = Outcome(early)
        result = TrialResult(outcome, f"stopped by the parent ({outcome.value}) before it started",
                             metrics=summarize_trial(trial_dir), trial_dir=spec.trial_dir)
        _finalize(trial_dir, result, None)
        return result
    oom_kills_before = oom_kill_count()
    with log_path.open("ab", buffering=0) as log:
        try:
            if (spec.hardware.get("vllm") or {}).get("mode") == "server":
                env = _serve_vllm(spec, env, server)
            spec_path = spec.save()
            cmd = build_command(spec, spec_path)
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    cwd=os.getcwd(), preexec_fn=_die_with_parent(os.getpid()))
        except Exception as exc:  # could not even start: a failed trial, not a crash of the sweep
            server.close()
            spec.save()
            log.write(f"could not start the trial: {type(exc).__name__}: {exc}\n".encode())
            result = TrialResult(Outcome.FAILED, f"could not start the trial: {type(exc).__name__}: {exc}",
                                 metrics=summarize_trial(trial_dir), exception_type=type(exc).__name__,
                                 exception_message=str(exc), log_tail=_log_tail(log_path), trial_dir=spec.trial_dir)
            _finalize(trial_dir, result, None)
            return result
        try:
            while proc.poll() is None:
                time.sleep(poll_seconds)
                deliver(tail.read())
                now = time.monotonic()
                if stop_reason is None:
                    if stop_event is not None and stop_event.is_set():
                        request_stop(trial_dir, Outcome.PRUNED.value)
                    stop_reason = requested_stop(trial_dir)
                    if stop_reason is not None:
                        stop_requested_at = now
                if stop_requested_at is not None and now - stop_requested_at > stop_grace_s:
                    _kill_tree(proc)
                if spec.timeout_s is not None and now - started > spec.timeout_s:
                    timed_out = True
                    _kill_tree(proc)
        except KeyboardInterrupt:
            try:
                request_stop(trial_dir, Outcome.INTERRUPTED.value)
            except OSError:  # no STOP can be written: end it now rather than after its step
                _kill_tree(proc)
            try:
                proc.wait(timeout=TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
            _finish(spec, proc.returncode, timed_out=False, stop_reason=requested_stop(trial_dir), log_path=log_path,
                    oom_kill=_oom_kill_evidence(oom_kills_before, oom_kill_count()))
            raise
        except BaseException:  # the watch itself failed (a progress callback, the disk): never leave the trial unwatched
            _kill_tree(proc)
            raise
        finally:
            server.close()
    deliver(tail.read())
    return _finish(spec, proc.returncode, timed_out=timed_out, stop_reason=stop_reason, log_path=log_path,
                   oom_kill=_oom_kill_evidence(oom_kills_before, oom_kill_count()))


def _finish(spec: TrialSpec, returncode: int | None, *, timed_out: bool, stop_reason: str | None, log_path: Path,
            oom_kill: str | None = None) -> TrialResult:
    trial_dir = spec.path
    worker = _read_json(trial_dir / RESULT_FILE)
    rank_failures = [r for r in (_read_json(p) for p in sorted(trial_dir.glob(RANK_RESULT_GLOB))) if r]
    log_tail = _log_tail(log_path)
    outcome, reason = _classify(spec, returncode, worker, rank_failures, timed_out=timed_out, stop_reason=stop_reason,
                                log_tail=log_tail, oom_kill=oom_kill)
    source = rank_failures[0] if rank_failures else (worker or {})
    metrics = summarize_trial(trial_dir)
    result = TrialResult(
        outcome=outcome,
        reason=reason,
        metrics=metrics,
        returncode=returncode,
        log_tail=log_tail,
        exception_type=source.get("exception_type"),
        exception_message=source.get("exception_message"),
        timings=dict((worker or {}).get("timings") or {}),
        world_size=(worker or {}).get("world_size"),
        trial_dir=spec.trial_dir,
    )
    _finalize(trial_dir, result, worker)
    return result


def _finalize(trial_dir: Path, result: TrialResult, worker: dict[str, Any] | None) -> None:
    """Write the parent's classification into result.json, keeping the worker's details."""
    payload = dict(worker or {})
    final = result.to_dict()
    final.pop("log_tail", None)
    payload.update({k: v for k, v in final.items() if v is not None or k not in payload})
    payload["worker_outcome"] = (worker or {}).get("outcome")
    tmp = trial_dir / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, trial_dir / RESULT_FILE)


def _main(argv: list[str] | None = None) -> int:
    """`python -m grpo_ablate.trainer.launch spec.json`: re-run a trial from its spec."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.launch <trial_dir>/spec.json", file=sys.stderr)
        return 2
    spec = TrialSpec.load(argv[0])
    result = run_trial(spec, on_progress=lambda row: print(json.dumps({k: row.get(k) for k in ("step", "train_seconds", "reward")})))
    print(json.dumps({k: v for k, v in result.to_dict().items() if k != "log_tail"}, indent=2, default=str))
    return 0 if result.outcome is Outcome.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(_main())
