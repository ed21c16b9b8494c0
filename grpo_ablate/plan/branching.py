"""Where the arms of a seed branch from one shared prefix (budget.branch_from), as an optimizer step.

    budget: {branch_from: warmup}   # or a step count, or a share of the full run ("0.1x")

For each seed the baseline trains once up to this step (the prefix cell, role "prefix") and is
checkpointed; every arm of that seed then starts from that checkpoint with its own G, temperature
and generation batch and trains the trial's budget from there, the learning-rate schedule going
on as the full run's. The prefix's compute is paid once per seed, not once per arm, and the arms
are compared where the run trains (past warmup), not inside its first steps.

Pure: reads a validated StudyConfig; the plan (plan/cells.py) turns the step into cells, the study queues a
seed's branches once its prefix is sealed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from grpo_ablate.core.cost import parse_share, warmup_steps
from grpo_ablate.core.errors import Problem, StudyError
from grpo_ablate.plan.estimate import study_full_run_steps
from grpo_ablate.core.vocab import PREFIX_ROLE

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["PREFIX_ROLE", "branch_step", "branches", "BranchError"]


class BranchError(StudyError):
    """budget.branch_from names a point this study cannot place (no warmup, no known full run); says which key fixes it.

    A StudyError with one problem at budget.branch_from, so every command reports it as it reports a
    validation problem (config/validate.py catches what the file alone shows; a full run counted in
    epochs over a dataset whose size is read only here is placed, or refused, here)."""

    def __init__(self, message: str) -> None:
        super().__init__([Problem(path="budget.branch_from", message=message.removeprefix("budget.branch_from: "))])


def branches(study: "StudyConfig") -> bool:
    """Whether the study's arms branch from a shared prefix: read off the file alone (branch_step places
    the point, which may need the dataset; a point that cannot be placed is refused when the plan is made)."""
    return study.budget.branch_from not in (None, "none")


def branch_step(study: "StudyConfig") -> int | None:
    """The optimizer step every arm of a seed branches at; None when trials start from step 0.

    `warmup`: the trainer's warmup_steps as the trial's scheduler counts it (cost.warmup_steps: a value
    below 1 is a share of the full run, rounded up as transformers rounds it); a share ("0.1x"): that share of the full run's steps, rounded up. Raises BranchError
    when the point cannot be placed.
    """
    raw = study.budget.branch_from
    if raw is None or raw == "none":
        return None
    if isinstance(raw, int):
        return raw
    if raw == "warmup":
        warmup = study.trainer.get("warmup_steps")
        full = study_full_run_steps(study) if isinstance(warmup, float) and 0 < warmup < 1 else None
        steps = warmup_steps(study.trainer, full)  # the one rule (cost.py), as the trial's scheduler counts it
        if steps is None:
            raise BranchError(f"budget.branch_from: warmup is {warmup:g} of the full run, whose length is not known "
                              "here: set budget.full_run.max_steps (or budget.full_run.prompts)")
        if not steps:
            raise BranchError("budget.branch_from: warmup, but the trainer has no warmup (trainer.warmup_steps "
                              "unset or 0): give a step count instead")
        return steps
    share = parse_share(raw)
    assert share is not None  # the schema let only shares through
    full = study_full_run_steps(study)
    if full is None:
        raise BranchError(f"budget.branch_from: {raw} of the full run, whose length is not known here: set "
                          "budget.full_run.max_steps (or budget.full_run.prompts)")
    return max(1, math.ceil(share * full - 1e-9))
