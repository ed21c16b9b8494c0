"""Open or create the Optuna study: sampler, pruner, the attributes that describe it, the plan.

The plan's cells, advise's shortlist and a warm start's arms are queued through study/ledger.py.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from grpo_ablate.storage.store import locate, mask_url, open_storage
from grpo_ablate.study import ledger
from grpo_ablate.records.trial_record import StudyAttrs, cell_key, study_attrs
from grpo_ablate.core.vocab import Arm, Cell
from grpo_ablate.config import Problem, StudyError
from grpo_ablate.files.advise_file import add_advised_arm
from grpo_ablate.files.owned import Owner
from grpo_ablate.study.prefixes import Prefixes
from grpo_ablate.plan.cells import ADVISE_ROLE, is_plannable, study_plan
from grpo_ablate.plan.run_plan import StudyPlan, resolve_plan
from grpo_ablate.study.search.samplers import study_pruner, study_sampler
from grpo_ablate.study.warm import load_source

if TYPE_CHECKING:
    import optuna  # lazy: optuna loads on a study's first use, not with every command that imports this module

    from grpo_ablate.config import StudyConfig

__all__ = ["open_study", "describe_study", "space_changed", "race_rule_changed", "queue_plan", "queue_first_plan", "wait_for_plan",
           "queue_ready_branches",
           "library_versions", "name_objectives", "enqueue_shortlist", "check_warm_source", "discard_new_study",
           "started_study"]

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


def open_study(
    study: "StudyConfig", completions: int | None, *, for_run: bool = False,
    storage: "optuna.storages.BaseStorage | None" = None) -> tuple["optuna.Study", bool]:
    """Create the Optuna study or load it; returns (study, created_here).

    `completions`: each trial's (the plan's, plan.completions_per_trial), which the pruner divides into
    checkpoints. `storage` is the one `run` opened itself (it keeps the handle for heartbeats); otherwise
    the study's URL is opened here, with heartbeats when `for_run`.
    """
    import optuna  # lazy: optuna loads on a study's first use, not with every command that imports this module

    if storage is None:
        kwargs: dict[str, Any] = {}
        if for_run:
            kwargs = {"heartbeat_interval": study.study.heartbeat_interval, "grace_period": study.study.grace_period,
                      "stale_trial_callback": ledger.StaleTrialRequeue(study.study.max_retry)}
        storage = open_storage(study.storage_url, **kwargs)
    sampler, pruner = study_sampler(study), study_pruner(study, completions)  # a duplicate name raises before either is used
    try:
        ostudy = optuna.create_study(study_name=study.study.name, storage=storage, directions=[optuna.study.StudyDirection[d.upper()] for d in study.directions],
                                     sampler=sampler, pruner=pruner, load_if_exists=False)
        return ostudy, True
    except optuna.exceptions.DuplicatedStudyError:
        ostudy = optuna.load_study(study_name=study.study.name, storage=storage, sampler=sampler, pruner=pruner)
        stored = [d.name.lower() for d in ostudy.directions]
        if stored != study.directions:

            raise StudyError([Problem(path="study.objectives", message=(
                f"the stored study {study.study.name!r} has directions {stored}, the file asks for {study.directions}; "
                "use another study.name to start a new study"))]) from None
        return ostudy, False


# ------------------------------------------------------------------ check first, create last


def check_warm_source(study: "StudyConfig", source: str, storage_url: str | None) -> None:
    """StudyError (exit 2) when `--warm-start` names a study that cannot be read, before anything is created.

    Otherwise the new study would be created first and its plan never queued: the corrected
    rerun would find a study that exists, wait for a plan that never comes, and stop.
    """


    where = locate(storage_url or study.storage_url)
    named = not (Path(source).suffix in (".yaml", ".yml") and Path(source).exists())
    if named and not where.database and not (where.file is not None and where.file.is_file()):
        raise StudyError([Problem(path="--warm-start", message=(
            f"cannot warm-start from {source}: it is not a study file, and there is no journal {where.masked} to find "
            "a study of that name in; give a finished study's file, or its name with --warm-start-storage"))])
    try:
        load_source(source, storage_url, study.storage_url)
    except StudyError as e:
        raise StudyError([Problem(path="--warm-start", message=f"cannot warm-start from {source}: {e}")]) from None
    except (ValueError, KeyError, OSError) as e:
        raise StudyError([Problem(path="--warm-start", message=(
            f"cannot warm-start from {source}: {e}; give a finished study's file, or its name with "
            "--warm-start-storage"))]) from None


def discard_new_study(ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage") -> None:
    """Delete a study this command created moments ago and could not finish setting up.

    A half-made study (created, plan never queued) blocks every later `run` of the same name.
    """
    import optuna  # lazy: optuna loads on a study's first use, not with every command that imports this module

    try:
        optuna.delete_study(study_name=ostudy.study_name, storage=storage)
    except Exception as e:  # noqa: BLE001 - the caller's error is the one to report; say this one too
        print(f"grpo-ablate: could not remove the half-made study {ostudy.study_name!r} ({type(e).__name__}: {e}); "
              "remove it or use a new study.name", file=sys.stderr)


def started_study(study: "StudyConfig") -> str | None:
    """Why the study has already begun in its storage (it exists there); None when it has not.

    Opens no storage that does not exist yet (a journal file that is not there), so asking
    creates nothing.
    """
    import optuna  # lazy: optuna loads on a study's first use, not with every command that imports this module


    where = locate(study.storage_url)
    if not where.database and (where.file is None or not where.file.is_file() or where.file.stat().st_size == 0):
        return None
    storage = open_storage(study.storage_url)
    if study.study.name not in optuna.study.get_all_study_names(storage):
        return None
    trials = optuna.load_study(study_name=study.study.name, storage=storage).get_trials(deepcopy=False)
    return f"the study {study.study.name!r} already exists in {where.masked} ({len(trials)} trial(s))"


def masked_config(study: "StudyConfig") -> dict[str, Any]:
    """The resolved study as stored in the study (the dashboard shows it): no password in it."""
    config = study.to_dict()
    section = config.get("study")
    if isinstance(section, dict) and isinstance(section.get("storage"), str):
        section["storage"] = mask_url(section["storage"])
    return config


def describe_study(ostudy: "optuna.Study", study: "StudyConfig", baseline: Arm) -> None:
    """Record what the study is (its masked file, versions, objectives, baseline, shape, space) on the
    Optuna study; `baseline`: the run plan's (plan/run_plan.py)."""
    name_objectives(ostudy, study)
    evaluation: dict[str, Any] | None = None
    if study.file.evaluation is not None:  # the resolved section: fixed decoding, target and target_fraction
        evaluation = study.file.evaluation.model_dump()
        if evaluation["max_completion_length"] is None:
            evaluation["max_completion_length"] = study.trainer.get("max_completion_length")
    attrs = StudyAttrs(
        config=masked_config(study),
        versions=library_versions(),
        objectives=tuple(zip(study.metric_names, study.directions)),
        baseline=baseline.as_dict(),
        hardware=study.space.shape.describe(),
        space=tuple(sorted(p.label for p in study.space.feasible)),
        evaluation=evaluation,
    )
    ledger.describe(ostudy, attrs.as_attrs())


