"""What one trial generates (an upper bound) and what it costs, for the study and per trial, as `plan` shows it
(`plan --json`'s "trial_cost"): completions and tokens from the plan, wall time and GPU-hours from
estimate.estimate_trial (measured, else a range from stated assumptions), a branched study's shared prefixes
counted once each.

    grpo-ablate plan studies/tiny-cpu.yaml --json | python -c "import json,sys; print(json.load(sys.stdin)['trial_cost'])"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_ablate.core.cost import study_total
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.plan.branching import BranchError, branch_step
from grpo_ablate.plan.cells import completions_per_trial, resolved_trial_count
from grpo_ablate.plan.price import planned_counts, prefix_estimate
from grpo_ablate.trl_facts.fields import trl_default

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["TrialCost", "trial_cost"]


class TrialCost(dict[str, Any]):
    """What one trial generates (an upper bound) and what it costs (estimate.estimate_trial), as plan prints it."""


def trial_cost(study: "StudyConfig") -> TrialCost:
    """Generated completions and tokens per trial (upper bound), the measured wall time with its source,
    and GPU-hours per trial and for the study (measured, else a range from stated assumptions)."""
    n = completions_per_trial(study)
    length = study.trainer.get("max_completion_length")
    length = length if isinstance(length, int) and not isinstance(length, bool) else int(trl_default("max_completion_length"))
    est = estimate_trial(study)
    cost = TrialCost(completions=n, max_completion_length=length, max_tokens=n * length if n else None,
                     seconds=est.seconds[1] if est.measured and est.seconds else None,
                     seconds_source=est.source if est.measured else None, estimate=est.as_dict())
    if est.pace:
        cost["seconds_per_completion"], cost["overhead_seconds"] = est.pace
    try:  # a branched study: its trials (the arms' branches) and one shared prefix per seed, each counted once
        trials, prefixes = planned_counts(study)
        step = branch_step(study)
    except BranchError:  # plan's Price line says why the branch point cannot be placed
        trials, prefixes, step = resolved_trial_count(study), 0, None
    pre = prefix_estimate(study, step) if step is not None and prefixes else None
    cost["prefixes"] = {"count": prefixes, "branch_step": step,
                        "gpu_hours_each": list(pre.gpu_hours) if pre and pre.gpu_hours else None} if pre else None
    gpu = est.gpu_hours
    cost["gpu_time"] = None
    if gpu is not None:
        study_h = study_total(trials, gpu, prefixes, pre.gpu_hours if pre else None)
        source = (f"{est.gpus} GPU(s) x the wall time above ({est.source})" if est.measured else est.source)
        cost["gpu_time"] = {"gpus_per_trial": est.gpus, "trials": trials, "gpu_hours_per_trial": list(gpu),
                            "gpu_hours_study": list(study_h) if study_h else None, "source": source}
    cost["gpu_time_note"] = None if gpu is not None else (
        "no GPU-hours: the study runs on CPU (hardware.gpus unset)" if not est.gpus else f"no GPU-hours yet: {est.source}")
    return cost
