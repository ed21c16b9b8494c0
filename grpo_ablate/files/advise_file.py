"""advise.json: what `grpo-ablate advise` predicted, and the arms `--enqueue` added to an ablation.

Pure data, no torch: plan (the added arms), study setup (adding one), the report (the prediction
it draws) and advise itself read and write it here, through one reader that refuses a
truncated, mistyped or foreign file (files/owned.py): a lost `advised_arms` list would drop a
queued arm from the plan. Writes are atomic, and a new prediction keeps the arms an earlier
`--enqueue` added, since the study holds their trials.

    python -c "from grpo_ablate.files.advise_file import ADVISED_ARMS_KEY; print(ADVISED_ARMS_KEY)"
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grpo_ablate.core.bounds import BatchSize, Finite, Fraction, Generations, Temperature
from grpo_ablate.files.owned import STRICT, Owner, read_owned_raw, write_json
from grpo_ablate.core.vocab import ADVISE_FILE, Arm

__all__ = ["ADVISE_COMPLETIONS", "ADVISED_ARMS_KEY", "ADVISE_FIX", "NO_SPREAD_FRACTION", "add_advised_arm", "advised_arms", "fitted_prior", "load_advice", "save_advice"]

# advise's samples as a person reads them: one line per prompt and temperature, its K completions
# with their rewards, beside advise.json (so a reward that never fires shows before any trial)
ADVISE_COMPLETIONS = "advise/completions.jsonl"
# nearly all groups with equal rewards: almost no prompt gives a gradient, whatever G is (advise and the report)
NO_SPREAD_FRACTION = 0.9
ADVISED_ARMS_KEY = "advised_arms"  # the arms `advise --enqueue` added to the plan (Arm.as_dict each)
ADVISE_FIX = ("delete it, then rerun `grpo-ablate advise STUDY` (with --enqueue again if it had added an arm "
              "to the ablation)")


@dataclass
class _Arm:
    __pydantic_config__ = STRICT

    num_generations: Generations | str  # a schedule by its label
    generation_batch_size: BatchSize
    temperature: Temperature


@dataclass
class _Prediction:
    __pydantic_config__ = STRICT

    num_generations: Generations | str
    generation_batch_size: BatchSize
    temperature: Temperature
    zero_spread: Fraction


@dataclass
class _AdviceFile:
    """The keys readers use, typed; other keys pass through unchecked (the report draws them)."""

    __pydantic_config__ = STRICT

    owner: Owner
    advised_arms: list[_Arm] = field(default_factory=list)
    predictions: list[_Prediction] | None = None
    temperatures: list[Temperature] | None = None
    fits: dict[str, dict[str, Finite | None]] | None = None


def _path(output_dir: str | os.PathLike[str]) -> Path:
    return Path(output_dir) / ADVISE_FILE


def load_advice(output_dir: str | os.PathLike[str], owner: Owner) -> dict[str, Any] | None:
    """The study's advise.json, None without one; a StudyError (exit 2, with the path and the fix)
    when it is truncated, mistyped, or was written for another study, model or hardware."""
    read = read_owned_raw(_path(output_dir), _AdviceFile, owner, ADVISE_FIX)
    return None if read is None else read[1]  # the dict keeps every key, the schema checked the ones read


def advised_arms(output_dir: str | os.PathLike[str], owner: Owner) -> list[Arm]:
    """The arms `advise --enqueue` added, as saved (the caller checks the study can still run them)."""
    saved = (load_advice(output_dir, owner) or {}).get(ADVISED_ARMS_KEY) or []
    arms = [Arm.from_mapping(a) for a in saved]
    return [a for a in arms if a is not None]


def save_advice(output_dir: str | os.PathLike[str], advice: dict[str, Any], owner: Owner) -> Path:
    """Write a new prediction, keeping the arms an earlier `--enqueue` added."""
    kept = (load_advice(output_dir, owner) or {}).get(ADVISED_ARMS_KEY)  # a broken file is refused, not replaced
    data = {**advice, "owner": vars(owner)}
    if kept:
        data[ADVISED_ARMS_KEY] = kept
    return write_json(_path(output_dir), data)


def add_advised_arm(output_dir: str | os.PathLike[str], arm: Arm, owner: Owner) -> None:
    """Keep `arm` among the added arms (once), where plan.advised_arms reads it."""
    data = load_advice(output_dir, owner) or {"owner": vars(owner)}
    arms = data.setdefault(ADVISED_ARMS_KEY, [])
    if arm.as_dict() not in arms:
        arms.append(arm.as_dict())
    write_json(_path(output_dir), data)


def fitted_prior(advice: Mapping[str, Any] | None, temperature: float) -> tuple[float, float] | None:
    """advise.json's fitted Beta(a, b) of a prompt's pass rate at the temperature nearest `temperature`, or None
    (no advice, or no usable fit): the prior a per-prompt G policy starts each prompt from. The parent resolves it
    into the trial's spec (study/trial_spec.py), so the trial never looks for advise.json itself."""
    fits = {float(t): v for t, v in ((advice or {}).get("fits") or {}).items() if v and v.get("a") and v.get("b")}
    if not fits:
        return None
    nearest = min(fits, key=lambda t: abs(t - temperature))
    return float(fits[nearest]["a"]), float(fits[nearest]["b"])
