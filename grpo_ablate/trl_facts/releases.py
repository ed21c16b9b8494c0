"""GRPOConfig's defaults in each TRL release a recipe may target, read from the released source.

    python tools/trl_defaults.py        # regenerates trl_defaults.json from the PyPI wheels

A recipe that leaves a key out ran with the default of the TRL it was written for, which is not
the installed TRL's when a release changed it (TRL 0.18 -> 1.x: beta 0.04 -> 0.0, loss_type bnpo ->
dapo, max_completion_length 256 -> 512, gradient checkpointing and bf16 turned on ...). The table
holds each release's every field and default, parsed from its wheel (no hand-typed defaults);
`drift` compares two releases field by field, so a recipe's implicit keys can be resolved to what
its own TRL ran.
"""

from __future__ import annotations

import datetime
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TABLE_PATH", "RELEASED", "release_on", "FieldDrift", "known_releases", "release_defaults", "release_types", "drift", "same_meaning",
           "release_of", "release_entries", "drift_between"]

TABLE_PATH = Path(__file__).with_name("trl_defaults.json")

# When each release of the table up to Open R1's pin came out: its series' first upload to PyPI (0.15.2 stands for
# 0.15.0-0.15.2, whose GRPOConfig defaults are the same), for recipes dated before a pin (config/recipes/stack.py).
RELEASED: dict[str, datetime.date] = {
    "0.14.0": datetime.date(2025, 1, 29), "0.15.2": datetime.date(2025, 2, 13), "0.16.1": datetime.date(2025, 3, 22),
    "0.17.0": datetime.date(2025, 4, 24), "0.18.0": datetime.date(2025, 5, 28),
}


def release_on(date: datetime.date) -> tuple[str, datetime.date]:
    """(the newest release of the table out on `date`, its date); the oldest one before any (GRPO came with 0.14)."""
    out = [(d, r) for r, d in RELEASED.items() if d <= date]
    day, release = max(out) if out else min((d, r) for r, d in RELEASED.items())
    return release, day

# Pairs of values that two releases spell differently for the same behaviour (read in each release's
# source): no FSDP ("" / None), no scheduler arguments ({} / None), no token counting (False / "no"),
# no top-k filter (None / 0), per-group reward scaling (True / "group"; TRL maps the bool in __post_init__).
_SAME: dict[str, tuple[tuple[Any, Any], ...]] = {
    "fsdp": (("", None), ("", [])),
    "lr_scheduler_kwargs": (({}, None),),
    "include_num_input_tokens_seen": ((False, "no"), (True, "all")),
    "top_k": ((None, 0),),
    "scale_rewards": ((True, "group"), (False, "none")),
}


@dataclass(frozen=True)
class FieldDrift:
    """One GRPOConfig field whose default is not the same in the recipe's TRL and the installed one.

    `then` / `now` are the defaults (None with `then_has` / `now_has` False when that release has no such field).
    """

    name: str
    then: Any
    now: Any
    then_has: bool
    now_has: bool


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads(TABLE_PATH.read_text(encoding="utf-8"))


def known_releases() -> list[str]:
    """The TRL versions the table holds, e.g. ["0.18.0", "1.16.0"]."""
    return list(_table()["releases"])


def release_of(version: str) -> str | None:
    """The table's release for a version as a user writes it ("0.18", "0.18.0", "v0.18.0"), or None."""
    v = version.strip().lstrip("v")
    for known in known_releases():
        if v == known or (v.count(".") == 1 and known.startswith(v + ".") and known.endswith(".0")):
            return known
    return None


def _effective(entry: dict[str, Any]) -> Any:
    return entry["resolved"] if "resolved" in entry else entry.get("default")


def release_defaults(version: str, resolved: bool = True) -> dict[str, Any]:
    """{field: default} of GRPOConfig in one release; with `resolved`, a None that the config's
    __post_init__ fills from constants (bf16 in TRL 1.x: not fp16) is that value."""
    fields = _table()["releases"][version]["fields"]
    return {k: (_effective(e) if resolved else e.get("default")) for k, e in fields.items()}


def release_types(version: str) -> dict[str, str]:
    """{field: its annotation as written in that release's source}, e.g. {"learning_rate": "float"}."""
    return {k: e["type"] for k, e in _table()["releases"][version]["fields"].items()}


def same_meaning(field: str, a: Any, b: Any) -> bool:
    """Whether two defaults of one field behave the same (equal, or a known pair of spellings)."""
    if a == b and type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                         and not isinstance(a, bool) and not isinstance(b, bool) and a == b):
        return True
    return any({repr(a), repr(b)} == {repr(x), repr(y)} for x, y in _SAME.get(field, ()))


def release_entries(version: str) -> dict[str, dict[str, Any]]:
    """{field: {"default", "type", ["resolved"]}} of one release, as the table holds them."""
    return dict(_table()["releases"][version]["fields"])


def drift_between(then_fields: dict[str, dict[str, Any]], now_fields: dict[str, dict[str, Any]]) -> list[FieldDrift]:
    """Every field whose default differs between two releases' entries, or that only one of them has.

    Defaults compare as declared when they are the same there (both None and filled at run time from other
    fields, e.g. steps_per_generation), else as resolved (bf16: False in TRL 0.18, `not fp16` in 1.x)."""
    out: list[FieldDrift] = []
    for name in sorted({*then_fields, *now_fields}):
        a, b = then_fields.get(name), now_fields.get(name)
        if a is None or b is None:
            out.append(FieldDrift(name, _effective(a) if a else None, _effective(b) if b else None,
                                  a is not None, b is not None))
            continue
        if same_meaning(name, a.get("default"), b.get("default")):
            continue
        if not same_meaning(name, _effective(a), _effective(b)):
            out.append(FieldDrift(name, _effective(a), _effective(b), True, True))
    return out


def drift(then_version: str, now_version: str) -> list[FieldDrift]:
    """drift_between two releases of the table."""
    return drift_between(release_entries(then_version), release_entries(now_version))
