"""The study's `trainer` section against the installed TRL: every key a GRPOConfig field, of the type TRL's parser takes.

    grpo-ablate validate studies/tiny-cpu.yaml

GRPOConfig's fields, defaults and help are TRL's facts (trl_facts/fields.py, read once and cached
per TRL version); this module holds what the study file may and may not say about them: the keys
TRL removed, the keys grpo-ablate owns, and each field's scalar type as TRL's argument parser casts
it (from trl_facts/trl_defaults.json, read from the release's source).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
from typing import Any

from grpo_ablate.trl_facts.releases import release_of, release_types
from grpo_ablate.core.errors import Problem, did_you_mean, echo
from grpo_ablate.trl_facts.fields import trainer_field_names
from grpo_ablate.core.vocab import SEARCHED_KEYS

__all__ = ["REMOVED_TRAINER_KEYS", "OWNED_TRAINER_KEYS", "check_trainer_keys", "field_type", "cast_like_trl"]

# Keys older recipes carry that current TRL no longer has, with what to do instead.
REMOVED_TRAINER_KEYS = {
    "max_prompt_length": (
        "was removed from TRL (0.28); prompts are no longer truncated by the trainer: "
        "filter long prompts out of the dataset instead (data.max_prompt_tokens)"
    ),
    "warmup_ratio": (
        "was folded into warmup_steps by transformers 5: write warmup_steps: 0.1 "
        "(a value below 1 is a fraction of the total steps)"
    ),
}

# Keys grpo-ablate sets per trial; a value in `trainer` would be overwritten, so say so.
OWNED_TRAINER_KEYS = {
    "output_dir": "each trial writes to <study output_dir>/trials/<n>; set study.output_dir instead",
    "auto_find_batch_size": "TRL rejects it for GRPO (shrinking the batch breaks whole groups)",
}

_POSITIVE_INT_KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps", "per_device_eval_batch_size",
                      "steps_per_generation", "max_completion_length", "num_generations", "generation_batch_size",
                      "num_iterations")


_SCALARS: dict[str, type] = {"bool": bool, "int": int, "float": float, "str": str}


@functools.lru_cache(maxsize=1)
def _field_types() -> dict[str, str]:
    """The installed GRPOConfig's annotations, from trl_facts/trl_defaults.json when it holds the installed TRL
    (tools/trl_defaults.py writes them from the release's source); empty otherwise (nothing checked)."""
    try:
        version = release_of(importlib.metadata.version("trl"))
    except importlib.metadata.PackageNotFoundError:
        return {}
    return release_types(version) if version else {}


def field_type(key: str) -> tuple[type, bool] | None:
    """(the scalar type TRL's argument parser casts a field's value to, whether None is allowed), or None for a
    field whose annotation is not one plain scalar (a dict, a list, an enum-or-str union: passed as given)."""
    annotation = _field_types().get(key)
    if annotation is None:
        return None
    text = annotation.replace("Optional[", "").replace("]", "") if annotation.startswith("Optional[") else annotation
    parts = [p.strip() for p in text.split("|")]
    optional = "None" in parts or annotation.startswith("Optional[")
    rest = [p for p in parts if p != "None"]
    if len(rest) != 1 or rest[0] not in _SCALARS:
        return None
    return _SCALARS[rest[0]], optional


def _string_to_bool(v: str) -> bool:
    low = v.strip().lower()
    if low in ("yes", "true", "t", "y", "1"):
        return True
    if low in ("no", "false", "f", "n", "0"):
        return False
    raise ValueError(v)


def cast_like_trl(key: str, value: Any) -> Any:
    """The value as TRL's own parser (HfArgumentParser, through `trl grpo --config`) would pass it to GRPOConfig:
    a string cast to the field's scalar type ("2e-4" -> 0.0002, "true" -> True), an int accepted for a float;
    anything else of the wrong type raises ValueError with what was expected."""
    kind = field_type(key)
    if kind is None or value is None:
        return value  # null: GRPOConfig's own checks decide
    target, _ = kind
    if target is str:
        return value  # argparse casts only text, and TRL maps some non-text values itself (scale_rewards: false)
    if isinstance(value, str):
        try:
            return _string_to_bool(value) if target is bool else target(value.strip())
        except ValueError:
            raise ValueError(f"expected {target.__name__}, got the text {echo(value)}") from None
    if target is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, target) and not (target is int and isinstance(value, bool)):
        return value
    raise ValueError(f"expected {target.__name__}, got {echo(value)} "
                     f"({type(value).__name__})")


def check_trainer_keys(trainer: dict[str, Any], search: dict[str, Any]) -> list[Problem]:
    """Every trainer key a GRPOConfig field, none owned by grpo-ablate or by the search."""
    problems: list[Problem] = []
    fields = trainer_field_names()
    for key, value in trainer.items():
        key = str(key)
        path = f"trainer.{key}"
        if key in REMOVED_TRAINER_KEYS:
            problems.append(Problem(path=path, message=f"{key} {REMOVED_TRAINER_KEYS[key]}"))
        elif key not in fields:
            problems.append(Problem(path=path, message=f"not a GRPOConfig field of the installed TRL"
                                                       f"{did_you_mean(key, sorted(fields))}"))
        elif key in OWNED_TRAINER_KEYS and key != "output_dir" and value:
            problems.append(Problem(path=path, message=OWNED_TRAINER_KEYS[key]))
        elif key in SEARCHED_KEYS and key in search:
            problems.append(Problem(path=path, message=f"is searched (search.{key}); remove it here, "
                                                       f"or give search.{key} a single value"))
        elif key not in _POSITIVE_INT_KEYS:  # those are checked below, with their own message
            problems += _type_problem(path, key, value)
    t = trainer.get("temperature")
    if isinstance(t, (int, float)) and -math.inf < t <= 0:  # NaN and -inf: validate._check_values
        problems.append(Problem(path="trainer.temperature",
                                message=f"must be > 0 (TRL fails only when the trainer is built), got {echo(t)}"))
    if "generation_batch_size" in trainer and "steps_per_generation" in trainer:
        problems.append(Problem(path="trainer.steps_per_generation",
                                message="generation_batch_size and steps_per_generation cannot both be set; keep one"))
    for key in _POSITIVE_INT_KEYS:
        v = trainer.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            problems.append(Problem(path=f"trainer.{key}", message=f"must be a positive integer, got {echo(v)}"))
    return problems


def _type_problem(path: str, key: str, value: Any) -> list[Problem]:
    """A value GRPOConfig would take with the wrong type (every trial failing with a TypeError), as a problem
    that says what TRL's parser would have read it as, when it would have."""
    try:
        cast = cast_like_trl(key, value)
    except ValueError as e:
        return [Problem(path=path, message=f"{e}: GRPOConfig declares {key}: {_field_types()[key]}")]
    if cast is value or cast == value and type(cast) is type(value):
        return []
    hint = (" (YAML 1.1 reads an exponent without a dot as text: write 2.0e-4)"
            if isinstance(value, str) and "e" in value.lower() and target_is_float(key) else "")
    return [Problem(path=path, message=(
        f"is the text {echo(value)}, and GRPOConfig declares {key}: {_field_types()[key]}; TRL's own parser would "
        f"read it as {json.dumps(cast)}: write {json.dumps(cast)} without quotes{hint}"))]


def target_is_float(key: str) -> bool:
    kind = field_type(key)
    return kind is not None and kind[0] is float
