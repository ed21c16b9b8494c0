"""One reader for the JSON files the tool reads back: schema-checked, strict, and owned.

A file in a study's folder outlives the study file that wrote it: the study is renamed, the
model or the hardware changes, an editor truncates it, a hand edit writes `"fits": "false"`.
Each of those once became a silent wrong answer (an out-of-memory pair feasible again). So a
file records its owner (study, model, hardware) when written, and a reader validates the text
against the writer's own types in pydantic's strict mode and checks the owner; any failure is a
StudyError (exit 2) naming the path, what is wrong, and the fix.

    python -c "from grpo_ablate.files.owned import Owner; print(Owner('s', 'builtin:tiny', 'defaults'))"
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ConfigDict, TypeAdapter, ValidationError

from grpo_ablate.core.errors import Problem, StudyError, echo
from grpo_ablate.core.safe_read import MB, read_text

__all__ = ["Owner", "STRICT", "read_owned", "read_owned_raw", "write_json", "file_error"]

T = TypeVar("T")

# The config every file's dataclasses carry (`__pydantic_config__`): no "false" as a bool, no 1.5 as an int.
STRICT = ConfigDict(strict=True)
OWNER_KEY = "owner"
MAX_FILE_BYTES = 64 * MB  # probe.json and advise.json are kB; the bound keeps /dev/zero out of memory


@dataclass(frozen=True)
class Owner:
    """Whom a file belongs to: the study's name, its model, and its hardware section in words."""

    __pydantic_config__ = STRICT

    study: str
    model: str
    hardware: str

    @classmethod
    def of(cls, study: Any) -> "Owner":
        """From a StudyConfig or a StudyFile (anything with .study.name, .model.name_or_path, .hardware)."""
        hw = study.hardware.model_dump(mode="json", exclude_defaults=True)
        flat = {f"{k}.{kk}" if isinstance(v, dict) else k: vv
                for k, v in sorted(hw.items()) for kk, vv in (sorted(v.items()) if isinstance(v, dict) else [(None, v)])}
        hardware = ", ".join(f"{k}={v}" for k, v in flat.items()) or "defaults (one CPU process)"
        return cls(study=str(study.study.name), model=str(study.model.name_or_path), hardware=hardware)

    def differences(self, other: "Owner") -> list[str]:
        return [f"{k} {echo(getattr(self, k))}" for k in ("study", "model", "hardware") if getattr(self, k) != getattr(other, k)]


def file_error(path: Path, what: str, fix: str) -> StudyError:
    return StudyError([Problem(path=str(path), message=f"{what}; {fix}")])


def read_owned(path: Path, schema: type[T], owner: Owner, fix: str) -> T | None:
    """The file at `path` as `schema` (a dataclass with STRICT config and an `owner` field), None
    when there is no file; a StudyError when it is unreadable, malformed, or someone else's."""
    read = read_owned_raw(path, schema, owner, fix)
    return None if read is None else read[0]


def read_owned_raw(path: Path, schema: type[T], owner: Owner, fix: str) -> tuple[T, Any] | None:
    """`read_owned`, with the file's JSON as parsed from the same read (keys the schema leaves out kept)."""
    try:
        text = read_text(path, path.name, MAX_FILE_BYTES)
    except FileNotFoundError:  # no file (or validation names an output_dir that is a file)
        return None
    except StudyError as e:  # a FIFO, a device, a folder, too large, not UTF-8
        raise file_error(path, e.problems[0].message, fix) from None
    try:
        value = TypeAdapter(schema).validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        got = "" if first["type"] in ("json_invalid", "missing") else f", got {echo(first.get('input'))}"
        what = (f"is not valid JSON (truncated or edited? {first['msg']})" if first["type"] == "json_invalid"
                else f"{where or 'the file'}: {first['msg'].lower()}{got}"
                     + (f" (and {e.error_count() - 1} more problem(s))" if e.error_count() > 1 else ""))
        raise file_error(path, what, fix) from None
    recorded: Owner = getattr(value, OWNER_KEY)
    if recorded != owner:
        theirs = "; ".join(recorded.differences(owner))
        raise file_error(path, f"was written for another study ({theirs}), not this one ({'; '.join(owner.differences(recorded))})",
                         fix)
    return value, json.loads(text)


def write_json(path: Path, data: Any) -> Path:
    """Write then rename: a reader never sees half a file. `data`: a dict or a dataclass."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(asdict(data) if hasattr(data, "__dataclass_fields__") else data, indent=2))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
