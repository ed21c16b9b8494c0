"""The Optuna sampler and pruner of a study, built in one place for `run` and the benchmark.

The defaults were chosen from benchmarks/search_efficiency.py (docs/benchmarks.md, "Search efficiency");
what `auto` resolves to is the config's (config/study.py `resolve_sampler`).
Pruners count steps in generated completions (search/fidelity.py).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from grpo_ablate.study.search.fidelity import quantum
from grpo_ablate.core.vocab import PLANNED_SAMPLERS

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import StudyConfig

__all__ = ["build_sampler", "build_pruner", "study_sampler", "study_pruner", "tpe_startup_trials"]


def tpe_startup_trials(n_trials: int | None) -> int:
    """Random trials before TPE models: a quarter of the budget, 3 to 10."""
    return min(10, max(3, (n_trials or 20) // 4))


def build_sampler(kind: str, seed: int | None, *, n_trials: int | None = None, n_objectives: int = 1
                  ) -> "optuna.samplers.BaseSampler":
    import optuna  # lazy: Optuna only while a study runs; every command imports study/

    if kind == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if kind == "random" or kind in PLANNED_SAMPLERS:  # planned studies only pop queued trials
        return optuna.samplers.RandomSampler(seed=seed)

    n_startup = tpe_startup_trials(n_trials)
    joint = n_objectives == 1
    with warnings.catch_warnings():  # `multivariate` and `group` are experimental in Optuna 5.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # group=True: the conditional batch params (one name per G) are modelled with G, not independently
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup, multivariate=joint, group=joint)


def build_pruner(kind: str, budget: int | None, quantum: int) -> "optuna.pruners.BasePruner":
    """`budget` and `quantum` in completions (one trial's total, and the spacing of checkpoints)."""
    import optuna  # lazy: Optuna only while a study runs; every command imports study/

    if kind == "median":
        warmup = quantum * max(1, round((budget or quantum * 10) / quantum / 5))  # a fifth of the trial
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=warmup)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=quantum * 2, max_resource=budget or "auto")
    return optuna.pruners.NopPruner()


def study_sampler(study: "StudyConfig") -> "optuna.samplers.BaseSampler":
    """The study's sampler, from its file (the kind `auto` resolved to, its seed, n_trials, objectives)."""
    return build_sampler(study.sampler_kind, study.study.sampler_seed, n_trials=study.study.n_trials,
                         n_objectives=len(study.directions))


def study_pruner(study: "StudyConfig", budget: int | None) -> "optuna.pruners.BasePruner":
    """The study's pruner; its steps are generated completions (fidelity.py), `budget` one trial's
    (plan/cells.py's completions_per_trial)."""
    largest = max((p.generation_batch_size for p in study.space.feasible), default=1)
    return build_pruner(study.study.pruner, budget, quantum(largest, budget))
