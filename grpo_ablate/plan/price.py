"""A study's price in units of the run it tunes: "this study costs 0.4x your run (48 of 120 GPU-h)".

    grpo-ablate plan study.yaml        # "Price: this study costs ..."
    study: {budget_gpu_hours: 0.5x}    # a budget written as a share of the full run

The arithmetic is cost.price (pure); this module reads the study for it, so `plan`, `init`, `run`'s
first lines and the report say one figure, computed one way:
- planned: every trial the study aims for (a race's planned maximum, which it may stop short of)
  at estimate.estimate_trial's per-trial GPU-hours, over the full run's at the same rates;
- spent: the GPU-hours the trials used (gpu_hours.spent_seconds x hardware.gpus), over the same
  full run.
A branched study (budget.branch_from) is counted as it runs: per seed, one shared prefix of B steps
(the baseline trained to the branch step, branching.branch_step), counted ONCE however many arms
branch from it, plus each arm's branch of the trial's steps from B on; the words say so. The prefix
count is taken from the plan's seeds (not from its prefix cells), so it holds whether or not the
plan lists the prefixes as cells. The full run is the recipe's (budget.full_run: its max_steps, or
epochs x training prompts / prompts per step). A budget written as a share ("0.5x") becomes GPU-hours at the low end of the full run's
estimate (the cap is never more than that share of what the run may cost), when the study is loaded
by a command (`resolve_budget`); it stays a share when nothing prices the run, and `run` refuses it
before anything starts (`price_line`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable

from grpo_ablate.plan.branching import BranchError, branch_step
from grpo_ablate.core.cost import Branching, Price, RunShare, parse_share, price, study_total
from grpo_ablate.core.errors import Problem, StudyError
from grpo_ablate.plan.estimate import TrialEstimate, estimate_trial
from grpo_ablate.records.gpu_hours import spent_seconds
from grpo_ablate.stats.elimination import race_cost
from grpo_ablate.plan.cells import ablation_arms, baseline_arm, resolved_trial_count, study_plan
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.screen_file import load_screen
from grpo_ablate.records.trial_record import role_of
from grpo_ablate.core.vocab import PREFIX_ROLE

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig

__all__ = ["planned_price", "spent_price", "price_line", "resolve_budget", "unknown_why", "planned_counts",
           "prefix_estimate", "tunes_a_run", "screen_cost", "race_share", "PLANNING_SD"]


def tunes_a_run(study: "StudyConfig") -> bool:
    """Whether the study names the run it tunes (budget.full_run, which a trainer_from recipe sets). Without one a
    price "in units of your run" means nothing: `run` and the report say none (`plan` says which key gives one)."""
    return study.budget.full_run is not None


def unknown_why(study: "StudyConfig", est: TrialEstimate) -> str:
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


def _no_hours(study: "StudyConfig", est: TrialEstimate) -> str:
    if not study.hardware.gpus:
        return "a CPU study (hardware.gpus unset)"
    if est.seconds is not None and est.full_run_seconds is None:
        return "the probe's pace prices a trial, not the full run"
    return est.source


def _price(study: "StudyConfig", est: TrialEstimate, trials: int, study_h: tuple[float, float] | None,
           study_steps: float | None, *, spent: bool, branching: Branching | None = None) -> Price:
    screen_h, screen_steps = screen_cost(study, est)
    if spent and load_screen(study.output_dir, Owner.of(study)) is None:
        screen_h, screen_steps = None, None  # nothing spent on a screen that has not run
    return price(trials, study_h=study_h, full_run_h=est.full_run_gpu_hours, study_steps=study_steps,
                 full_run_steps=est.full_run_steps, no_hours=_no_hours(study, est), unknown=unknown_why(study, est),
                 spent=spent, at_most=not spent and study.study.racing is not None, branching=branching,
                 screen_h=screen_h, screen_steps=screen_steps)


def screen_cost(study: "StudyConfig", est: TrialEstimate | None = None) -> tuple[tuple[float, float] | None, float | None]:
    """What the study's screen costs: (GPU-hours low/high, optimizer steps' worth); (None, None) without a screen.

    Once it ran (screen.json), its wall time x hardware.gpus. Before, at the study's own rates (estimate_trial):
    advise as a trial generating prompts x k x temperatures completions (training included: an upper bound, it
    trains nothing), and the probe as one trial of probe_steps steps per (G, batch) of the study's arms, start-up
    each. In steps (no GPU-hours here), advise's completions over a step's, plus the probe's steps."""
    screen = study.file.screen
    if screen is None:
        return None, None
    est = est or estimate_trial(study)
    per_step = study.space.shape.generated_per_step
    temps = study.temperatures()
    n_temps = len(screen.temperatures or (temps if isinstance(temps, list) else [study.fixed_temperature()]))
    sampled = screen.prompts * screen.k * n_temps
    searched = [float(t) for t in temps] if isinstance(temps, list) else None
    points = len({(a.num_generations, a.generation_batch_size)
                  for a, _ in ablation_arms(study.space, baseline_arm(study), searched)})
    steps = sampled / per_step + points * screen.probe_steps
    ran = load_screen(study.output_dir, Owner.of(study))
    if ran is not None:
        h = ran.seconds * int(study.hardware.gpus or 0) / 3600.0
        return ((h, h) if study.hardware.gpus else None), steps
    advise = _variant(study, completions=sampled).gpu_hours
    probe = _variant(study, max_steps=screen.probe_steps).gpu_hours
    if advise is None or probe is None:
        return None, steps
    return (advise[0] + points * probe[0], advise[1] + points * probe[1]), steps


