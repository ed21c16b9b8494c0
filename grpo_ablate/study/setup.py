"""Open or create the Optuna study: sampler, pruner, the attributes that describe it, the plan."""

from __future__ import annotations

import importlib.metadata
import platform
import time
from typing import TYPE_CHECKING, Any

from grpo_ablate.plan import baseline_arm, cell_params
from grpo_ablate.storage import mask_url, open_storage
from grpo_ablate.vocab import PROBE_ROLE, Cell

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["open_study", "describe_study", "queue_plan", "wait_for_plan", "library_versions", "name_objectives",
           "PLAN_READY_ATTR", "record_probe_ooms", "enqueue_shortlist", "PROBE_PARAM"]

PLAN_READY_ATTR = "plan_ready"
PLAN_WAIT_S = 120.0


def library_versions() -> dict[str, str]:
    """Versions of what trains, read from package metadata (nothing heavy is imported)."""
    out = {"python": platform.python_version()}
    for name in ("grpo-ablate", "torch", "trl", "transformers", "accelerate", "datasets", "optuna", "vllm", "deepspeed"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def make_sampler(study: "Study") -> "optuna.samplers.BaseSampler":
    """The study's sampler (search/samplers.py holds the settings the benchmark chose)."""
    from grpo_ablate.search.samplers import build_sampler

    return build_sampler(study.sampler_kind, study.study.sampler_seed, n_trials=study.study.n_trials,
                         n_objectives=len(study.directions))


def make_pruner(study: "Study") -> "optuna.pruners.BasePruner":
    """The study's pruner; its steps are generated completions (search/fidelity.py)."""
    from grpo_ablate.search.fidelity import budget_completions, quantum
    from grpo_ablate.search.samplers import build_pruner

    budget = budget_completions(study)
    largest = max((p.generation_batch_size for p in study.space.feasible), default=1)
    return build_pruner(study.study.pruner, budget, quantum(largest, budget))


def open_study(
    study: "Study", *, for_run: bool = False, storage: "optuna.storages.BaseStorage | None" = None
) -> tuple["optuna.Study", bool]:
    """Create the Optuna study or load it; returns (study, created_here).

    `storage` is the one `run` opened itself (it keeps the handle for heartbeats); otherwise
    the study's URL is opened here, with heartbeats when `for_run`.
    """
    import optuna

    if storage is None:
        kwargs: dict[str, Any] = {}
        if for_run:
            kwargs = {"heartbeat_interval": study.study.heartbeat_interval, "grace_period": study.study.grace_period,
                      "max_retry": study.study.max_retry}
        storage = open_storage(study.storage_url, **kwargs)
    try:
        ostudy = optuna.create_study(study_name=study.study.name, storage=storage, directions=study.directions,
                                     sampler=make_sampler(study), pruner=make_pruner(study), load_if_exists=False)
        return ostudy, True
    except optuna.exceptions.DuplicatedStudyError:
        ostudy = optuna.load_study(study_name=study.study.name, storage=storage, sampler=make_sampler(study),
                                   pruner=make_pruner(study))
        stored = [d.name.lower() for d in ostudy.directions]
        if stored != study.directions:
            from grpo_ablate.config import Problem, StudyError

            raise StudyError([Problem(path="study.objectives", message=(
                f"the stored study {study.study.name!r} has directions {stored}, the file asks for {study.directions}; "
                "use another study.name to start a new study"))]) from None
        return ostudy, False


def masked_config(study: "Study") -> dict[str, Any]:
    """The resolved study as stored in the study (the dashboard shows it): no password in it."""
    config = study.to_dict()
    section = config.get("study")
    if isinstance(section, dict) and isinstance(section.get("storage"), str):
        section["storage"] = mask_url(section["storage"])
    return config


def describe_study(ostudy: "optuna.Study", study: "Study") -> None:
    name_objectives(ostudy, study)
    ostudy.set_user_attr("config", masked_config(study))
    ostudy.set_user_attr("versions", library_versions())
    ostudy.set_user_attr("objectives", [{"metric": m, "direction": d} for m, d in zip(study.metric_names, study.directions)])
    ostudy.set_user_attr("baseline", baseline_arm(study).as_dict())
    ostudy.set_user_attr("hardware", study.space.shape.describe())
    if study.file.evaluation is not None:  # the resolved section: fixed decoding, target and target_fraction
        evaluation = study.file.evaluation.model_dump()
        if evaluation["max_completion_length"] is None:
            evaluation["max_completion_length"] = study.trainer.get("max_completion_length")
        ostudy.set_user_attr("evaluation", evaluation)


def name_objectives(ostudy: "optuna.Study", study: "Study") -> None:
    """The dashboard's objective names: the study's metric names, not "Objective 0"."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # set_metric_names is marked experimental
        ostudy.set_metric_names(list(study.metric_names))


def queue_plan(ostudy: "optuna.Study", study: "Study", cells: list[Cell]) -> int:
    """Queue every planned cell not already in the study (finished, running or queued)."""
    before = len(ostudy.get_trials(deepcopy=False))
    for c in cells:
        ostudy.enqueue_trial(cell_params(study, c), user_attrs={"role": c.role, "cell": c.key}, skip_if_exists=True)
    return len(ostudy.get_trials(deepcopy=False)) - before


def wait_for_plan(ostudy: "optuna.Study") -> bool:
    """Another host created the study: wait until it has queued the plan."""
    deadline = time.monotonic() + PLAN_WAIT_S
    while time.monotonic() < deadline:
        if ostudy.user_attrs.get(PLAN_READY_ATTR):
            return True
        time.sleep(1.0)
    return False


# ------------------------------------------------------------------ pre-flight: probe and advise

PROBE_PARAM = "probe_pair"  # the OOM pairs' param: the study's own pair param cannot hold a pair it never proposes


def record_probe_ooms(ostudy: "optuna.Study", study: "Study") -> int:
    """Record each pair the probe saw run out of memory as a COMPLETE trial with `oom` violated.

    Samplers learn only from COMPLETE (and PRUNED) trials, so the boundary is told as a
    constraint, as a trial's own OOM is (study/lifecycle.py). Already recorded pairs are skipped.
    """
    import optuna
    from optuna.distributions import CategoricalDistribution

    from grpo_ablate.preflight.probe_file import load_probe

    probe = load_probe(study.output_dir)
    if probe is None or not probe.ooms():
        return 0
    seen = {t.user_attrs.get("probe_label") for t in ostudy.get_trials(deepcopy=False)}
    labels = [p.label for p in probe.points]
    added = 0
    for point in probe.ooms():
        if point.label in seen:
            continue
        ostudy.add_trial(optuna.trial.create_trial(
            params={PROBE_PARAM: point.label}, distributions={PROBE_PARAM: CategoricalDistribution(labels)},
            values=[0.0] * len(study.directions), constraints={"oom": 1.0},
            user_attrs={"role": PROBE_ROLE, "outcome": "oom", "probe_label": point.label, "reason": point.reason or "oom",
                        "num_generations": point.num_generations, "generation_batch_size": point.generation_batch_size},
        ))
        added += 1
    return added


def enqueue_shortlist(ostudy: "optuna.Study", study: "Study", shortlist: list[Any]) -> int:
    """Queue advise's shortlist, best first: TPE starts from it; an ablation gains the top arm if missing."""
    from grpo_ablate.plan import study_plan
    from grpo_ablate.vocab import Arm

    if not shortlist:
        return 0
    arms = [Arm(p.num_generations, p.generation_batch_size, float(p.temperature)) for p in shortlist]
    if study.study.sampler in ("grid", "ablation"):
        planned = {c.arm.key for c in study_plan(study)}
        arms = [a for a in arms[:1] if a.key not in planned]
        cells = [Cell(a, s, "advise") for a in arms for s in study.study.seeds]
    else:
        seeds = list(study.study.seeds)
        cells = [Cell(a, seeds[i % len(seeds)], "advise") for i, a in enumerate(arms)]
    return queue_plan(ostudy, study, cells)