def space_changed(stored: StudyAttrs, study: "StudyConfig") -> str | None:
    """Why this study file's feasible space is not the one the stored study was created with; None if it is.

    The stored trials' params mean configurations of that space (G is a rank over its Gs, each
    G's batch a choice among its batches; a plan's cells were drawn from it). A probe.json
    written since, or an edited search section, would make them mean others, or run a pair
    the probe saw run out of memory. Studies from before the attribute existed are not checked.
    `stored`: the study's attributes as trial_record.study_attrs reads them.
    """
    if stored.space is None:
        return None
    now = sorted(p.label for p in study.space.feasible)
    if sorted(stored.space) == now:
        return None
    gone, new = sorted(set(stored.space) - set(now)), sorted(set(now) - set(stored.space))
    parts = ([f"without {', '.join(gone)}"] if gone else []) + ([f"with {', '.join(new)}"] if new else [])
    return (f"the study {study.study.name!r} was created with another feasible (G x batch) space; this file's is "
            f"{' and '.join(parts)} (a probe.json written since the study began or missing on this host, or an edited "
            "search section). Its "
            "trials' params would mean other configurations: run the probe before the study's first command, or "
            "start a new study.name")


def race_rule_changed(stored: StudyAttrs, study: "StudyConfig") -> str | None:
    """Why a raced study's decision rule (study.min_effect, the racing section) is not the one it
    began with; None when it is, or when the study is not raced.

    A race drops and settles arms by that rule at every round; changed half-way, earlier rounds
    were decided by one rule and later ones by another, and the report would state one of them.
    `stored`: the study's attributes as trial_record.study_attrs reads them.
    """
    section = stored.config.get("study") if stored.config is not None else None
    if not isinstance(section, dict) or (section.get("racing") is None and study.study.racing is None):
        return None
    now = study.to_dict()["study"]
    changed = [f"{k} {section.get(k)!r} -> {now.get(k)!r}" for k in ("min_effect", "racing")
               if section.get(k) != now.get(k)]
    if not changed:
        return None
    return (f"the raced study {study.study.name!r} began with another decision rule ({'; '.join(changed)}); its "
            "rounds so far were decided by the first one. Keep study.min_effect and study.racing as they were, "
            "or start a new study.name")


