"""One run's plan: the study file resolved once, and handed to every part of the run.

    grpo-ablate run studies/tiny-cpu.yaml     # commands/run.py: resolve_plan(study), then run_study(study, plan)

The commands that run a study (`run`, `smoke`) call `resolve_plan` once and pass the frozen `StudyPlan`
down; every file it needs (advise.json, screen.json, probe.json, the dataset's rows, the storage's
measured pace) is read here. A part of the run that re-derived the plan could read another version of one
of those files than the rest of the run did, and disagree with it about the cells, the baseline or the
estimate; so nothing in the run calls the functions below again (tests/test_run_plan.py counts them).
Pure, like the rest of plan/: no Optuna.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.plan.estimate import estimate_trial, trial_time
from grpo_ablate.files.advise_file import fitted_prior, load_advice
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import Probe, load_probe
from grpo_ablate.plan.branching import branch_step
from grpo_ablate.plan.cells import baseline_arm, cells_of, completions_per_trial, round_cells, trial_count
from grpo_ablate.plan.price import planned_price
from grpo_ablate.core.vocab import Arm, Cell

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig
    from grpo_ablate.core.cost import Price, TrialEstimate
    from grpo_ablate.records.gpu_hours import TrialTime

__all__ = ["StudyPlan", "resolve_plan"]


@dataclass(frozen=True)
class StudyPlan:
    """The study file resolved once for a run (resolve_plan).

    `cells`: plan.cells.study_plan's (empty for adaptive samplers); `first`: those the study's creator queues
    (a racing study's first round, else every cell); `baseline`: baseline_arm's; `branch_step`: the step a
    seed's arms branch at (None: from step 0); `completions`: completions_per_trial's (the pruner's
    checkpoints); `trial_count`: the finished trials the study aims for (resolved_trial_count's);
    `estimate`: estimate.estimate_trial's (the GPU-hour budget and an `auto` trial timeout start from it
    until the study's own trials are measured); `price`: plan/price.py planned_price's on that estimate;
    `advice`: advise.json as read for a per-prompt G arm's prior (None when the space has no such arm, or
    there is no advice); `probe`: probe.json as read (None without one), whose host-memory peaks the trial specs
    carry for launchers that reserve memory (SLURM's --mem).
    """

    cells: tuple[Cell, ...]
    first: tuple[Cell, ...]
    baseline: Arm
    branch_step: int | None
    completions: int | None
    trial_count: int
    estimate: "TrialEstimate"
    price: "Price"
    advice: Mapping[str, Any] | None
    probe: Probe | None = None

    @property
    def planned(self) -> "TrialTime | None":
        """One trial's seconds before the study's own trials are measured (None: nothing estimates one)."""
        return trial_time(self.estimate)

    def prior(self, arm: Arm) -> tuple[float, float] | None:
        """A per-prompt G arm's prior from the advice (files/advise_file.py fitted_prior); None for any other
        arm, or without a fit."""
        if getattr(arm.num_generations, "kind", None) != "adaptive":
            return None
        return fitted_prior(self.advice, float(arm.temperature))

    def round(self, seeds: Sequence[int], first: int, round_no: int, live: set[str] | None = None) -> list[Cell]:
        """plan.cells.racing_round on this plan: `seeds` the study's, `first` racing.first_round_seeds."""
        return round_cells(self.cells, seeds, first, round_no, live)


def _adaptive(study: "StudyConfig") -> bool:
    """Whether the space holds a per-prompt G (a schedule of kind adaptive), whose trials start from advice."""
    return any(getattr(g, "kind", None) == "adaptive" for g in study.space.generations)


def resolve_plan(study: "StudyConfig") -> StudyPlan:
    """The run's StudyPlan. Raises BranchError (a StudyError) when budget.branch_from cannot be placed, and a
    StudyError when a file of the study's folder (advise.json, screen.json, probe.json) is not its own."""
    step = branch_step(study)
    base = baseline_arm(study)
    cells = cells_of(study, base, step)
    advice = load_advice(study.output_dir, Owner.of(study)) if _adaptive(study) else None
    racing = study.study.racing
    first = cells if racing is None else round_cells(cells, list(study.study.seeds), racing.first_round_seeds, 1)
    est = estimate_trial(study)
    return StudyPlan(tuple(cells), tuple(first), base, step, completions=completions_per_trial(study),
                     trial_count=trial_count(study, cells), estimate=est, price=planned_price(study, est),
                     advice=advice, probe=load_probe(study.output_dir, Owner.of(study)))
