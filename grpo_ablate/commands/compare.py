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
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from grpo_ablate.commands.common import load_study  # the launcher registry's check too
from grpo_ablate.config import StudyError
from grpo_ablate.files.summary_file import read_summary
from grpo_ablate.report import study_summary
from grpo_ablate.report.regression import (CompareError, Row, Source, compare_summaries,
                                           compare_verdicts, is_regression, parse_tolerances, study_differences,
                                           tracked_tolerances)
from grpo_ablate.report.text import fmt, fmt_interval, fmt_p
from grpo_ablate.core.vocab import Arm

__all__ = ["add_parser", "run", "compare_main", "load_summary", "print_table"]

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2


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
    regressions = [r for r in rows if is_regression(r)]
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
