"""summary.json: the report's answer for machines, read back by `grpo-ablate compare` and CI.

The writer is report/summary.py; this is the one reader, strict on the keys compare reads, so a
hand-edited or truncated summary is exit 2 with the path and the fix, not a TypeError half-way
through a nightly gate. Unlike probe.json and advise.json, a summary is compared with another
study's on purpose: its owner (study, model, hardware) is recorded and shown, never refused.

    python -c "from grpo_ablate.files.summary_file import read_summary; print(read_summary('runs/tiny-cpu/summary.json')['study'])"
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from grpo_ablate.core.bounds import BatchSize, Finite, Generations, Temperature
from grpo_ablate.core.errors import StudyError, echo
from grpo_ablate.files.owned import MAX_FILE_BYTES, STRICT, file_error
from grpo_ablate.core.safe_read import read_text

__all__ = ["read_summary", "SUMMARY_FIX"]

SUMMARY_FIX = "write it again with `grpo-ablate report STUDY`, or point compare at the study file instead"


@dataclass
class _MetricStat:
    __pydantic_config__ = STRICT

    mean: Finite | None = None  # NaN would compare as "no regression" against anything


@dataclass
class _ArmRow:
    __pydantic_config__ = STRICT

    metrics: dict[str, _MetricStat | None]
    key: str | None = None
    arm: str | None = None
    num_generations: Generations | str | None = None
    generation_batch_size: BatchSize | None = None
    temperature: Temperature | None = None


@dataclass
class _Objective:
    __pydantic_config__ = STRICT

    metric: str
    direction: Literal["minimize", "maximize"]


@dataclass
class _Recommended:
    __pydantic_config__ = STRICT

    key: str | None = None


@dataclass
class _Verdict:
    __pydantic_config__ = STRICT

    kind: str
    recommended: _Recommended | None = None


@dataclass
class _Best:
    __pydantic_config__ = STRICT

    params: dict[str, Any] | None = None


@dataclass
class _Summary:
    __pydantic_config__ = STRICT

    arms: list[_ArmRow]
    study: str | None = None
    objectives: list[_Objective] = field(default_factory=list)
    verdict: _Verdict | None = None
    best: dict[str, _Best | None] = field(default_factory=dict)


def read_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The summary as a dict (every key kept) once the keys compare reads have the writer's types;
    a StudyError naming the path, the first problem and the fix otherwise (FileNotFoundError when absent)."""
    path = Path(path)
    try:
        text = read_text(path, "summary", MAX_FILE_BYTES)
    except FileNotFoundError:
        raise FileNotFoundError(2, "not found", str(path)) from None
    except StudyError as e:  # a FIFO, a device, a folder, too large, not UTF-8
        raise file_error(path, e.problems[0].message, SUMMARY_FIX) from None
    try:
        TypeAdapter(_Summary).validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        if first["type"] == "json_invalid":
            what = f"is not valid JSON (truncated or edited? {first['msg']})"
        else:
            got = "" if first["type"] == "missing" else f", got {echo(first.get('input'))}"
            what = f"is not a grpo-ablate summary.json: {where or 'the file'}: {first['msg'].lower()}{got}"
        raise file_error(path, what, SUMMARY_FIX) from None
    return json.loads(text)
