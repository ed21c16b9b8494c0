"""The `trainer` section against the installed TRL: GRPOConfig's fields, defaults and help, read once and cached.

    python -c "from grpo_ablate.config.trainer_fields import trl_default; print(trl_default('num_generations'))"
    grpo-ablate explain trainer.beta       # a field's type, default and help, as TRL's own metadata gives them

The fields are read in a child process and cached on disk per TRL version, so neither
`validate` nor the study's orchestrator ever imports trl/torch (seconds, hundreds of MB).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

from grpo_ablate.children import die_with_parent
from grpo_ablate.config.trl_releases import release_of, release_types
from grpo_ablate.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.vocab import SEARCHED_KEYS

__all__ = ["trl_default", "REMOVED_TRAINER_KEYS", "OWNED_TRAINER_KEYS", "trainer_field_names", "check_trainer_keys",
           "field_type", "cast_like_trl", "trainer_field_docs", "installed_trl_version"]

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


@functools.lru_cache(maxsize=1)
def installed_trl_version() -> str:
    """The installed TRL's version ("unknown" without one); read once (each read parses the package's metadata)."""
    try:
        return importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _read_grpo_config(what: str, reader: str) -> dict[str, Any]:
    """`reader(GRPOConfig)` (a function of this module returning plain JSON), for the installed TRL.

    In a process that has imported trl already (a trial), read from the class; elsewhere from a
    child process, once per TRL version, cached on disk under $GRPO_ABLATE_CACHE as `what`.
    """
    if "trl" in sys.modules:
        from trl import GRPOConfig

        return globals()[reader](GRPOConfig)
    folder = Path(os.environ.get("GRPO_ABLATE_CACHE") or Path.home() / ".cache" / "grpo-ablate")
    cache = folder / f"grpo_config_{what}-trl{installed_trl_version()}.json"
    try:
        cached = json.loads(cache.read_text())
        if isinstance(cached, dict):
            return cached
    except (OSError, ValueError):
        pass
    code = (f"import json; from trl import GRPOConfig; "
            f"from grpo_ablate.config.trainer_fields import {reader}; print(json.dumps({reader}(GRPOConfig)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, preexec_fn=die_with_parent())
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise StudyError([Problem(path="trainer", message=f"cannot read GRPOConfig from the installed TRL: {tail}")])
    fields = json.loads(out.stdout.strip().splitlines()[-1])
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(fields))
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home: read again next time
    return fields


@functools.lru_cache(maxsize=1)
def _grpo_config() -> dict[str, Any]:
    """GRPOConfig's fields and their defaults (None where the default is not plain JSON)."""
    return _read_grpo_config("defaults", "_defaults_of")


@functools.lru_cache(maxsize=1)
def trainer_field_docs() -> dict[str, dict[str, str]]:
    """Every GRPOConfig field of the installed TRL: {"type", "default", "allowed", "help"} as words, from the
    dataclass itself (its annotations, defaults and `metadata["help"]`, the text TRL's own `--help` prints)."""
    return _read_grpo_config("docs", "_docs_of")


def _docs_of(config_class: type) -> dict[str, dict[str, str]]:
    """Each dataclass field as words: the annotation (None as null), the default as JSON (a factory's value; repr
    where JSON cannot hold it), an enum's or Literal's values, and the help text on one line."""
    out: dict[str, dict[str, str]] = {}
    for f in dataclasses.fields(config_class):
        if f.default is not dataclasses.MISSING:
            value: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            value = dataclasses.MISSING
        if isinstance(value, enum.Enum):
            value = value.value
        try:
            default = "required" if value is dataclasses.MISSING else json.dumps(value)
        except (TypeError, ValueError):
            default = repr(value)
        out[f.name] = {"type": _type_words(f.type), "default": default, "allowed": _allowed_words(f.type),
                       "help": " ".join(str(f.metadata.get("help") or "").split())}
    return out


def _type_words(annotation: Any) -> str:
    """`float`, `str | null`, `SchedulerType | str`: the annotation without module paths, None written null."""
    text = annotation if isinstance(annotation, str) else (
        annotation.__name__ if isinstance(annotation, type) else str(annotation))
    text = re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)
    return re.sub(r"\b(?:None|NoneType)\b", "null", text)


def _allowed_words(annotation: Any) -> str:
    """The values an annotation's enum or Literal members allow, e.g. '"linear", "cosine", ...' ("" when any)."""
    if isinstance(annotation, str):
        return ""
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    values: list[Any] = []
    for m in members:
        if isinstance(m, type) and issubclass(m, enum.Enum):
            values += [e.value for e in m]
        elif typing.get_origin(m) is typing.Literal:
            values += list(typing.get_args(m))
    return ", ".join(json.dumps(v) if isinstance(v, (str, int, float, bool)) else repr(v) for v in dict.fromkeys(values))


def _defaults_of(config_class: type) -> dict[str, Any]:
    """Each dataclass field's default, None for a factory or a value JSON cannot hold."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config_class):
        value = None if f.default is dataclasses.MISSING else f.default
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            value = None
        out[f.name] = value
    return out


def trainer_field_names() -> frozenset[str]:
    """GRPOConfig's fields in the installed TRL."""
    return frozenset(_grpo_config())


def trl_default(key: str) -> Any:
    """TRL's own default for a GRPOConfig field (e.g. num_generations 8, temperature 1.0), read from
    the installed GRPOConfig rather than typed here, so an upgrade of TRL cannot leave a stale copy."""
    return _grpo_config()[key]


_SCALARS: dict[str, type] = {"bool": bool, "int": int, "float": float, "str": str}


@functools.lru_cache(maxsize=1)
def _field_types() -> dict[str, str]:
    """The installed GRPOConfig's annotations, from config/trl_defaults.json when it holds the installed TRL
    (benchmarks/trl_defaults.py writes them from the release's source); empty otherwise (nothing checked)."""
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
