"""GRPOConfig of the installed TRL: its fields, defaults and help, read once and cached per TRL version.

    python -c "from grpo_ablate.trl_facts.fields import trl_default; print(trl_default('num_generations'))"
    grpo-ablate explain trainer.beta       # a field's type, default and help, as TRL's own metadata gives them

Facts about TRL, not about a study: both sides read them, the orchestrator (validate, the plan, the
estimate) and the trial process (its GRPOConfig, sampling and reward defaults), so they sit below
`config/` and the trainer. The fields are read in a child process and cached on disk per TRL
version, so neither `validate` nor the study's orchestrator ever imports trl/torch (seconds,
hundreds of MB); a process that has imported trl (a trial) reads the class itself.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

from grpo_ablate.core.children import die_with_parent
from grpo_ablate.core.errors import Problem, StudyError

__all__ = ["installed_trl_version", "trainer_field_docs", "trainer_field_names", "trl_default"]


@functools.lru_cache(maxsize=1)
def installed_trl_version() -> str:
    """The installed TRL's version ("unknown" without one); read once (each read parses the package's metadata)."""
    return _version_of("trl")


@functools.lru_cache(maxsize=4)
def _version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _read_grpo_config(what: str, reader: str) -> dict[str, Any]:
    """`reader(GRPOConfig)` (a function of this module returning plain JSON), for the installed TRL.

    In a process that has imported trl already (a trial), read from the class; elsewhere from a
    child process, once per pair of TRL and transformers versions, cached on disk under
    $GRPO_ABLATE_CACHE as `what`. GRPOConfig inherits transformers' TrainingArguments, so its
    fields depend on both: keyed on TRL's alone, a second environment with another transformers
    sharing the cache (the vLLM tier's) left the first reading the other's fields.
    """
    if "trl" in sys.modules:
        # only in a process that has TRL already (a trial); elsewhere a cached child process reads it
        from trl import GRPOConfig

        return globals()[reader](GRPOConfig)
    folder = Path(os.environ.get("GRPO_ABLATE_CACHE") or Path.home() / ".cache" / "grpo-ablate")
    cache = folder / f"grpo_config_{what}-trl{installed_trl_version()}-transformers{_version_of('transformers')}.json"
    try:
        cached = json.loads(cache.read_text())
        if isinstance(cached, dict):
            return cached
    except (OSError, ValueError):
        pass
    code = (f"import json; from trl import GRPOConfig; "
            f"from grpo_ablate.trl_facts.fields import {reader}; print(json.dumps({reader}(GRPOConfig)))")
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
