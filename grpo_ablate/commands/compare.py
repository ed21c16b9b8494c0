"""Compare two studies arm by arm; a non-zero exit when a tracked metric got worse (nightly CI).

    grpo-ablate compare runs/last-night/summary.json runs/tonight/summary.json --tolerance reward_per_hour=0.1
    grpo-ablate compare accepted/summary.json studies/nightly.yaml --json

A and B are each a summary.json (written beside every report), a run folder holding one, or a
study YAML: its output_dir's summary.json, or, when the report was never written, a summary
computed from the study's storage on the spot.

What is tracked, and how much worse is allowed (relative to A's mean, 0.1 = 10%):
1. `compare.tolerances` of A's study file, overridden by B's (when they are study files);
2. overridden by `--tolerance metric=fraction` (also `metric=10%`);
3. if none of these names a metric, the study's objectives (B's, else A's) at 10%: a
   nightly run should at least not lose ground on what the study optimises, and 10% is
   about the seed-to-seed spread of short GRPO runs.

Arms are matched on their key (`vocab.Arm.key`), not their names, so two studies with
different baselines still line up. A metric's direction is the study's objective direction,
else the registry's (`vocab.METRICS`). For each tracked metric and each arm A completed:
worse beyond tolerance in that direction, or no completed trial in B at all, is a
regression; better beyond it is "better"; a change within it either way is "within
tolerance" (noise, not news). Each row shows the seeds behind both means. Arms only in B are
listed as new.

Two different studies are refused (exit 2) unless `--allow-different` says so: A and B must
have the same study name, the same objectives (metric and direction, in order) and the same
search space (summary.json's "space"; a summary written before it was recorded is compared on
name and objectives alone, and the output says so). Comparing two unrelated studies used to
say "the answers agree ... no regression" on whatever configurations they happened to share.

The two answers (summary.json's "verdict": kind, recommended configuration, the comparison and
p-value behind it) are printed side by side with whether they agree; a changed answer is news,
not a regression, so it does not change the exit code.

Exit codes: 0 no regression, 1 regression, 2 bad input (unreadable file, bad tolerance,
unknown metric, nothing in common).
"""

from __future__ import annotations

import argparse

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from grpo_ablate.commands.common import load_study  # the launcher registry's check too
from grpo_ablate.config import StudyError
from grpo_ablate.files.summary_file import read_summary
from grpo_ablate.report import study_summary
from grpo_ablate.report.text import fmt, fmt_interval, fmt_p
from grpo_ablate.vocab import METRICS, Arm

__all__ = ["add_parser", "run", "compare_main", "compare_summaries", "compare_verdicts", "study_differences", "load_summary", "parse_tolerances", "Row",
           "CompareError", "DEFAULT_TOLERANCE"]

DEFAULT_TOLERANCE = 0.10
EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2


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


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return read_summary(path)
    except FileNotFoundError:
        raise CompareError(f"not found: {path}") from None
    except StudyError as e:
        raise CompareError(str(e)) from None


def load_summary(spec: str) -> Source:
    """A summary.json, a run folder with one, or a study YAML (see the module docstring)."""
    p = Path(spec)
    if p.is_dir():
        return Source(str(p), _read_json(p / "summary.json"), {})
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            study = load_study(p)
        except StudyError as e:
            raise CompareError(str(e)) from None
        tolerances = dict(study.file.compare.tolerances)
        summary_path = study.output_dir / "summary.json"
        if summary_path.exists():
            return Source(str(p), _read_json(summary_path), tolerances)
        try:
            return Source(str(p), study_summary(study), tolerances)
        except StudyError as e:
            why = "; ".join(pr.message for pr in e.problems)
            raise CompareError(f"{p}: no summary.json in {study.output_dir}, and {why}") from None
    if not p.exists():
        raise CompareError(f"not found: {p} (expected a summary.json, a run folder or a study YAML)")
    return Source(str(p), _read_json(p), {})


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


def _verdict_line(v: Mapping[str, Any]) -> str:
    rec = v.get("recommended")
    key = rec.get("key") if isinstance(rec, Mapping) else None
    stats = []
    if v.get("comparison"):
        stats.append(str(v["comparison"]))
    if v.get("ci95"):
        stats.append(f"95% interval {fmt_interval(tuple(v['ci95']))}")
    if v.get("p_value") is not None:
        stats.append(fmt_p(v["p_value"]))
    return f"{v.get('kind')}, recommends {key or '–'} on {v.get('metric')}" + (f" ({', '.join(stats)})" if stats else "")


