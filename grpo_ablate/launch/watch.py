"""A trial's files, as the parent sees them: the one piece every launcher watches them with.

Whatever runs the trial (a process of its own, a warm session, a batch scheduler), the trial
talks to its parent through its folder only:
- `STOP`: the parent's request to end after the current optimizer step (request_stop);
- `metrics.jsonl`: one row per optimizer step, tailed for progress (MetricsTail);
- `result.json` (and `result.rank<N>.json`): the worker's own record, read once the trial
  has ended, classified (outcome.classify) and written back with the parent's verdict (finish).

    pytest tests/test_launch_stop.py
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

from grpo_ablate.contract.metrics import summarize_trial
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.core.vocab import (GROUPS_FILE, LEASE_FILE, LOG_FILE, METRICS_FILE, RANK_RESULT_GLOB, RESOLVED_CONFIG_FILE,
                               RESULT_FILE, STOP_FILE, TAKEN_FILE, Outcome)

from .outcome import classify

__all__ = ["MetricsTail", "finalize", "finish", "log_tail", "mark_taken", "prepare", "read_json", "request_stop",
           "requested_stop", "taken"]

LOG_TAIL_LINES = 60
_STALE = (METRICS_FILE, GROUPS_FILE, RESULT_FILE, STOP_FILE, LOG_FILE, RESOLVED_CONFIG_FILE, TAKEN_FILE, LEASE_FILE)


def request_stop(trial_dir: str | os.PathLike[str], reason: str) -> bool:
    """Ask a trial to end after its current optimizer step; the first reason written wins.

    `reason` is "pruned" or "interrupted". Creates the folder when the trial has not started
    yet (the launcher then never starts it). Returns True when this call's reason was written,
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


def mark_taken(trial_dir: str | os.PathLike[str], words: str) -> bool:
    """Say in a trial's folder that another run took the trial over (study/liveness.py): its process, if it lives
    after all (a paused host woke up), stops at once and saves nothing, and its launcher ends it. False when the
    folder cannot be written (another host's disk): the run that owned it then finds out from the storage."""
    try:
        folder = Path(trial_dir)
        if not folder.is_dir():
            return False
        tmp = folder / f".{TAKEN_FILE}.{os.getpid()}.tmp"
        tmp.write_text(words + "\n")
        os.replace(tmp, folder / TAKEN_FILE)
        return True
    except OSError:
        return False


def taken(trial_dir: str | os.PathLike[str]) -> str | None:
    """Why the trial was taken over by another run (mark_taken), None when it was not."""
    try:
        return (Path(trial_dir) / TAKEN_FILE).read_text().strip() or "taken over by another run"
    except OSError:
        return None


class MetricsTail:
    """Read the complete new lines of a growing JSONL file (a half-written line waits for its end)."""

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


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64_000))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return raw if isinstance(raw, dict) else None


def prepare(spec: TrialSpec) -> Path:
    """Clear a previous run's files from the trial's folder (a rerun starts clean).

    A STOP file is a previous run's only when that run also left a result; otherwise it is a
    request for this run written before it started (a study interrupted while launching), so
    it stays, and the launcher records the stop without starting the trial.
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


def finish(spec: TrialSpec, returncode: int | None, *, timed_out: bool, stop_reason: str | None, log_path: Path,
           oom_kill: str | None = None) -> TrialResult:
    """Read the ended trial's records, classify it, and write the verdict into result.json."""
    trial_dir = spec.path
    stop_reason = stop_reason or requested_stop(trial_dir)  # also the trial's own (a SIGTERM it got: trainer/signals.py)
    worker = read_json(trial_dir / RESULT_FILE)
    rank_failures = [r for r in (read_json(p) for p in sorted(trial_dir.glob(RANK_RESULT_GLOB))) if r]
    tail = log_tail(log_path)
    outcome, reason = classify(spec, returncode, worker, rank_failures, timed_out=timed_out, stop_reason=stop_reason,
                               log_tail=tail, oom_kill=oom_kill, taken=taken(trial_dir))
    source = rank_failures[0] if rank_failures else (worker or {})
    result = TrialResult(
        outcome=outcome,
        reason=reason,
        metrics=summarize_trial(trial_dir),
        returncode=returncode,
        log_tail=tail,
        exception_type=source.get("exception_type"),
        exception_message=source.get("exception_message"),
        timings=dict((worker or {}).get("timings") or {}),
        world_size=(worker or {}).get("world_size"),
        trial_dir=spec.trial_dir,
    )
    finalize(trial_dir, result, worker)
    return result


def finalize(trial_dir: Path, result: TrialResult, worker: dict[str, Any] | None) -> None:
    """Write the parent's classification into result.json, keeping the worker's details."""
    payload = dict(worker or {})
    final = result.to_dict()
    final.pop("log_tail", None)
    payload.update({k: v for k, v in final.items() if v is not None or k not in payload})
    payload["worker_outcome"] = (worker or {}).get("outcome")
    tmp = trial_dir / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, trial_dir / RESULT_FILE)
