"""The ablation report: one self-contained HTML page per study, plus CSV/JSON exports.

    grpo-ablate report studies/tiny-cpu.yaml [--out runs/tiny-cpu/report.html]

Also written at the end of every `grpo-ablate run`. Three stages, one module each:
data (pure extraction from storage and trial folders, tested on values) -> plots (matplotlib
figures as inline PNGs) -> html (one autoescaped Jinja2 template). `write_report` writes the
page and, beside it, trials.csv, steps.csv (+ steps.parquet), prompts.csv and summary.json.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from grpo_ablate.report.data import ReportData, build_report_data, collect, summary_dict, trials_frame
from grpo_ablate.report.html import render_html
from grpo_ablate.report.plots import all_figures

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["write_report", "write_outputs", "collect", "build_report_data", "render_html", "summary_dict",
           "ReportData"]


def _atomic_write(path: Path, text: str) -> None:
    """Write then rename, so a reader (a browser, CI) never sees half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_outputs(data: ReportData, html_path: Path) -> dict[str, Path]:
    """The page and its exports for already-extracted data (tests call this directly)."""
    html_path = Path(html_path)
    folder = html_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    trials = trials_frame(data)
    paths["trials_csv"] = folder / "trials.csv"
    _atomic_write(paths["trials_csv"], trials.to_csv(index=False))

    paths["steps_csv"] = folder / "steps.csv"
    _atomic_write(paths["steps_csv"], data.steps.to_csv(index=False))
    if not data.steps.empty:
        try:  # parquet keeps dtypes; columns of mixed types (rare) leave only the CSV
            data.steps.to_parquet(folder / "steps.parquet", index=False)
            paths["steps_parquet"] = folder / "steps.parquet"
        except Exception:  # noqa: BLE001 - the CSV already holds every number
            pass

    prompts = data.prompts.copy()
    if "example_completions" in prompts:
        prompts["example_completions"] = [json.dumps(list(c), ensure_ascii=False) for c in prompts["example_completions"]]
    paths["prompts_csv"] = folder / "prompts.csv"
    _atomic_write(paths["prompts_csv"], prompts.to_csv(index=False))

    paths["summary_json"] = folder / "summary.json"
    _atomic_write(paths["summary_json"], json.dumps(_finite(summary_dict(data)), indent=2, allow_nan=False, default=_json_default) + "\n")

    paths["html"] = html_path
    _atomic_write(html_path, render_html(data, all_figures(data)))
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


def write_report(study: "Study", out: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Read the study's storage and trial folders; write report.html and exports.

    `out` is the HTML file (default <output_dir>/report.html); the exports go beside it.
    Returns the written paths by role: html, trials_csv, steps_csv, steps_parquet (when
    written), prompts_csv, summary_json.
    """
    html_path = Path(out) if out is not None else study.output_dir / "report.html"
    return write_outputs(collect(study), html_path)
