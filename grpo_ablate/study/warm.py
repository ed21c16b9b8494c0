"""Warm starts: seed a new study from a finished one.

    grpo-ablate run studies/new.yaml --warm-start studies/old.yaml
    grpo-ablate run studies/new.yaml --warm-start old-study-name --warm-start-storage sqlite:///old.db

The finished study's best arms (mean of the first objective over their seeds) are queued first,
best first. Its results are the ledger's (study/ledger.py): completed trials with values; an
out-of-memory trial's placeholder zeros are never a result, so they are neither ranked nor copied.

- Adaptive samplers: when model, task, rewards, objectives and hardware match, the results are
  also given to the sampler (`study.add_trials`, user attr `warm_start_copy_of`). An imported
  cell is never run again: each best arm is queued at a study seed it has no result on (none
  left: not queued), and later proposals of an arm take the seeds it has not run or imported.
  The copies teach the sampler only: they do not count toward n_trials, and the report does not
  count them as evidence (it says so on the page: they ran in another study, whose seeds and
  runs this study cannot pair with its own). Otherwise the arms are only queued, and the
  returned message says why.
- Grid and ablation studies: the plan's cells of the best arms go first; nothing is copied,
  as their sampler learns nothing.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.config import load_study
from grpo_ablate.plan.cells import study_plan
from grpo_ablate.storage.store import mask_url, open_storage
from grpo_ablate.study import ledger
from grpo_ablate.records.trial_record import WARM_ROLE, study_attrs
from grpo_ablate.core.vocab import Arm, Cell

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import StudyConfig

__all__ = ["warm_start", "load_source", "best_arms", "mismatch", "TOP_ARMS"]

TOP_ARMS = 3


def load_source(source: str, storage_url: str | None, default_storage: str) -> "optuna.Study":
    """The finished study: from its study file, else by name in `storage_url` (default: ours)."""
    import optuna  # lazy: Optuna only while a study runs; every command imports study/


    path = Path(source)
    if path.suffix in (".yaml", ".yml") and path.exists():

        other = load_study(path)
        return optuna.load_study(study_name=other.study.name, storage=open_storage(other.storage_url))
    url = storage_url or default_storage
    try:
        return optuna.load_study(study_name=source, storage=open_storage(url))
    except KeyError:
        raise ValueError(f"no study named {source!r} in {mask_url(url)} (nor a study file at {source})") from None


def _finished(other: "optuna.Study") -> list["optuna.trial.FrozenTrial"]:
    """The finished study's own results: completed with values (no OOM), not its own imported copies."""
    return [t for t in other.get_trials(deepcopy=False) if ledger.is_result(t) and not ledger.is_copy(t)]


def best_arms(other: "optuna.Study", limit: int = TOP_ARMS) -> list[tuple[Arm, float]]:
    """The finished study's arms by the mean of its first objective over their seeds, best first."""
    maximize = other.directions[0].name.lower() == "maximize"
    by_arm: dict[Arm, list[float]] = {}
    for t in _finished(other):
        arm = ledger.arm_of(t)
        if arm is not None:
            by_arm.setdefault(arm, []).append(float(t.values[0]))
    means = {a: statistics.fmean(v) for a, v in by_arm.items()}
    ranked = sorted(means, key=lambda a: (-means[a] if maximize else means[a], a))
    return [(a, means[a]) for a in ranked[:limit]]


def mismatch(other: "optuna.Study", study: "StudyConfig") -> list[str]:
    """Why the finished study's results would mislead this study's sampler (empty: they would not)."""
    theirs = study_attrs(other)
    config: dict[str, Any] = theirs.config or {}
    mine = study.to_dict()
    out = []
    theirs_model = (config.get("model") or {}).get("name_or_path")
    if theirs_model != study.model.name_or_path:
        out.append(f"model {theirs_model!r} != {study.model.name_or_path!r}")
    for key in ("task", "dataset", "split"):
        a, b = (config.get("data") or {}).get(key), (mine.get("data") or {}).get(key)
        if a != b:
            out.append(f"data.{key} {a!r} != {b!r}")
    if (config.get("rewards") or []) != (mine.get("rewards") or []):
        out.append("the rewards differ")
    if theirs.hardware != study.space.shape.describe():
        out.append(f"hardware: {theirs.hardware!r} != {study.space.shape.describe()!r}")
    theirs_obj = [m for m, _ in theirs.objectives]
    if theirs_obj != list(study.metric_names):
        out.append(f"objectives {theirs_obj} != {list(study.metric_names)}")
    return out


def warm_start(ostudy: "optuna.Study", study: "StudyConfig", source: str, storage_url: str | None = None,
               limit: int = TOP_ARMS) -> str:
    """Queue the finished study's best arms first; give its results to the sampler when they match. A message."""
    other = load_source(source, storage_url, study.storage_url)
    best = best_arms(other, limit)
    if not best:
        return f"warm start: {other.study_name!r} has no finished trial; nothing queued"
    planned = study.is_planned
    why = [] if planned else mismatch(other, study)
    results = _finished(other)
    imported = [] if planned or why else _importable(results, study)
    # first, so the queue below and every later proposal see the imported cells
    copied = ledger.add_copies(ostudy, study, other.study_name, imported)

    queued: list[str] = []
    skipped: list[str] = []
    covered: list[str] = []
    plan = {c.arm.key: c for c in study_plan(study) if c.seed == study.study.seeds[0]} if planned else {}
    for arm, mean in best:
        cell: Cell | None
        if planned:
            cell = plan.get(arm.key)
        elif ledger.cell_params(study, arm) is None:
            cell = None
        else:
            done = {c.seed for _, c in imported if c.arm.key == arm.key}
            fresh = [s for s in study.study.seeds if s not in done]
            if not fresh:
                covered.append(arm.key)
                continue
            cell = Cell(arm, fresh[0], WARM_ROLE)
        if cell is None:
            skipped.append(arm.key)
            continue
        ledger.queue(ostudy, study, [cell])
        queued.append(f"{arm.key} ({mean:.4g}) seed {cell.seed}")
    text = f"warm start from {other.study_name!r}: queued first {', '.join(queued) or 'nothing'}"
    if skipped:
        text += f"; not feasible or not planned here: {', '.join(skipped)}"
    if covered:
        text += f"; not rerun, every seed already imported: {', '.join(covered)}"
    if copied:
        text += f"; gave the sampler its {copied} finished trial(s)"
    elif planned:
        text += "; a planned study's sampler learns nothing, so its results were not copied"
    elif why:
        text += f"; its results were not given to the sampler because {'; '.join(why)}"
    return text


def _importable(results: list["optuna.trial.FrozenTrial"], study: "StudyConfig") -> list[tuple["optuna.trial.FrozenTrial", Cell]]:
    """The results this study can hold as copies (an arm it can encode, its number of objectives), with their cells."""
    out = []
    for t in results:
        cell = ledger.cell_of(t)
        if cell is not None and len(t.values) == len(study.directions) and ledger.cell_params(study, cell.arm) is not None:
            out.append((t, cell))
    return out