def name_objectives(ostudy: "optuna.Study", study: "StudyConfig") -> None:
    """The dashboard's objective names: the study's metric names, not "Objective 0"."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # set_metric_names is marked experimental
        ostudy.set_metric_names(list(study.metric_names))


def queue_plan(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan, cells: Sequence[Cell]) -> int:
    """Queue each of `cells` (the plan's, or some of them) not already in the study (finished, running or queued);
    how many were queued. A branching study's branches wait for a prefix of today's study file (study/prefixes.py)."""
    prefixes = Prefixes(study, plan, cells)
    return ledger.queue(ostudy, study, cells, prefixes.fingerprints() if prefixes.cells else None)


def queue_ready_branches(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan) -> int:
    """A branching study: queue the branches of every seed whose prefix has completed; how many were queued.

    The lifecycle calls it when a prefix completes, a resumed run once at its start (a crash
    between a prefix's end and its branches' queueing loses none). A racing study queues the
    branches of the arms still live (the race's state; every arm before its first decision),
    and only for seeds a round queued a prefix for."""
    cells_now = plan.cells
    fingerprints = Prefixes(study, plan, cells_now).fingerprints()  # a prefix of an earlier study file starts no branch
    ready = ledger.completed_prefixes(ostudy.get_trials(deepcopy=False), fingerprints)
    if not ready:
        return 0
    live = None
    if study.study.racing is not None:
        race = study_attrs(ostudy).racing
        if race and race.get("decided"):
            return 0
        stored = race.get("live") if race else None
        live = set(stored) if isinstance(stored, list) else None
    cells = [c for c in cells_now if c.seed in ready and (live is None or c.arm.key in live)]
    return ledger.queue(ostudy, study, cells, fingerprints)


def wait_for_plan(ostudy: "optuna.Study") -> bool:
    """Another host created the study: wait until it has queued the plan."""
    deadline = time.monotonic() + PLAN_WAIT_S
    while time.monotonic() < deadline:
        if ledger.plan_ready(ostudy):
            return True
        time.sleep(1.0)
    return False


# ------------------------------------------------------------------ pre-flight: probe and advise


def queue_first_plan(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan) -> None:
    """Queue a planned study's first cells (a racing study's first round) and mark the plan ready.

    Whoever creates the study calls it (`run`, `advise --enqueue`), so a later `run`
    on any host finds the plan queued rather than waiting for one (wait_for_plan).
    """
    if plan.first:  # a race queues each later round once the queue runs dry
        queue_plan(ostudy, study, plan, plan.first)
    ledger.mark_plan_ready(ostudy)


def enqueue_shortlist(ostudy: "optuna.Study", study: "StudyConfig", shortlist: list[Any]) -> int:
    """Queue advise's shortlist, best first; the number of trials queued.

    Adaptive samplers: each arm once (seeds round robin), in the params `ledger.suggest_cell` draws,
    so the sampler starts from them. An ablation: the top arm becomes one more planned arm over
    every seed when the ablation lacks it (plan.advised_arms), so `plan` and `run` count it;
    a grid already holds every arm it can run.
    """

    if not shortlist:
        return 0
    arms = [Arm(p.num_generations, p.generation_batch_size, float(p.temperature)) for p in shortlist]
    if study.is_planned:
        top, new = arms[0], []
        added = (study.study.sampler == "ablation" and is_plannable(study, top)
                 and top.key not in {c.arm.key for c in study_plan(study)})
        if added:
            add_advised_arm(study.output_dir, top, Owner.of(study))
        plan = resolve_plan(study)  # advise's own plan, with the arm it just saved (a later `run` resolves its own)
        if added:
            have = {cell_key(t) for t in ostudy.get_trials(deepcopy=False)}
            new = [c for c in plan.cells if c.arm.key == top.key and c.key not in have]
        if not ledger.plan_ready(ostudy):  # advise opened the study first: `run` finds the plan queued
            queue_first_plan(ostudy, study, plan)  # the new arm in its seed-major place
        elif new and study.study.racing is None:
            queue_plan(ostudy, study, plan, new)  # after the cells already queued
        elif new:
            return 0  # a racing study past its first round: later rounds take the arm while it is live
        return len(new)
    seeds = list(study.study.seeds)
    # an arm the study cannot encode (e.g. a --temperature it does not search) is left out by the ledger
    return ledger.queue(ostudy, study, [Cell(arm, seeds[i % len(seeds)], ADVISE_ROLE) for i, arm in enumerate(arms)])
