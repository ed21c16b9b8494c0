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

from grpo_ablate.report.text import fmt
from grpo_ablate.report.wording import bounded_interval
from grpo_ablate.storage import open_artifact_store, open_storage
from grpo_ablate.vocab import metric

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["answer_lines", "note_markdown", "publish", "publish_to", "say_answer", "REPORT_ARTIFACT"]

REPORT_ARTIFACT = "report.html"  # the study artifact's file name in optuna-dashboard


def _best_lines(summary: Mapping[str, Any]) -> list[str]:
    """Per objective other than the answer's metric (whose mean is in the details), the best arm by its
    mean over seeds, with the interval (cut to the metric's range) and the seed count."""
    out = []
    judged = (summary.get("verdict") or {}).get("metric")
    for name, b in (summary.get("best") or {}).items():
        if not b or b.get("mean") is None or name == judged:
            continue
        direction = next((o.get("direction") for o in summary.get("objectives") or () if o.get("metric") == name), "")
        n = int(b.get("n") or 0)
        m = metric(name)
        spread = (f", 95% interval {bounded_interval(tuple(b['ci95']), m.low, m.high)}" if b.get("ci95") else "")
        out.append(f"Best mean over seeds on {name} ({direction}): {b.get('arm')}, {fmt(b['mean'])} "
                   f"({n} seed{'s' if n != 1 else ''}{spread}).")
    return out


def _answer(summary: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(the answer's lines, its details) from summary.json; an older summary's one paragraph is one line."""
    verdict = summary.get("verdict") or {}
    lines = [str(x) for x in verdict.get("lines") or ()]
    if not lines:
        lines = [verdict.get("words") or summary.get("recommendation") or "No answer yet."]
    return lines, [str(x) for x in verdict.get("details") or ()]


def answer_lines(summary: Mapping[str, Any], html_path: str | Path | None = None) -> list[str]:
    """What the console prints: the answer's three lines first, then the details once, the other
    objectives' best arm means, and where the page is."""
    lines, detail = _answer(summary)
    out = ["Answer:"] + [f"  {x}" for x in lines]
    if detail:
        out += ["Details:"] + [f"  - {x}" for x in detail]
    out += _best_lines(summary)
    if html_path is not None:
        out.append(f"Report: {html_path}")
    return out


def note_markdown(summary: Mapping[str, Any], html_path: str | Path | None = None) -> str:
    """The study's note (the dashboard's first screen): the three lines in bold, then the details,
    the other objectives' best arm means, and what the dashboard's own "Best Trial" is."""
    lines, detail = _answer(summary)
    parts = [f"## Answer (from the report, {summary.get('generated_at', '')})", ""]
    for line in lines:
        parts += [f"**{line}**", ""]
    if detail:
        parts += ["### Details", ""] + [f"- {x}" for x in detail] + [""]
    best = _best_lines(summary)
    if best:
        parts += [f"- {line}" for line in best] + [""]
    parts += ["Optuna's \"Best Trial\" is one seed's best run and its hyperparameter importance is Optuna's fit "
              "over single trials, blind to seeds: neither is the answer, which compares arm means over the same "
              "seeds."]
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
