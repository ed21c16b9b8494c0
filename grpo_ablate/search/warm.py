"""Warm starts: seed a new study from a finished one.

    grpo-ablate run studies/new.yaml --warm-start studies/old.yaml
    grpo-ablate run studies/new.yaml --warm-start old-study-name --warm-start-storage sqlite:///old.db

The finished study's best arms (mean of the first objective over their seeds) are queued first,
best first. When model, task, rewards, objectives and hardware match, its finished trials are
also given to the sampler (`study.add_trials`, user attr `warm_start_copy_of`; they are not
counted toward n_trials and never run again); otherwise the arms are only queued, and the
returned message says why.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.search.encoding import DEFAULT_ENCODING, encode_arm
from grpo_ablate.storage import mask_url
from grpo_ablate.vocab import ARM_ATTR, COPY_ATTR, WARM_ROLE, Arm, Cell

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["warm_start", "load_source", "best_arms", "mismatch", "TOP_ARMS"]

TOP_ARMS = 3


def load_source(source: str, storage_url: str | None, default_storage: str) -> "optuna.Study":
    """The finished study: from its study file, else by name in `storage_url` (default: ours)."""
    import optuna

    from grpo_ablate.storage import open_storage

    path = Path(source)
    if path.suffix in (".yaml", ".yml") and path.exists():
        from grpo_ablate.config import load_study

        other = load_study(path)
        return optuna.load_study(study_name=other.study.name, storage=open_storage(other.storage_url))
    url = storage_url or default_storage
    try:
        return optuna.load_study(study_name=source, storage=open_storage(url))
    except KeyError:
        raise ValueError(f"no study named {source!r} in {mask_url(url)} (nor a study file at {source})") from None


def _finished(other: "optuna.Study") -> list["optuna.trial.FrozenTrial"]:
    from optuna.trial import TrialState

    out = []
    for t in other.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        cons = t.system_attrs.get("constraints")
        if t.values and not (cons and any(c > 0 for c in cons)) and not t.user_attrs.get(COPY_ATTR):
            out.append(t)
    return out


def best_arms(other: "optuna.Study", limit: int = TOP_ARMS) -> list[tuple[Arm, float]]:
    """The finished study's arms by the mean of its first objective over their seeds, best first."""
    maximize = other.directions[0].name.lower() == "maximize"
    by_arm: dict[Arm, list[float]] = {}
    for t in _finished(other):
        arm = Arm.from_mapping(t.user_attrs)
        if arm is not None:
            by_arm.setdefault(arm, []).append(float(t.values[0]))
    means = {a: statistics.fmean(v) for a, v in by_arm.items()}
    ranked = sorted(means, key=lambda a: (-means[a] if maximize else means[a], a))
    return [(a, means[a]) for a in ranked[:limit]]


def mismatch(other: "optuna.Study", study: "Study") -> list[str]:
    """Why the finished study's results would mislead this study's sampler (empty: they would not)."""
    attrs = other.user_attrs
    config: dict[str, Any] = attrs.get("config") or {}
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
    if attrs.get("hardware") != study.space.shape.describe():
        out.append(f"hardware: {attrs.get('hardware')!r} != {study.space.shape.describe()!r}")
    theirs_obj = [o.get("metric") for o in attrs.get("objectives") or []]
    if theirs_obj != list(study.metric_names):
        out.append(f"objectives {theirs_obj} != {list(study.metric_names)}")
    return out


def warm_start(ostudy: "optuna.Study", study: "Study", source: str, storage_url: str | None = None,
               limit: int = TOP_ARMS) -> str:
    """Queue the finished study's best arms first; give its results to the sampler when they match. A message."""
    import optuna

    from grpo_ablate.plan import cell_params, study_plan

    other = load_source(source, storage_url, study.storage_url)
    best = best_arms(other, limit)
    if not best:
        return f"warm start: {other.study_name!r} has no finished trial; nothing queued"
    planned = study.study.sampler in ("grid", "ablation")
    temps = study.temperatures()
    queued, skipped = [], []
    plan = {c.arm.key: c for c in study_plan(study) if c.seed == study.study.seeds[0]} if planned else {}
    for arm, mean in best:
        if planned:
            cell = plan.get(arm.key)
            if cell is None:
                skipped.append(arm.key)
                continue
            params = cell_params(study, cell)
            if study.study.racing is not None:
                params.pop("seed", None)
            ostudy.enqueue_trial(params, user_attrs={"role": cell.role, "cell": cell.key, "seed": cell.seed})
        else:
            enc = encode_arm(arm, study.space, temps, DEFAULT_ENCODING)
            if enc is None:
                skipped.append(arm.key)
                continue
            ostudy.enqueue_trial(enc[0], user_attrs={"role": WARM_ROLE, ARM_ATTR: arm.key})
        queued.append(f"{arm.key} ({mean:.4g})")
    why = mismatch(other, study)
    added = 0
    if not why and not planned:
        copies = []
        for t in _finished(other):
            arm = Arm.from_mapping(t.user_attrs)
            enc = encode_arm(arm, study.space, temps, DEFAULT_ENCODING) if arm is not None else None
            if enc is None or len(t.values) != len(study.directions):
                continue
            cell = Cell.from_attrs(t.user_attrs)
            attrs = {**{k: v for k, v in t.user_attrs.items() if k not in ("trial_dir", "host", "pid")},
                     ARM_ATTR: arm.key, COPY_ATTR: f"{other.study_name}#{t.number}"}  # type: ignore[union-attr]
            if cell is not None:
                attrs["cell"] = cell.key
            copies.append(optuna.trial.create_trial(params=enc[0], distributions=enc[1], values=list(t.values),
                                                    user_attrs=attrs))
        ostudy.add_trials(copies)
        added = len(copies)
    text = f"warm start from {other.study_name!r}: queued first {', '.join(queued) or 'nothing'}"
    if skipped:
        text += f"; not feasible or not planned here: {', '.join(skipped)}"
    if added:
        text += f"; gave the sampler its {added} finished trial(s)"
    elif planned:
        text += "; a planned study's sampler learns nothing, so its results were not copied"
    else:
        text += f"; its results were not given to the sampler because {'; '.join(why)}"
    return text
