"""Trials that end inside the learning-rate warmup of the run they stand for: refused unless the study opts in.

    grpo-ablate validate study.yaml      # "budget.max_steps: a trial ends at step 100, inside the 335-step warmup ..."

A trial under `budget.lr_schedule: prefix` is the first steps of the full run (a branch: the steps after its
branch point); under `compressed`, a run of its own. If it ends before that run's warmup does, it trained only
at a rising learning rate: on the CPU benchmark such trials (15 steps of a 60-step run, all of them warmup)
answered which G is best close to random (within 0.02 of the best in 62% of replays, against 90% for 30-step
trials that passed the warmup: benchmarks/branching.py --warmup 15, docs/your-own-run.md). So every command
that loads a study refuses one (commands/common.py), unless `budget.allow_inside_warmup: true` says it is
meant (a smoke test, a probe of speed).

Here, not in config/validate.py, because the full run's length may come from the dataset's rows, which only
estimate.py reads (its training_prompts).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from grpo_ablate.core.cost import lr_schedule_of, warmup_steps
from grpo_ablate.core.errors import Problem
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.plan.branching import BranchError, branch_step

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["inside_warmup", "trial_end"]


def trial_end(study: "StudyConfig") -> tuple[int, int, int | None] | None:
    """(the step a trial ends at, its warmup's last step, the length of the run it stands for); None when the
    trial's length in steps is not known (a budget of tokens or seconds only) or the warmup cannot be placed."""
    est = estimate_trial(study)
    if not est.completions:
        return None
    steps = math.ceil(est.completions / study.space.shape.generated_per_step - 1e-9)
    if lr_schedule_of(study.budget.model_dump()) == "compressed":
        return steps, warmup_steps(study.trainer, steps) or 0, steps
    full = est.full_run_steps
    try:
        start = branch_step(study) or 0
    except BranchError:  # the plan says why the branch point cannot be placed
        return None
    return start + steps, warmup_steps(study.trainer, full) or 0, full  # a share of a run of unknown length: 0


def inside_warmup(study: "StudyConfig") -> Problem | None:
    """A Problem at budget.max_steps when the study's trials end inside their run's warmup and the study did not
    opt in (budget.allow_inside_warmup); None otherwise."""
    if study.budget.allow_inside_warmup:
        return None
    end = trial_end(study)
    if end is None:
        return None
    stop, warm, full = end
    if not warm or stop > warm:
        return None
    try:
        start = branch_step(study) or 0
    except BranchError:
        start = 0
    run = (f"the full run's {full:,}-step schedule" if full and lr_schedule_of(study.budget.model_dump()) == "prefix"
           else "its own compressed schedule")
    fix = (f"train past it: budget.max_steps {warm - start + 1} or more"
           + ("" if start else ", or branch the arms past it (budget.branch_from: warmup)"))
    return Problem(path="budget.max_steps", message=(
        f"a trial ends at step {stop}, inside the {warm}-step learning-rate warmup of {run}: it would train only at a "
        f"rising learning rate, and such trials answered which G is best close to random on the CPU benchmark "
        f"(docs/your-own-run.md); {fix}, or set budget.allow_inside_warmup: true if that is what you mean"))
