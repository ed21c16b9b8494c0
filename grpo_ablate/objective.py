"""The glue between an Optuna trial and a trial process: the only module that knows both.

    trial params  <- suggest_params(trial, study)       (feasible pairs only)
    trial process <- build_spec(study, params, ...)      (a plain run of the trainer core)
    Optuna record <- record_result(trial, result, ...)  (values, constraint, user attrs)

Outcomes map to Optuna states so samplers learn the right thing:
- completed -> COMPLETE with the objective values and constraint `oom` = -1 (feasible);
- oom       -> COMPLETE with constraint `oom` = +1 (violated): the sampler learns where memory
               ends instead of retrying it (a FAIL teaches TPE nothing). Its values are the
               partial metrics when there are any, else 0;
- pruned    -> PRUNED (the last reported value stays);
- failed    -> FAIL with the reason;
- interrupted -> FAIL, and the same params are queued again so the next `run` redoes it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.config import FloatRange
from grpo_ablate.plan import batch_is_searched
from grpo_ablate.vocab import HEADLINE_METRICS, Arm, Cell

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study
    from grpo_ablate.trainer.launch import TrialResult
    from grpo_ablate.trainer.spec import TrialSpec

__all__ = ["suggest_params", "build_spec", "record_result"]




def suggest_params(trial: "optuna.Trial", study: "Study") -> Cell:
    """Draw a trial's settings from the feasible space only: TRL never sees a pair it rejects."""
    space = study.space
    if batch_is_searched(study):
        label = trial.suggest_categorical("generation", [p.label for p in space.feasible])
        pair = space.by_label(str(label))
    else:
        g = trial.suggest_categorical("num_generations", list(space.generations))
        found = space.pair(int(g))  # type: ignore[arg-type]
        assert found is not None
        pair = found
    t = study.temperatures()
    if isinstance(t, FloatRange):
        temperature = trial.suggest_float("temperature", t.low, t.high, log=t.log)
    elif isinstance(t, list):
        temperature = float(trial.suggest_categorical("temperature", [float(x) for x in t]))  # type: ignore[arg-type]
    else:
        temperature = study.fixed_temperature()
    seeds = list(study.study.seeds)
    planned = study.study.sampler in ("grid", "ablation")
    if planned:
        seed = int(trial.suggest_categorical("seed", seeds))  # type: ignore[arg-type]
    else:
        seed = seeds[trial.number % len(seeds)]
    role = str(trial.user_attrs.get("role") or study.study.sampler)
    return Cell(Arm(pair.num_generations, pair.generation_batch_size, float(temperature)), seed, role)


def build_spec(study: "Study", cell: Cell, trial_dir: Path, env: dict[str, str] | None = None) -> "TrialSpec":
    """A trial process's whole input: the study's sections with this trial's settings merged in."""
    from grpo_ablate.trainer.spec import TrialSpec

    trainer = dict(study.trainer)
    trainer["num_generations"] = cell.arm.num_generations
    trainer["temperature"] = cell.arm.temperature
    trainer["seed"] = cell.seed
    if study.space.batch_searched:
        trainer["generation_batch_size"] = cell.arm.generation_batch_size
        trainer.pop("steps_per_generation", None)
    trainer.pop("max_steps", None)  # the budget owns it
    hardware = study.hardware.model_dump()
    hardware["num_processes"] = study.world_size
    budget = study.budget.model_dump()
    if budget.get("max_steps") is None and isinstance(study.trainer.get("max_steps"), int):
        budget["max_steps"] = study.trainer["max_steps"]
    return TrialSpec(
        trial_dir=str(trial_dir),
        model=study.model.model_dump(),
        data=study.data.model_dump(),
        rewards=[r.model_dump() for r in study.rewards],
        trainer=trainer,
        budget=budget,
        hardware=hardware,
        params=cell.as_attrs(),
        timeout_s=study.study.trial_timeout,
        env=dict(env or {}),
    )


def objective_values(study: "Study", metrics: dict[str, Any]) -> list[float] | None:
    vals = []
    for m in study.metric_names:
        v = metrics.get(m)
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return None
        vals.append(float(v))
    return vals


def record_result(optuna_study: "optuna.Study", trial: "optuna.Trial", study: "Study", result: "TrialResult") -> str:
    """Store a finished trial process in the study; returns the outcome's name."""
    from optuna.trial import TrialState

    outcome = result.outcome.value
    metrics = result.metrics or {}
    for key in HEADLINE_METRICS:
        if key in metrics:
            trial.set_user_attr(key, _json_safe(metrics[key]))
    trial.set_user_attr("outcome", outcome)
    if result.reason:
        trial.set_user_attr("reason", str(result.reason)[:2000])
    values = objective_values(study, metrics)

    if outcome == "completed":
        if values is None:
            missing = [m for m in study.metric_names if metrics.get(m) is None]
            trial.set_user_attr("outcome", "failed")
            trial.set_user_attr("reason", f"the trial finished but {missing} could not be computed (too few logged steps?)")
            optuna_study.tell(trial, state=TrialState.FAIL)
            return "failed"
        trial.set_constraint("oom", -1.0)
        optuna_study.tell(trial, values)
    elif outcome == "oom":
        trial.set_constraint("oom", 1.0)
        optuna_study.tell(trial, values or [0.0] * len(study.metric_names))
    elif outcome == "pruned":
        optuna_study.tell(trial, state=TrialState.PRUNED)
    elif outcome == "interrupted":
        optuna_study.tell(trial, state=TrialState.FAIL)
        frozen = optuna_study._storage.get_trial(trial._trial_id)  # the params as stored
        optuna_study.enqueue_trial(frozen.params, user_attrs={"role": frozen.user_attrs.get("role", ""), "retry_of": trial.number})
    else:
        optuna_study.tell(trial, state=TrialState.FAIL)
    return outcome


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
