"""SIGTERM in a trial process: one graceful stop, as the parent's STOP file asks for, never a lost trial.

A batch scheduler ends a job by sending SIGTERM to every process of it at once (SLURM's
`scancel`, a preemption, the time limit; then SIGKILL after its KillWait): the trial process
gets it at the same moment as its orchestrator. Without a handler the trial died on the spot,
with no checkpoint and no result.json, and its parent recorded a failure. With this handler a
SIGTERM writes the trial's STOP file with "interrupted" (unless a stop was already asked for),
so training ends after the current optimizer step, the checkpointer saves that step, and the
worker records the trial as interrupted: the study queues it again and the next run resumes it.
A second SIGTERM (the orchestrator's own request, a batch script forwarding the signal) finds
the STOP file there and changes nothing: one stop, however many times it is asked for.

    stop_on_sigterm(spec.trial_dir)   # trainer/worker.py main, trainer/session.py per trial

Stdlib only: the handler writes one small file from the main thread between bytecodes.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import FrameType

from grpo_ablate.core.vocab import STOP_FILE, Outcome

__all__ = ["TERM_STOP_REASON", "stop_on_sigterm", "write_stop"]

TERM_STOP_REASON = Outcome.INTERRUPTED.value

_target: Path | None = None


def write_stop(trial_dir: Path, reason: str = TERM_STOP_REASON) -> bool:
    """Create `trial_dir`/STOP holding `reason` unless one is there; True when this call wrote it.

    Exclusive create, then the text: a reader that finds the file empty reads "pruned" for a
    moment at worst, never a stop that was not asked for (callbacks.StopOnRequest reads it once
    the step is over, by when the reason is written).
    """
    try:
        fd = os.open(trial_dir / STOP_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(reason + "\n")
    return True


def _on_term(signum: int, frame: FrameType | None) -> None:
    target = _target
    if target is None:  # no trial running in this process: end as SIGTERM's default would
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    try:
        if write_stop(target):
            print("[grpo-ablate] SIGTERM: the trial stops after its current step (interrupted, checkpointed, resumed later)",
                  flush=True)
    except OSError as exc:  # the folder is gone or full: nothing to save to, so end the way SIGTERM would
        print(f"[grpo-ablate] SIGTERM: cannot write the STOP file ({exc}); ending now", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def stop_on_sigterm(trial_dir: str | os.PathLike[str] | None) -> None:
    """From now on a SIGTERM to this process stops the trial in `trial_dir` gracefully (None: no trial, default death).

    Call from the main thread (Python's rule for signal handlers).
    """
    global _target
    _target = None if trial_dir is None else Path(trial_dir)
    signal.signal(signal.SIGTERM, _on_term)
