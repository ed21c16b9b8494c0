"""How often a trial saves a checkpoint: one rule for the child that saves (trainer/checkpoint_callback.py), the
dry run that shows it (trainer/dry_run.py) and a command trial's `--save_steps` (contract/command.py)."""

from __future__ import annotations

import math

__all__ = ["AUTO_MIN_SECONDS", "AUTO_SHARE", "interval_steps"]

AUTO_SHARE = 0.1  # `auto`: a checkpoint every ~10% of a trial's steps, so a kill loses at most that
# `auto` also waits for this much training since the last checkpoint: a trial of a few minutes is
# cheaper to run again than to checkpoint (a large model's checkpoint takes minutes to write)
AUTO_MIN_SECONDS = 300.0


def interval_steps(every: int | str | None, max_steps: int, round_steps: int = 1) -> int | None:
    """Optimizer steps between checkpoints; None: no checkpoint.

    `every`: a number of steps, "auto" (AUTO_SHARE of max_steps), or None (off). Rounded up to
    a whole number of generation rounds (`round_steps` optimizer steps each): TRL generates at a
    round's first step, so a checkpoint inside a round would resume with the round's completions
    lost and train on fresh ones. An interval that reaches max_steps saves nothing (the last
    step needs no checkpoint: the trial is then complete).
    """
    if every is None or max_steps <= 0:
        return None
    steps = math.ceil(max_steps * AUTO_SHARE) if every == "auto" else int(every)
    round_steps = max(1, int(round_steps))
    steps = max(round_steps, math.ceil(max(1, steps) / round_steps) * round_steps)
    return steps if steps < max_steps else None
