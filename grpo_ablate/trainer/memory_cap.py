"""A trial's peak memory, and `hardware.memory_limit_mb`: on CPU, a trial over the cap is an OOM.

On GPUs CUDA raises its own out-of-memory error; on a CPU machine nothing does until the
kernel kills the whole box. The cap makes the CPU path behave like a GPU: a daemon thread in
the trial process sums the resident memory (RSS) of the trial's process group (under torchrun,
each rank's) every POLL_SECONDS; over the cap, it writes the trial's result as `oom` with the peak it saw, prints
a MemoryError line to the log, and kills the group. Every trial also leaves `memory.json`
(peak RSS, and CUDA's peak when CUDA was used), which `grpo-ablate probe` reads.

    python -m grpo_ablate.trainer.worker runs/x/trials/00000/spec.json   # started by the worker
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from grpo_ablate.contract.spec import HardwareSpec
from grpo_ablate.core.vocab import MEMORY_FILE, RESULT_FILE, Outcome

__all__ = ["MemoryWatch", "group_rss_mb", "start_memory_watch"]

POLL_SECONDS = 0.1  # under a cap: a spike shorter than this can slip by
PEAK_POLL_SECONDS = 0.5  # without one, only memory.json's peak is wanted: cheaper
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def group_rss_mb(pgid: int) -> float:
    """Resident memory (MiB) of every process in process group `pgid` (the trial's tree)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:  # field 5: process group
            total += int(fields[21]) * _PAGE  # field 24: rss in pages
    return total / 2**20


class MemoryWatch:
    """Track the trial's peak RSS; past `limit_mb`, record an OOM and end the trial."""

    def __init__(self, trial_dir: Path, limit_mb: float | None, *, rank: int = 0) -> None:
        self.trial_dir = trial_dir
        self.limit_mb = limit_mb
        self.rank = rank
        self.pgid = os.getpgrp()
        self.peak_mb = 0.0
        self._stop = threading.Event()

    def poll(self) -> float:
        now = group_rss_mb(self.pgid)
        self.peak_mb = max(self.peak_mb, now)
        return now

    def _over(self, now: float) -> None:
        reason = (f"MemoryError: the trial's processes held {now:.0f} MiB, over hardware.memory_limit_mb="
                  f"{self.limit_mb:g}")
        print(f"[grpo-ablate] {reason}\n{reason}", flush=True)
        self.write()
        name = RESULT_FILE if self.rank == 0 else f"result.rank{self.rank}.json"
        payload: dict[str, Any] = {"outcome": Outcome.OOM.value, "reason": reason, "exception_type": "MemoryError",
                                   "exception_types": ["MemoryError"], "oom_evidence": "hardware.memory_limit_mb cap",
                                   "exception_message": reason, "rank": self.rank, "peak_rss_mb": round(now, 1)}
        target = self.trial_dir / name
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(payload, indent=2))
        os.replace(tmp, target)
        os.killpg(self.pgid, signal.SIGKILL)

    def run(self) -> None:
        while not self._stop.wait(POLL_SECONDS if self.limit_mb is not None else PEAK_POLL_SECONDS):
            now = self.poll()
            limit = self.limit_mb  # read once: a warm session's next trial may change it
            if limit is not None and now > limit:
                self._over(now)
                return

    def write(self) -> None:
        """memory.json: the peak RSS seen, and CUDA's peak when this process used CUDA."""
        payload: dict[str, Any] = {"peak_rss_mb": round(self.peak_mb, 1), "limit_mb": self.limit_mb}
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            payload["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        if self.rank == 0:
            (self.trial_dir / MEMORY_FILE).write_text(json.dumps(payload, indent=2))

    def close(self) -> None:
        self._stop.set()
        self.poll()
        self.write()

    def retarget(self, trial_dir: str | os.PathLike[str], hardware: HardwareSpec | None = None) -> None:
        """Watch the next trial run by this same process (a warm session): a fresh peak, a new folder, its cap.

        The caller releases the previous trial's memory first (worker.release_memory), so the
        new peak starts from what a fresh process would hold after loading.
        """
        self.trial_dir = Path(trial_dir)
        if hardware is not None:
            self.limit_mb = _limit(hardware)
        self.peak_mb = 0.0
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()
        self.poll()


def _limit(hardware: HardwareSpec) -> float | None:
    limit = hardware.memory_limit_mb
    return float(limit) if limit else None


def start_memory_watch(trial_dir: str | os.PathLike[str], hardware: HardwareSpec) -> MemoryWatch:
    """Start the watch thread for this trial process; memory.json is written at exit."""
    watch = MemoryWatch(Path(trial_dir), _limit(hardware), rank=int(os.environ.get("RANK", "0")))
    watch.poll()
    threading.Thread(target=watch.run, name="grpo-ablate-memory-cap", daemon=True).start()
    atexit.register(watch.close)
    return watch