def _is_regression(r: Row) -> bool:
    return r.status in ("REGRESSION", "missing")


def print_table(rows: Sequence[Row], a: Source, b: Source, out: TextIO) -> None:
    head = ("arm", "metric", "A", "B", "seeds A/B", "change", "tolerance", "status")
    body = []
    for r in rows:
        change = "–" if r.change is None else f"{r.change * 100:+.1f}%"
        arrow = "↑" if r.direction == "maximize" else "↓"
        status = {"missing": "no completed trial in B", "ok": "within tolerance"}.get(r.status, r.status)
        seeds = f"{fmt(r.n_a)}/{fmt(r.n_b)}"
        body.append((r.arm, f"{r.metric} {arrow}", fmt(r.a), fmt(r.b), seeds, change, f"±{r.tolerance * 100:g}%",
                     status))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    print(f"A: {a.label} ({a.summary.get('study', '?')})", file=out)
    print(f"B: {b.label} ({b.summary.get('study', '?')})", file=out)
    for line in (head, tuple("-" * w for w in widths), *body):
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip(), file=out)
    for metric, ba in (a.summary.get("best") or {}).items():
        bb = (b.summary.get("best") or {}).get(metric)
        if isinstance(ba, Mapping) and isinstance(bb, Mapping) and ba.get("params") != bb.get("params"):
            print(f"note: the best configuration for {metric} changed: {_arm_label(ba)} -> {_arm_label(bb)}", file=out)
    verdicts = compare_verdicts(a.summary, b.summary)
    if verdicts is not None:
        print(f"answer A: {_verdict_line(verdicts['a'])}", file=out)
        print(f"answer B: {_verdict_line(verdicts['b'])}", file=out)
        print(f"the answers {'agree' if verdicts['agree'] else 'DIFFER'}", file=out)


def _arm_label(best: Mapping[str, Any]) -> str:
    params = best.get("params")
    arm = Arm.from_mapping(params) if isinstance(params, Mapping) else None
    return arm.label if arm is not None else str(params)


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`compare`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("compare", help="deltas between two studies; non-zero exit on a regression")
    p.add_argument("a", help="the accepted baseline: a summary.json, a run folder or a study file")
    p.add_argument("b", help="the candidate: a summary.json, a run folder or a study file")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=FRACTION",
                   help="allowed relative worsening, e.g. reward_per_hour=0.1; repeatable")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--allow-different", action="store_true",
                   help="compare two studies that differ in name, objectives or search space (refused otherwise)")
    p.set_defaults(func=run)


def run(args: Any) -> int:
    """`grpo-ablate compare` from its parsed arguments."""
    return compare_main(args.a, args.b, args.tolerance, as_json=args.json, allow_different=args.allow_different)


def compare_main(a: str, b: str, tolerances: list[str], as_json: bool = False,
                 out: TextIO | None = None, err: TextIO | None = None, *, allow_different: bool = False) -> int:
    """The `grpo-ablate compare` command; returns its exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        cli = parse_tolerances(tolerances)
        sa, sb = load_summary(a), load_summary(b)
        different, notes = study_differences(sa.summary, sb.summary)
        if different and not allow_different:
            raise CompareError(f"{sa.label} and {sb.label} are not the same study: " + "; ".join(different)
                               + ". Compare runs of one study, or pass --allow-different to compare them anyway.")
        notes = [f"A and B are different studies ({'; '.join(different)}), compared as asked (--allow-different)"
                 ] * bool(different) + notes
        tol = tracked_tolerances(sa, sb, cli)
        rows = compare_summaries(sa.summary, sb.summary, tol)
    except CompareError as e:
        print(f"grpo-ablate compare: {e}", file=err)
        return EXIT_USAGE
    regressions = [r for r in rows if _is_regression(r)]
    if as_json:
        payload = {
            "ok": not regressions,
            "a": sa.label,
            "b": sb.label,
            "tolerances": tol,
            "regressions": len(regressions),
            "different_studies": different,
            "notes": notes,
            "verdicts": compare_verdicts(sa.summary, sb.summary),
            "rows": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(r).items()}
                     for r in rows],
        }
        print(json.dumps(payload, indent=2), file=out)
    else:
        print_table(rows, sa, sb, out)
        for note in notes:
            print(f"note: {note}", file=out)
        checked = sum(1 for r in rows if r.status != "new")
        if regressions:
            print(f"compare: {len(regressions)} regression(s) beyond tolerance in {checked} check(s)", file=out)
        else:
            print(f"compare: no regression in {checked} check(s)", file=out)
    return EXIT_REGRESSION if regressions else EXIT_OK
