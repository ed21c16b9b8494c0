"""The report's files for machines: summary.json (what `grpo-ablate compare` and CI read),
trials.csv, steps.csv (+ steps.parquet) and prompts.csv, written beside report.html. A CSV text
cell that a spreadsheet would run as a formula (it starts with = + - @, a tab or a carriage
return) is written with a leading apostrophe (`csv_text`).

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
from grpo_ablate.report.summary import summary_dict; print(summary_dict(collect(load_study('studies/tiny-cpu.yaml')))['best'])"
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablate.report.data import ReportData
from grpo_ablate.report.records import masked, trial_columns

__all__ = ["summary_dict", "trials_frame", "prompts_frame", "write_exports", "atomic_write", "csv_text",
           "spreadsheet_safe", "EXPORTS", "FORMULA_STARTS"]

# Files written beside the page, with what each is for (the page links them).
EXPORTS = {
    "trials.csv": "one row per trial: knobs, outcome, objective values, metrics",
    "steps.csv": "every number each trial logged, one row per optimizer step",
    "prompts.csv": "every prompt ranked by within-group reward variance (for labelling)",
    "summary.json": "the answer and the statistics behind it, best configuration, per-arm statistics, deltas vs baseline (read by `grpo-ablate compare`)",
}


def summary_dict(data: ReportData) -> dict[str, Any]:
    """summary.json: the stable contract `grpo-ablate compare` and CI read."""
    best: dict[str, Any] = {}
    for name, b in data.best.items():
        best[name] = None if b is None else {
            "arm": b.arm.name,
            "params": b.arm.config.as_dict(),
            "mean": b.stat.mean,
            "ci95": list(b.stat.ci95) if b.stat.ci95 else None,
            "n": b.stat.n,
        }
    arms = [{
        "arm": a.name,
        "key": a.config.key,
        **a.config.as_dict(),
        "n": a.n,
        "is_baseline": a.is_baseline,
        "outcomes": a.outcomes,
        "metrics": {m: s.as_dict() for m, s in a.metrics.items()},
        "targets": {m: t.as_dict() for m, t in a.targets.items()},  # censored: counts and medians, never means
    } for a in data.arms]
    base = next((a for a in data.arms if a.is_baseline), None)
    return masked({
        "schema": 1,
        "study": data.study_name,
        # whom it belongs to (files/owned.py's fields): compare shows them, a reader never refuses them
        "owner": {"study": data.study_name, "model": (data.config.get("model") or {}).get("name_or_path"),
                  "hardware": data.hardware},
        "generated_at": data.generated_at,
        "objectives": [{"metric": m, "direction": d} for m, d in data.objectives],
        # the study file's search section: `compare` refuses two studies whose spaces differ
        "space": (data.config or {}).get("search"),
        "metrics": {m: {"direction": d.direction, "description": d.description} for m, d in data.metrics.items()},
        "recommendation": data.recommendation,
        # the answer's words and the statistics behind them (comparison, p-value, interval, detectable
        # difference, seeds needed, timing noise): what `compare` and tools/verdict.py read
        "verdict": data.verdict.as_dict() if data.verdict else None,
        "evaluation": {"has_evaluation": data.has_eval, "target": data.target, "target_words": data.target_words},
        "best": best,
        "arms": arms,
        "baseline": ({"arm": base.name, **base.config.as_dict()} if base else None),
        "deltas_vs_baseline": {arm: {m: d.as_dict() for m, d in row.items()} for arm, row in data.deltas.items()},
        "warnings": [w.as_dict() for w in data.warnings],
        "versions": data.versions,
        "hardware": data.hardware,
        "trials": data.counts,
        "gpu_budget": data.gpu_budget,  # study.budget_gpu_hours: spent and left; null without one
        "price": data.price,  # what the trials spent as a multiple of the full run (prefixes counted once)
        # a branched study: the step the arms branched at, and the shared prefixes' compute, counted once
        "branched_at": data.branched_at,
        "shared_prefix": data.shared_prefix,
    })


def trials_frame(data: ReportData) -> pd.DataFrame:
    """trials.csv: one row per trial with its knobs, outcome, objective values and metrics."""
    rows = []
    for r in data.records:
        row = trial_columns(r)
        row.update({
            "state": r.state,
            "reason": r.reason,
            "params": json.dumps(r.params, sort_keys=True),
            "duration_s": r.duration_s,
            "datetime_start": r.datetime_start,
            "trial_dir": str(r.trial_dir) if r.trial_dir else None,
        })
        for i, (m, _) in enumerate(data.objectives):
            row[f"value_{m}"] = r.values[i] if r.values is not None and i < len(r.values) else None
        row.update(r.metrics)
        t = data.targets.get(r.number)
        if t is not None:
            row.update({k: v for k, v in t.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def prompts_frame(data: ReportData) -> pd.DataFrame:
    """prompts.csv: the ranked prompts, each one's example completions as a JSON list."""
    prompts = data.prompts.copy()
    for col in ("example_completions", "example_rewards"):
        if col in prompts:
            prompts[col] = [json.dumps(list(c), ensure_ascii=False) for c in prompts[col]]
    return prompts


# A cell a spreadsheet would read as a formula (or, after a tab or a carriage return, as one): OWASP's
# CSV-injection list. Prompts, completions, failure reasons and user-named columns are model or user text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula gets a leading apostrophe (shown as text,
    the value otherwise unchanged); numbers and everything else pass through as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(frame: pd.DataFrame) -> str:
    """The frame as CSV with every text cell and column name spreadsheet-safe: the one way the
    report writes a CSV, so no export can carry a live formula."""
    safe = frame.rename(columns=lambda c: spreadsheet_safe(str(c)))
    for i in range(len(safe.columns)):
        s = safe.iloc[:, i]
        if pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s):
            safe.isetitem(i, s.map(spreadsheet_safe))
    # CRLF, RFC 4180's line end: the writer quotes a field holding any line-end character, so a bare
    # carriage return inside a prompt cannot split its row (with "\n" alone it went out unquoted)
    return safe.to_csv(index=False, lineterminator="\r\n")


def atomic_write(path: Path, text: str) -> None:
    """Write then rename, so a reader (a browser, CI) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_exports(data: ReportData, folder: Path) -> dict[str, Path]:
    """Every file of EXPORTS (plus steps.parquet when the steps allow it) into folder, by role."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "trials_csv": folder / "trials.csv",
        "steps_csv": folder / "steps.csv",
        "prompts_csv": folder / "prompts.csv",
        "summary_json": folder / "summary.json",
    }
    atomic_write(paths["trials_csv"], csv_text(trials_frame(data)))
    atomic_write(paths["steps_csv"], csv_text(data.steps))
    if not data.steps.empty:
        try:  # parquet keeps dtypes; columns of mixed types (rare) leave only the CSV
            data.steps.to_parquet(folder / "steps.parquet", index=False)
            paths["steps_parquet"] = folder / "steps.parquet"
        except Exception:  # noqa: BLE001 - the CSV already holds every number
            pass
    atomic_write(paths["prompts_csv"], csv_text(prompts_frame(data)))
    atomic_write(paths["summary_json"],
                 json.dumps(_finite(summary_dict(data)), indent=2, allow_nan=False, default=_json_default) + "\n")
    return paths


def _finite(o: object) -> object:
    """NaN/inf become null: summary.json must stay strict JSON for other languages' parsers."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _json_default(o: object) -> object:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()  # type: ignore[no-any-return,attr-defined]
    raise TypeError(f"not JSON serializable: {type(o).__name__}")