def _variant(study: "StudyConfig", **budget: int) -> TrialEstimate:
    """estimate_trial of the study with another per-trial budget (`max_steps` or `completions`)."""
    update = {"max_steps": None, "completions": None, "tokens": None, "seconds": None, **budget}
    file = study.file.model_copy(update={"budget": study.budget.model_copy(update=update)})
    return estimate_trial(dataclasses.replace(study, file=file))


def _trial_steps(est: TrialEstimate) -> int | None:
    """One trial's optimizer steps (a branch's, from the branch step on); None for a budget of tokens or seconds."""
    if not (est.full_run_share and est.full_run_steps and est.completions):
        return None
    return round(est.full_run_share * est.full_run_steps)


def planned_counts(study: "StudyConfig") -> tuple[int, int]:
    """(trials, shared prefixes) the plan aims for: every arm x seed trial (a branch, when the study branches) and,
    when it branches, one prefix per seed. Prefix cells the plan may list are not counted as trials. BranchError
    when budget.branch_from cannot be placed."""
    step = branch_step(study)
    if study.study.n_trials or not study.is_planned:
        return resolved_trial_count(study), (len(set(study.study.seeds)) if step is not None else 0)
    arms = [c for c in study_plan(study) if c.role != PREFIX_ROLE]
    return len(arms), (len({c.seed for c in arms}) if step is not None else 0)


def prefix_estimate(study: "StudyConfig", step: int) -> TrialEstimate:
    """What one shared prefix costs: a trial of the baseline trained `step` optimizer steps (start-up included),
    at the same rates as the study's trials (estimate_trial on the study with that budget)."""
    return _variant(study, max_steps=step)


# the per-arm seed-to-seed sd of a reward in [0, 1] a race's mean cost is planned on: the committed 40-seed tables'
# mean (0.053-0.078 per task; benchmarks/worlds.py prints them); each paired difference has sqrt(2) of it
PLANNING_SD = 0.067


def race_share(study: "StudyConfig", sd: float | None = None) -> tuple[float, str] | None:
    """(the mean seeds an elimination race spends as a share of its planned maximum, what that assumes) for a study
    that races by elimination (stats/elimination.race_cost: Monte Carlo of the procedure on normal seeds, per-arm
    sd `sd`, default PLANNING_SD; the mean over the least-favourable configuration and tied arms, whichever is
    costlier: a budget planned on the mean holds on average, one on the median half the time). None for a study
    that does not race by elimination or has no min_effect. This is the part of the price that turns a race into
    expected seeds (the `stats` area's; the rest of this module is the study's)."""
    racing = study.study.racing
    me = study.study.min_effect
    if racing is None or racing.design != "elimination" or not me or me <= 0:
        return None
    cap = len(study.study.seeds)
    try:
        arms = len({c.arm.key for c in study_plan(study) if c.role != PREFIX_ROLE})
    except (StudyError, BranchError):  # a plan that cannot be built is priced (and refused) elsewhere
        return None
    if arms < 2 or cap < 1:
        return None
    n0 = max(racing.first_round_seeds, 3)
    sd = PLANNING_SD if sd is None else sd
    cost = race_cost(arms, float(me), sd * 2**0.5, float(racing.confidence), n0, cap)
    return (min(1.0, cost.planning / cap),
            f"{cost.planning:.1f} of {cap} seeds per arm at a per-arm sd of {sd:g}, the costlier of tied arms and "
            f"one ahead by min_effect")


