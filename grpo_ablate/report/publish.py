"""One answer on three surfaces: the report's words on the console, as the study's note in
optuna-dashboard, and report.html as a study artifact there.

    grpo-ablate report studies/tiny-cpu.yaml     # writes the page, then the note and the artifact
    grpo-ablate dashboard studies/tiny-cpu.yaml  # the study's page shows the note and report.html

Everything here reads summary.json's dict (report.summary.summary_dict), so the console, the note
and the page cannot drift apart: they are the same words. A best value is always an arm's mean
over its seeds (summary.json's "best"), never one lucky seed's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from grpo_ablate.report.text import fmt, fmt_interval
from grpo_ablate.storage import open_artifact_store, open_storage

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["answer_lines", "note_markdown", "publish", "publish_to", "say_answer", "REPORT_ARTIFACT"]

REPORT_ARTIFACT = "report.html"  # the study artifact's file name in optuna-dashboard


def _best_lines(summary: Mapping[str, Any]) -> list[str]:
    """Per objective, the best arm by its mean over seeds, with the interval and the seed count."""
    out = []
    for name, b in (summary.get("best") or {}).items():
        if not b or b.get("mean") is None:
            continue
        direction = next((o.get("direction") for o in summary.get("objectives") or () if o.get("metric") == name), "")
        n = int(b.get("n") or 0)
        spread = f", 95% interval {fmt_interval(tuple(b['ci95']), signed=False)}" if b.get("ci95") else ""
        out.append(f"Best mean over seeds on {name} ({direction}): {b.get('arm')}, {fmt(b['mean'])} "
                   f"({n} seed{'s' if n != 1 else ''}{spread}).")
    return out


def answer_lines(summary: Mapping[str, Any], html_path: str | Path | None = None) -> list[str]:
    """The answer in the report's words, the best arm's mean per objective, and where the page is."""
    verdict = summary.get("verdict") or {}
    lines = [f"Answer: {verdict.get('words') or summary.get('recommendation') or 'no answer yet'}"]
    lines += _best_lines(summary)
    if html_path is not None:
        lines.append(f"Report: {html_path}")
    return lines


def note_markdown(summary: Mapping[str, Any], html_path: str | Path | None = None) -> str:
    """The study's note: the answer's headline in bold, its detail, the best arm means, the page."""
    verdict = summary.get("verdict") or {}
    words = verdict.get("words") or summary.get("recommendation") or "No answer yet."
    head = verdict.get("headline") or words
    detail = words[len(head):].strip() if words.startswith(head) else ""
    parts = [f"## Answer (from the report, {summary.get('generated_at', '')})", "", f"**{head}**"]
    if detail:
        parts += ["", detail]
    best = _best_lines(summary)
    if best:
        parts += [""] + [f"- {line}" for line in best]
    parts += ["", "Optuna's \"Best Trial\" is one seed; the figures above are arm means over seeds."]
    if html_path is not None:
        parts += ["", f"The full report is attached below as {REPORT_ARTIFACT} (written to {html_path})."]
    return "\n".join(parts)


def say_answer(paths: Mapping[str, Path], say: Callable[[str], None] = print) -> None:
    """Print the written report's answer on the console (the end of `run`), from its summary.json."""
    summary = json.loads(Path(paths["summary_json"]).read_text())
    for line in answer_lines(summary, paths.get("html")):
        say(line)


def publish(study: "Study", paths: Mapping[str, Path]) -> None:
    """Write the answer as the study's note and attach report.html to the study (replacing an older copy).

    A study that is not in its storage (a report of a study copied elsewhere) is left alone.
    """
    import optuna


    try:
        ostudy = optuna.load_study(study_name=study.study.name, storage=open_storage(study.storage_url))
    except KeyError:
        return
    publish_to(ostudy, open_artifact_store(study.output_dir), paths)


def publish_to(ostudy: "optuna.Study", store: Any, paths: Mapping[str, Path]) -> None:
    """The note and the artifact on an open study. One report artifact per study: a newer report
    overwrites the stored file under the same id (Optuna has no public way to drop an artifact's
    record, so re-uploading would pile up copies)."""
    from optuna.artifacts import get_all_artifact_meta, upload_artifact
    from optuna_dashboard import save_note

    summary = json.loads(Path(paths["summary_json"]).read_text())
    save_note(ostudy, note_markdown(summary, paths.get("html")))
    html = Path(paths["html"])
    old = [m for m in get_all_artifact_meta(ostudy) if m.filename == html.name]
    if old:
        with html.open("rb") as f:
            store.write(old[0].artifact_id, f)
        return
    upload_artifact(artifact_store=store, file_path=str(html), study_or_trial=ostudy, mimetype="text/html")
