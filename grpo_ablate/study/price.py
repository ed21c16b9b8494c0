"""A study's price in units of the run it tunes: "this study costs 0.4x your run (48 of 120 GPU-h)".

    grpo-ablate plan study.yaml        # "Price: this study costs ..."
    study: {budget_gpu_hours: 0.5x}    # a budget written as a share of the full run

The arithmetic is cost.price (pure); this module reads the study for it, so `plan`, `init`, `run`'s
first lines and the report say one figure, computed one way:
- planned: every trial the study aims for (a race's planned maximum, which it may stop short of)
  at estimate.estimate_trial's per-trial GPU-hours, over the full run's at the same rates;
- spent: the GPU-hours the trials used (gpu_hours.spent_seconds x hardware.gpus), over the same
  full run.
The full run is the recipe's (budget.full_run: its max_steps, or epochs x training prompts / prompts
per step). A budget written as a share ("0.5x") becomes GPU-hours at the low end of the full run's
estimate (the cap is never more than that share of what the run may cost), when the study is loaded
by a command (`resolve_budget`); it stays a share when nothing prices the run, and `run` refuses it
before anything starts (`price_line`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from grpo_ablate.cost import Price, RunShare, parse_share, price
from grpo_ablate.errors import Problem, StudyError
from grpo_ablate.estimate import TrialEstimate, estimate_trial
from grpo_ablate.gpu_hours import spent_seconds
from grpo_ablate.plan import resolved_trial_count

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import Study

__all__ = ["planned_price", "spent_price", "price_line", "resolve_budget", "unknown_why"]


def unknown_why(study: "Study", est: TrialEstimate) -> str:
    """Why the full run's length is not known, naming the key that fixes it ("" when it is known)."""
    if est.full_run_steps:
        if not est.completions:
            return "a trial's budget is tokens or seconds only: give budget.max_steps (or budget.completions)"
        return ""
    if not study.budget.full_run:
        return ("no full run to compare with (no trainer_from recipe): set budget.full_run.max_steps to your run's "
                "optimizer steps")
    return ("the full run's length is in epochs over a dataset whose size is not in this machine's datasets cache: set "
            "budget.full_run.prompts (the training set's rows) or budget.full_run.max_steps")


def _no_hours(study: "Study", est: TrialEstimate) -> str:
    if not study.hardware.gpus:
        return "a CPU study (hardware.gpus unset)"
    if est.seconds is not None and est.full_run_seconds is None:
        return "the probe's pace prices a trial, not the full run"
    return est.source


def _price(study: "Study", est: TrialEstimate, trials: int, study_h: tuple[float, float] | None,
           study_steps: float | None, *, spent: bool) -> Price:
    return price(trials, study_h=study_h, full_run_h=est.full_run_gpu_hours, study_steps=study_steps,
                 full_run_steps=est.full_run_steps, no_hours=_no_hours(study, est), unknown=unknown_why(study, est),
                 spent=spent, at_most=not spent and study.study.racing is not None)


def planned_price(study: "Study", est: TrialEstimate | None = None) -> Price:
    """What the study's plan costs as a multiple of the full run (a race: its planned maximum)."""
    est = est or estimate_trial(study)
    trials = resolved_trial_count(study)
    steps = (trials * est.full_run_share * est.full_run_steps
             if est.full_run_share and est.full_run_steps and est.completions else None)
    return _price(study, est, trials, est.study_gpu_hours(trials), steps, spent=False)


def spent_price(study: "Study", trials: Iterable["FrozenTrial"]) -> Price:
    """What the study's trials used, as a multiple of the full run (every attempt's wall time x hardware.gpus)."""
    ran = list(trials)
    est = estimate_trial(study)
    gpus = int(study.hardware.gpus or 0)
    h = spent_seconds(ran) * gpus / 3600.0
    done = sum(1 for t in ran if t.datetime_complete is not None)
    # without GPU-hours: each ended attempt counted as one whole trial's steps (an upper bound)
    steps = done * est.full_run_share * est.full_run_steps if est.full_run_share and est.full_run_steps else None
    return _price(study, est, done, (h, h) if gpus else None, steps, spent=True)


def price_line(study: "Study") -> str:
    """`run`'s first line: the plan's price, and the budget as a share of the run where one was written so.

    StudyError (before anything runs) when the budget is a share of a run nothing here prices: a share
    left as written would otherwise reach the runner, which cannot count GPU-hours against it."""
    est = estimate_trial(study)
    budget = study.study.budget_gpu_hours
    if isinstance(budget, str):
        why = unknown_why(study, est) or _no_hours(study, est)
        raise StudyError([Problem(path="study.budget_gpu_hours", message=(
            f"{budget!r} is a share of the full run, whose GPU-hours are not known here ({why}); write the budget in "
            "GPU-hours instead"))])
    line = f"Price: {planned_price(study, est).words()}"
    if isinstance(budget, RunShare):
        line += f"; budget {budget.share:g}x your run = {float(budget):,.1f} GPU-h"
    return line + "."


def resolve_budget(study: "Study") -> None:
    """study.budget_gpu_hours written as a share ("0.5x") -> GPU-hours at the low end of the full run's estimate
    (a RunShare, a float that keeps the share). Left as written when nothing prices the full run."""
    share = parse_share(study.study.budget_gpu_hours)
    if share is None:
        return
    full = estimate_trial(study).full_run_gpu_hours
    if full is not None and full[0] > 0:
        study.study.budget_gpu_hours = RunShare(share, full[0])
