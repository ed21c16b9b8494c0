"""The ablation report: one self-contained HTML page per study, with CSV/JSON exports beside it.

    grpo-ablate report studies/tiny-cpu.yaml [--out runs/tiny-cpu/report.html]

Also written at the end of every `grpo-ablate run`. The stages: records (storage and trial
folders, evaluation for eval.jsonl) -> arms (seed statistics from stats), verdict (the answer
and how sure it is), findings (warnings that consult the answer), groups, objectives,
importance (plain functions of the records, assembled into `data.ReportData`) -> text (the
words) -> plots (inline PNGs) -> html (one autoescaped template); summary writes summary.json
(with the answer's statistics under "verdict") and the CSVs; publish puts the same answer on the
console and in optuna-dashboard (the study's note, report.html as an artifact).

Nothing is imported here at load time, so `grpo_ablate.report.text.fmt` costs the command
line's tables no pandas, matplotlib or Jinja2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig
    from grpo_ablate.report.data import ReportData

__all__ = ["write_report", "write_outputs", "study_summary"]


def write_outputs(data: "ReportData", html_path: Path) -> dict[str, Path]:
    """The page and its exports for already-extracted data (tests call this directly)."""
    # here, not at the top: every `grpo_ablate.report.*` import runs this file, and the page's
    # matplotlib, jinja2 and pandas load only when a page is written
    from grpo_ablate.report.html import render_html
    from grpo_ablate.report.plots import all_figures
    from grpo_ablate.report.summary import atomic_write, write_exports

    html_path = Path(html_path)
    paths = write_exports(data, html_path.parent)
    paths["html"] = html_path
    atomic_write(html_path, render_html(data, all_figures(data)))
    return paths


def study_summary(study: "StudyConfig") -> dict[str, Any]:
    """summary.json's content, computed from the study's storage without writing the report (compare)."""
    from grpo_ablate.report.data import collect  # deferred as above: data loads pandas and the statistics
    from grpo_ablate.report.summary import summary_dict  # deferred as above: pandas

    return summary_dict(collect(study))


def write_report(study: "StudyConfig", out: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Read the study's storage and trial folders; write report.html and exports.

    `out` is the HTML file (default <output_dir>/report.html); the exports go beside it. A report
    in the study's folder then becomes the study's note in optuna-dashboard, with the page
    attached (report.publish), so the dashboard says what the page says. A report written
    elsewhere only reads the study (report.snapshot): a read-only study can be reported, and its
    note is left as it was.
    Returns the written paths by role: html, trials_csv, steps_csv, steps_parquet (when
    written), prompts_csv, summary_json.
    """
    from grpo_ablate.report.data import collect  # deferred as above
    from grpo_ablate.report.publish import publish  # deferred as above: numpy and scipy
    from grpo_ablate.report.snapshot import storage_snapshot, writes_into_study  # deferred: nothing loads with the package

    html_path = Path(out) if out is not None else study.output_dir / "report.html"
    if writes_into_study(html_path, study.output_dir):
        paths = write_outputs(collect(study), html_path)
        publish(study, paths)
        return paths
    with storage_snapshot(study.storage_url) as url:
        data = collect(study, read_from=url)
    return write_outputs(data, html_path)