def planned_price(study: "StudyConfig", est: TrialEstimate | None = None) -> Price:
    """What the study's plan costs as a multiple of the full run (a race: its planned maximum, and for an elimination
    race the mean it expects to spend, `race_share`); a branched study's shared prefixes counted once per seed."""
    price_ = _planned_price(study, est)
    share = race_share(study)
    return dataclasses.replace(price_, expected=share[0], expected_why=share[1]) if share else price_


def _planned_price(study: "StudyConfig", est: TrialEstimate | None = None) -> Price:
    est = est or estimate_trial(study)
    try:
        trials, prefixes = planned_counts(study)
        step = branch_step(study)
    except BranchError as e:
        return Price(resolved_trial_count(study), None, unknown=str(e), at_most=study.study.racing is not None)
    per_steps = _trial_steps(est)
    if step is None:
        steps = trials * per_steps if per_steps is not None else None
        return _price(study, est, trials, est.study_gpu_hours(trials), steps, spent=False)
    pre = prefix_estimate(study, step)
    hours = study_total(trials, est.gpu_hours, prefixes, pre.gpu_hours)
    steps = trials * per_steps + prefixes * step if per_steps is not None else None
    return _price(study, est, trials, hours, steps, spent=False, branching=Branching(step, prefixes, per_steps))


def spent_price(study: "StudyConfig", trials: Iterable["FrozenTrial"]) -> Price:
    """What the study's trials used, as a multiple of the full run (every attempt's wall time x hardware.gpus).

    A shared prefix's attempts are counted once, as what they held (not as a trial of the baseline arm)."""
    ran = list(trials)
    est = estimate_trial(study)
    gpus = int(study.hardware.gpus or 0)
    h = spent_seconds(ran) * gpus / 3600.0
    ended = [t for t in ran if t.datetime_complete is not None]
    prefixes = sum(1 for t in ended if role_of(t) == PREFIX_ROLE)
    done = len(ended) - prefixes
    try:
        step = branch_step(study)
    except BranchError:
        step = None
    per_steps = _trial_steps(est)
    # without GPU-hours: each ended attempt counted as one whole trial's (or prefix's) steps (an upper bound)
    steps = (done * per_steps + prefixes * (step or 0)) if per_steps is not None else None
    branching = Branching(step, prefixes, per_steps) if step is not None and prefixes else None
    return _price(study, est, done, (h, h) if gpus else None, steps, spent=True, branching=branching)


def price_line(study: "StudyConfig", est: TrialEstimate, planned: Price) -> str:
    """`run`'s first line: the plan's price (`est` and `planned`: the run plan's estimate and price), and the
    budget as a share of the run where one was written so.

    StudyError (before anything runs) when the budget is a share of a run nothing here prices: a share
    left as written would otherwise reach the runner, which cannot count GPU-hours against it."""
    budget = study.study.budget_gpu_hours
    if isinstance(budget, str):
        why = unknown_why(study, est) or _no_hours(study, est)
        raise StudyError([Problem(path="study.budget_gpu_hours", message=(
            f"{budget!r} is a share of the full run, whose GPU-hours are not known here ({why}); write the budget in "
            "GPU-hours instead"))])
    line = f"Price: {planned.words()}"
    if isinstance(budget, RunShare):
        line += f"; budget {budget.share:g}x your run = {float(budget):,.1f} GPU-h"
    return line + "."


def resolve_budget(study: "StudyConfig") -> None:
    """study.budget_gpu_hours written as a share ("0.5x") -> GPU-hours at the low end of the full run's estimate
    (a RunShare, a float that keeps the share). Left as written when nothing prices the full run."""
    share = parse_share(study.study.budget_gpu_hours)
    if share is None:
        return
    full = estimate_trial(study).full_run_gpu_hours
    if full is not None and full[0] > 0:
        study.study.budget_gpu_hours = RunShare(share, full[0])
