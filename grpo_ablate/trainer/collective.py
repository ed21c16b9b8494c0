"""The few collectives the callbacks need, so every rank of a multi-process trial takes the same path.

A callback that decides something from a clock or a rank-0-only counter (the seconds budget, when
to evaluate) must decide on one rank and tell the others: ranks that disagree leave one of them
waiting in a collective (DDP's all-reduce, a ZeRO-3 gather) forever. Without a process group
(one process) every function here is the identity and costs nothing.

    torchrun --nproc_per_node 2 -m grpo_ablate.trainer.worker <trial>/spec.json   # gloo on CPU, nccl on GPUs
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["all_gather", "from_rank0", "leave_process_group", "max_over_processes", "rank_and_world", "sum_over_processes"]


def _grouped() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank_and_world() -> tuple[int, int]:
    """(this process's rank, world size) of the default group; (0, 1) without one."""
    if not _grouped():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def from_rank0(value: int) -> int:
    """Rank 0's integer on every process (one broadcast)."""
    if not _grouped():
        return value
    t = torch.tensor([int(value)], dtype=torch.int64, device=_device())
    dist.broadcast(t, src=0)
    return int(t.item())


def all_gather(obj: Any) -> list[Any]:
    """Every rank's (picklable) object, in rank order, on every rank."""
    if not _grouped():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _all_reduce(value: int, op: "dist.ReduceOp") -> int:
    if not _grouped():
        return value
    t = torch.tensor([int(value)], dtype=torch.int64, device=_device())
    dist.all_reduce(t, op=op)
    return int(t.item())


def max_over_processes(value: int) -> int:
    """The largest of every rank's integer, on every rank (one all-reduce)."""
    return _all_reduce(value, dist.ReduceOp.MAX) if _grouped() else value


def sum_over_processes(value: int) -> int:
    """The sum of every rank's integer, on every rank (one all-reduce)."""
    return _all_reduce(value, dist.ReduceOp.SUM) if _grouped() else value


def leave_process_group() -> None:
    """Destroy the process groups, once every rank has ended training together.

    PyTorch asks every trainer process to do this at its end: NCCL warns otherwise, as pending
    operations may not have finished and an early exit can hold up another rank. Call it only
    after an ending all ranks reached in step (training completed, or a stop that rank 0 decided
    and broadcast): after an exception another rank may still be inside a collective, and
    destroying the group under it can hang. gloo's worker threads outlive it (seen on CPU here);
    worker.exit_ranked skips the teardown they can abort. With one process it does nothing: such
    a trial may run in a warm session, whose later trials keep whatever group the libraries made.
    """
    if _grouped():
        dist.destroy_process_group()
