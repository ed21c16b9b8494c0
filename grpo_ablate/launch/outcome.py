"""How a trial ended, from evidence: the one classification every launcher uses.

Out of memory is recorded only on evidence of a *type*, never on words in a log:
- the worker's own record (result.json, result.rank<N>.json), written where Python still ran:
  the worker classified the exception object itself (MemoryError, torch.OutOfMemoryError,
  torch's allocator errors; see trainer/worker.py `oom_evidence`), or the CPU memory cap
  (trainer/memory_cap.py) wrote the kill it made;
- the kernel's OOM killer, as a rise of the `oom_kill` counter of this process's memory cgroup
  while the trial ran.
A process that merely prints "CUDA out of memory" and exits is a failure with its last log
line. A trial ended from outside before it could record a result is `interrupted` (the study
queues it again, and the next run resumes its last checkpoint), read from the exit status and
the STOP file, never from log text: a SIGKILL with neither kind of OOM evidence (-9, or 137
from a shell), a SIGTERM (-15, or 143: what a scheduler's cancel, preemption or time limit sends
every process of the job; trainer/signals.py turns it into a graceful stop where the trial's
handler runs, and this covers the rest: a rank, a process killed before its handler was set), or
a STOP file asking for "interrupted" (the parent's, or the trial's own handler's).

    pytest tests/test_launch_oom.py
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.core.vocab import Outcome

if TYPE_CHECKING:
    from grpo_ablate.contract.spec import TrialSpec

__all__ = ["CGROUP_ROOT", "classify", "oom_kill_count", "oom_kill_evidence", "oom_kill_files", "parse_oom_kills"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
# torchrun's summary when a rank died of SIGKILL; the exit status is then torchrun's own.
_KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)  # Popen's convention, and a shell's
_TERMINATED = (-signal.SIGTERM, 128 + signal.SIGTERM)
_SIGKILL_LOG = re.compile(r"Signal 9 \(SIGKILL\)|exitcode\s*:\s*-9\b")


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


def oom_kill_evidence(before: int | None, after: int | None) -> str | None:
    """Words for a rise of the cgroup's OOM-kill count while the trial ran; None without one."""
    if before is None or after is None or after <= before:
        return None
    return f"the kernel's OOM killer killed {after - before} process(es) in this cgroup while the trial ran (oom_kill {before} -> {after})"


def classify(
    spec: "TrialSpec",
    returncode: int | None,
    worker: dict[str, Any] | None,
    rank_failures: list[dict[str, Any]],
    *,
    timed_out: bool,
    stop_reason: str | None,
    log_tail: str,
    oom_kill: str | None = None,
    taken: str | None = None,
) -> tuple[Outcome, str | None]:
    """(outcome, reason) of a trial. `worker` is its result.json, `rank_failures` the failing
    ranks' own records; `oom_kill` the kernel's evidence (oom_kill_evidence); `taken`: another run took the
    trial over (launch/watch.mark_taken) and it was ended for that, unless its own record says it finished. The
    log is read only for the reason's last line and torchrun's SIGKILL summary, never for OOM."""
    if timed_out:  # the machine was slower than the estimate, not the cell at fault: queued again, resuming its checkpoint
        return Outcome.INTERRUPTED, f"timeout: the trial ran past timeout_s={spec.timeout_s:g} s and was killed"
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
    if taken is not None:
        return Outcome.INTERRUPTED, f"ended at once: {taken}"
    if stop_reason is not None:
        return Outcome(stop_reason), f"stopped by the parent ({stop_reason}); the process was killed after the grace period"
    if oom_kill is not None:
        return Outcome.OOM, f"exited with code {returncode} and no result; {oom_kill}"
    if returncode in _TERMINATED:
        return Outcome.INTERRUPTED, (
            f"ended by SIGTERM before it recorded a result (exit {returncode}): a scheduler's cancel, preemption or "
            "time limit, or a kill from outside the trial; it is queued again"
        )
    if returncode in _KILLED or _SIGKILL_LOG.search(log_tail):
        return Outcome.INTERRUPTED, (
            f"killed by SIGKILL with no evidence of running out of memory (exit {returncode}, no result, "
            "no OOM kill in the cgroup's memory events)"
        )
    last = next((line for line in reversed(log_tail.splitlines()) if line.strip()), "")
    return Outcome.FAILED, f"the trial process exited with code {returncode} without a result; last log line: {last[:300]}"
