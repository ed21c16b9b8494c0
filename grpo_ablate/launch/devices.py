"""Each worker's share of the machine: a block of GPUs, or CPU threads shared by every trial on the host.

CPU threads are counted over the whole host, not one process: every running CPU trial of any
`grpo-ablate` process holds an `fcntl.flock` slot file under `$GRPO_ABLATE_CACHE/slots`
(default `~/.cache/grpo-ablate/slots`), and a trial's threads are the cores divided by the
trials running there. Two `run` commands on one machine then split the cores instead of each
giving every trial all of them. The kernel drops a dead process's locks, so no slot goes stale.
`run-one`, `probe` and `advise` train or sample too, so they hold a slot the same way (cpu_slot)
for as long as their trial or sampler runs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator

from grpo_ablate.core.children import die_with_parent
from grpo_ablate.launch import LAUNCHER_ENV, LAUNCHERS

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["remote_launcher", "worker_envs", "visible_gpus", "CpuShare", "claim_cpu_share", "cpu_slot", "slots_dir", "host_cores"]

MAX_SLOTS = 1024


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True, preexec_fn=die_with_parent()).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def remote_launcher(study: "StudyConfig") -> bool:
    """Whether the study's trials run where a scheduler puts them (the launcher declares it: Capabilities.remote)."""
    name = os.environ.get(LAUNCHER_ENV, "").strip().lower() or str(study.hardware.launcher)
    kind = LAUNCHERS.get(name)
    return kind is not None and kind.capabilities.remote


def worker_envs(study: "StudyConfig", workers: int, gpus: list[str] | None = None) -> list[dict[str, str]]:
    """Each worker's environment: its GPUs, or no GPU (its threads are set per trial by a CpuShare).

    With a remote launcher this host's GPUs are not the trials': every worker gets the study's
    workers count, and a GPU trial the GPUs its job is granted (SLURM sets CUDA_VISIBLE_DEVICES
    on the node); a CPU study's trials still get none. `gpus`: the host's GPUs (default: the ones
    visible here; the dry run passes the node's the study names).
    """
    if remote_launcher(study):
        return [{} if study.hardware.gpus else {"CUDA_VISIBLE_DEVICES": ""} for _ in range(workers)]
    gpus = visible_gpus() if gpus is None else gpus
    if gpus:
        block = study.hardware.gpus or study.world_size
        usable = len(gpus) // block
        if usable < 1:
            raise RuntimeError(f"each trial needs {block} GPU(s) but only {len(gpus)} are visible")
        if workers > usable:
            print(f"grpo-ablate: {workers} workers x {block} GPU(s) do not fit on {len(gpus)} GPU(s); using {usable} workers",
                  file=sys.stderr)
            workers = usable
        return [{"CUDA_VISIBLE_DEVICES": ",".join(gpus[i * block:(i + 1) * block])} for i in range(workers)]
    return [{"CUDA_VISIBLE_DEVICES": ""} for _ in range(workers)]


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def slots_dir() -> Path:
    base = os.environ.get("GRPO_ABLATE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "grpo-ablate")
    return Path(base) / "slots"


@dataclass
class CpuShare:
    """A running CPU trial's slot on this host and the threads it was given; release() when it ends."""

    threads: int
    running: int  # CPU trials running on the host when this one started, itself included
    _handle: IO[bytes] | None = field(default=None, repr=False)

    def env(self) -> dict[str, str]:
        return {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock
            self._handle = None


def claim_cpu_share(workers: int, world_size: int = 1, *, cores: int | None = None,
                    directory: Path | None = None) -> CpuShare:
    """Hold a host slot and split the cores over every CPU trial running on the host.

    At least this process's `workers` trials are assumed to share the cores, so a study's first
    trial does not take them all. Without a usable slot folder it falls back to that count, with
    a warning: a slot is worth having, not worth failing a trial over.
    """
    cores = cores or host_cores()
    world_size = max(1, world_size)
    folder = directory or slots_dir()
    handle: IO[bytes] | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(MAX_SLOTS):
            f = open(folder / f"slot-{i:04d}", "ab")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            handle = f
            break
        running = _count_held(folder)
    except OSError as exc:
        print(f"grpo-ablate: no host-wide CPU slots ({exc}); threads are split over this process's trials only",
              file=sys.stderr)
        if handle is not None:
            handle.close()
            handle = None
        running = 1
    sharers = max(workers, running)
    return CpuShare(max(1, cores // (sharers * world_size)), running, handle)


@contextmanager
def cpu_slot(world_size: int = 1) -> Iterator[dict[str, str]]:
    """Hold a host slot while a command outside `run` trains or samples; yields its processes' thread env.

    Without it a `run-one`, `probe` or `advise` beside a `run` takes every core on top of the
    run's trials, and both slow down. On a GPU machine the slot is the GPU, so nothing is held.
    """
    if visible_gpus():
        yield {}
        return
    share = claim_cpu_share(1, world_size)
    try:
        yield share.env()
    finally:
        share.release()


def _count_held(folder: Path) -> int:
    """Slots locked by anyone, this process's included (flock locks belong to each open file)."""
    held = 0
    for path in folder.glob("slot-*"):
        try:
            with open(path, "ab") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    held += 1
        except OSError:
            continue
    return held
