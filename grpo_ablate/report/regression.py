"""The regression rule of `grpo-ablate compare`: two summaries (summary.json) -> one judged row per arm and
tracked metric, and whether the two are runs of one study. Pure over plain mappings, so tests assert on rows.

    python -c "from grpo_ablate.report.regression import parse_tolerances; print(parse_tolerances(['reward_per_hour=10%']))"

The rule (commands/compare.py's docstring gives the command's whole contract): for each tracked metric and each
arm A completed, worse beyond tolerance in the metric's direction, or no completed trial in B at all, is a
regression; better beyond it is "better"; a change within it either way is "within tolerance". A metric's
direction is the study's objective direction, else the registry's (`vocab.METRICS`). Arms are matched on their
key (`vocab.Arm.key`). Reading the files and printing the table stay in the command.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from grpo_ablate.core.vocab import METRICS, Arm

__all__ = ["DEFAULT_TOLERANCE", "CompareError", "Source", "Row", "parse_tolerances", "tracked_tolerances",
           "compare_summaries", "study_differences", "compare_verdicts", "is_regression"]

DEFAULT_TOLERANCE = 0.10


class CompareError(Exception):
    """Bad input: says what was given and what would work."""


@dataclass(frozen=True)
class Source:
    """One side of the comparison: its summary and, for study files, their tolerances."""

    label: str
    summary: dict[str, Any]
    tolerances: dict[str, float]


@dataclass(frozen=True)
class Row:
    arm: str
    key: str
    metric: str
    direction: str
    a: float | None
    b: float | None
    change: float | None  # relative change of the mean, (b - a) / |a|
    worsening: float | None  # how much worse in the metric's direction (negative: better)
    tolerance: float
    status: str  # ok (within tolerance either way) | better (beyond it) | REGRESSION | missing | new
    n_a: int | None = None  # seeds behind A's mean
    n_b: int | None = None  # ... and B's


def parse_tolerances(items: Sequence[str]) -> dict[str, float]:
    """'metric=0.1' or 'metric=10%' -> {metric: 0.1}."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise CompareError(f"--tolerance expects METRIC=FRACTION (e.g. reward_per_hour=0.1), got {item!r}")
        try:
            value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise CompareError(f"--tolerance {name}: {text!r} is not a number (e.g. 0.1 or 10%)") from None
        if not math.isfinite(value) or value < 0:
            raise CompareError(f"--tolerance {name}: must be a fraction >= 0, got {text}")
        out[name] = value
    return out


def _key(arm: Mapping[str, Any]) -> str:
    if arm.get("key"):
        return str(arm["key"])
    parsed = Arm.from_mapping(arm)
    if parsed is None:
        raise CompareError(f"an arm of the summary has neither a key nor its three knobs: {dict(arm)}")
    return parsed.key


def _seeds(arm: Mapping[str, Any] | None, metric: str) -> int | None:
    """How many seeds the arm's mean of `metric` rests on (the metric's own n, else the arm's)."""
    if arm is None:
        return None
    m = (arm.get("metrics") or {}).get(metric)
    n = m.get("n") if isinstance(m, Mapping) else None
    n = n if isinstance(n, int) else arm.get("n")
    return int(n) if isinstance(n, int) else None


def _mean(arm: Mapping[str, Any] | None, metric: str) -> float | None:
    if arm is None:
        return None
    m = (arm.get("metrics") or {}).get(metric)
    v = m.get("mean") if isinstance(m, Mapping) else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


_DIRECTIONS = ("maximize", "minimize")


def _direction(metric: str, *summaries: Mapping[str, Any]) -> str:
    """The study's objective direction, else the registry's, else what a summary recorded (older names)."""
    for s in summaries:
        for o in s.get("objectives") or []:
            if isinstance(o, Mapping) and o.get("metric") == metric and o.get("direction") in _DIRECTIONS:
                return str(o["direction"])
    if metric in METRICS:
        direction = METRICS[metric].direction
        if direction is None:
            raise CompareError(f"{metric} is a count, neither better nor worse: it cannot be tracked")
        return direction
    for s in summaries:
        info = (s.get("metrics") or {}).get(metric)
        if isinstance(info, Mapping) and info.get("direction") in _DIRECTIONS:
            return str(info["direction"])
    raise CompareError(f"no direction known for {metric}: neither study optimises it and the registry lacks it")


def tracked_tolerances(a: Source, b: Source, cli: Mapping[str, float]) -> dict[str, float]:
    """A's file, then B's file, then the command line; the objectives at 10% when none is set."""
    tol = {**a.tolerances, **b.tolerances, **cli}
    if tol:
        return tol
    for s in (b.summary, a.summary):
        objs = [o.get("metric") for o in s.get("objectives") or [] if isinstance(o, Mapping) and o.get("metric")]
        if objs:
            return {str(m): DEFAULT_TOLERANCE for m in objs}
    return {"reward_per_hour": DEFAULT_TOLERANCE}


def compare_summaries(a: Mapping[str, Any], b: Mapping[str, Any], tolerances: Mapping[str, float]) -> list[Row]:
    """Every (arm, tracked metric) pair, judged; pure, so tests assert on the rows."""
    a_arms = {_key(x): x for x in a.get("arms") or []}
    b_arms = {_key(x): x for x in b.get("arms") or []}
    known = {m for arms in (a_arms, b_arms) for x in arms.values() for m in (x.get("metrics") or {})}
    unknown = sorted(set(tolerances) - known)
    if unknown:
        raise CompareError(f"unknown metric(s) {unknown}: the summaries have {sorted(known)}")
    if not set(a_arms) & set(b_arms):
        raise CompareError(f"nothing to compare: the two studies share no configuration "
                           f"(A has {sorted(a_arms)}, B has {sorted(b_arms)})")
    rows: list[Row] = []
    for metric, tol in tolerances.items():
        direction = _direction(metric, b, a)
        sign = 1.0 if direction == "maximize" else -1.0
        for key, arm_a in a_arms.items():
            va = _mean(arm_a, metric)
            if va is None:
                continue  # A never measured it: nothing to regress from
            arm_b = b_arms.get(key)
            vb = _mean(arm_b, metric)
            name = str(arm_a.get("arm") or key)
            seeds = (_seeds(arm_a, metric), _seeds(arm_b, metric))
            if vb is None:
                rows.append(Row(name, key, metric, direction, va, None, None, None, tol, "missing", *seeds))
                continue
            if va != 0:
                change = (vb - va) / abs(va)
                worsening = -sign * change
            else:
                change = None
                worsening = 0.0 if vb == va else (-math.inf if sign * vb > 0 else math.inf)
            # the tolerance is the noise band both ways: a change inside it is neither better nor worse
            if worsening > tol + 1e-12:
                status = "REGRESSION"
            elif worsening < -tol - 1e-12:
                status = "better"
            else:
                status = "ok"
            rows.append(Row(name, key, metric, direction, va, vb, change, worsening, tol, status, *seeds))
        for key, arm_b in b_arms.items():
            if key not in a_arms and _mean(arm_b, metric) is not None:
                rows.append(Row(str(arm_b.get("arm") or key), key, metric, direction, None, _mean(arm_b, metric),
                                None, None, tol, "new", None, _seeds(arm_b, metric)))
    if not any(r.status != "new" for r in rows):  # a gate that checked nothing must not pass
        raise CompareError(f"nothing was checked: A has no completed value of {sorted(tolerances)} on a configuration "
                           f"B shares ({sorted(set(a_arms) & set(b_arms))}); are these two runs of the same study?")
    return rows


def _objectives(s: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    return [(o.get("metric"), o.get("direction")) for o in s.get("objectives") or [] if isinstance(o, Mapping)]


def _space(s: Mapping[str, Any]) -> str | None:
    space = s.get("space")
    return None if space is None else json.dumps(space, sort_keys=True)


def study_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(how A and B differ as studies: name, objectives, search space; notes on what could not be checked)."""
    out, notes = [], []
    if a.get("study") != b.get("study"):
        out.append(f"study name {a.get('study')!r} vs {b.get('study')!r}")
    if _objectives(a) != _objectives(b):
        shown = [", ".join(f"{m} ({d})" for m, d in _objectives(s)) or "none" for s in (a, b)]
        out.append(f"objectives [{shown[0]}] vs [{shown[1]}]")
    sa, sb = _space(a), _space(b)
    if sa is not None and sb is not None and sa != sb:
        out.append(f"search space {sa} vs {sb}")
    elif sa is None or sb is None:
        notes.append(f"{'A' if sa is None else 'B'}'s summary does not record its search space (written before it "
                     "was): compared on name and objectives only")
    return out, notes


def compare_verdicts(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any] | None:
    """Both summaries' answers and whether they agree (same kind, same recommended arm); None if either lacks one."""
    va, vb = a.get("verdict"), b.get("verdict")
    if not isinstance(va, Mapping) or not isinstance(vb, Mapping):
        return None

    def ident(v: Mapping[str, Any]) -> tuple[Any, Any]:
        rec = v.get("recommended")
        return v.get("kind"), rec.get("key") if isinstance(rec, Mapping) else None

    return {"agree": ident(va) == ident(vb), "a": dict(va), "b": dict(vb)}


def is_regression(r: Row) -> bool:
    """What fails the gate: worse beyond tolerance, or no completed trial in B where A had one."""
    return r.status in ("REGRESSION", "missing")
