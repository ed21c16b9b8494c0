"""One answer on three surfaces: the report's words on the console, as the study's note in
optuna-dashboard, and report.html as a study artifact there.

    grpo-ablate report studies/tiny-cpu.yaml     # writes the page, then the note and the artifact
    grpo-ablate dashboard studies/tiny-cpu.yaml  # opens on the study's note; report.html is attached

Everything here reads summary.json's dict (report.summary.summary_dict), so the console, the note
and the page cannot drift apart: the same three lines lead (report/wording.py), the details follow
once. The note also ranks the arms by their means over seeds (`arms_table`): optuna-dashboard's
own "Best Trial" is one seed's run, and the note says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from grpo_ablate.report.text import fmt, fmt_p
from grpo_ablate.report.wording import bounded_interval
from grpo_ablate.storage.store import open_artifact_store, open_storage
from grpo_ablate.core.vocab import Arm, metric

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import StudyConfig

__all__ = ["answer_lines", "arms_table", "note_markdown", "publish", "publish_to", "say_answer", "REPORT_ARTIFACT"]

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


def missing_lines(summary: Mapping[str, Any]) -> list[str]:
    """A branching study whose seed lost its prefix for good: the answer rests on the other seeds, and says so."""
    missing = (summary.get("shared_prefix") or {}).get("missing_seeds") or []
    if not missing:
        return []
    kept = [s for s in (summary.get("shared_prefix") or {}).get("seeds") or () if s not in {m["seed"] for m in missing}]
    return [f"Seed {m['seed']} is missing: its prefix (trial {m['trial']}) {m['outcome']} ({m['reason']}), so none of "
            f"its arms ran; this answer rests on seed(s) {', '.join(map(str, kept)) or 'none'} only." for m in missing]


def answer_lines(summary: Mapping[str, Any], html_path: str | Path | None = None) -> list[str]:
    """What the console prints: the answer's three lines first, then the details once, the other
    objectives' best arm means, and where the page is."""
    lines, detail = _answer(summary)
    out = ["Answer:"] + [f"  {x}" for x in lines] + [f"  {x}" for x in missing_lines(summary)]
    if detail:
        out += ["Details:"] + [f"  - {x}" for x in detail]
    out += _best_lines(summary)
    if html_path is not None:
        out.append(f"Report: {html_path}")
    return out


def arms_table(summary: Mapping[str, Any]) -> list[str]:
    """The arms as the answer ranks them, a Markdown table: each arm's mean over its seeds on the
    answer's metric, its 95% interval (cut to the metric's range; past [0, 1] on a reward that
    declares no range, marked and said why), the seeds, the probability of being within
    min_effect of the best, and its call against the baseline. Best first."""
    verdict = summary.get("verdict") or {}
    name = verdict.get("metric")
    if not name:
        return []
    sel = verdict.get("selection") or {}
    p_within = sel.get("p_within") or {}
    calls = {a.get("arm"): a for a in verdict.get("arms") or ()}
    m = metric(name)
    arms = [a for a in summary.get("arms") or () if ((a.get("metrics") or {}).get(name) or {}).get("mean") is not None]
    means = tuple(float(a["metrics"][name]["mean"]) for a in arms)
    rows, marked = [], False
    for a in arms:
        st = a["metrics"][name]
        call = calls.get(a["arm"])
        against = ("(the baseline)" if a.get("is_baseline") else
                   (call.get("call", "") + (f" (adjusted {fmt_p(call['p_adjusted'])})"
                                            if call.get("p_adjusted") is not None else "")) if call else "–")
        p = p_within.get(a["arm"])
        ci = st.get("ci95")
        interval = "–"
        if ci:
            interval = bounded_interval(tuple(ci), m.low, m.high)
            if bounded_interval(tuple(ci), m.low, m.high, means) != interval:  # past [0, 1], not cut: say so once
                interval, marked = interval + " *", True
        arm = Arm.from_mapping(a)
        rows.append((st["mean"], f"| {arm.label if arm else a['arm']} | {fmt(st['mean'])} | {interval} | "
                     f"{st.get('n', '')} | {'–' if p is None else f'{p:.2f}'} | {against} |"))
    if not rows:
        return []
    rows.sort(key=lambda r: -r[0] if verdict.get("direction") != "minimize" else r[0])
    eps = sel.get("min_effect")
    return ([f"### Arms: {m.label}, mean over seeds (what the answer ranks)", "",
             f"| configuration | mean | 95% interval | seeds | P(within {eps:.3g} of the best), model posterior | "
             f"against the baseline |"
             if eps is not None else "| configuration | mean | 95% interval | seeds | P(within min_effect of the best), "
             "model posterior | against the baseline |",
             "|---|---|---|---|---|---|", *(r for _, r in rows), ""]
            + (["\\* not cut to [0, 1]: the reward functions declare no range.", ""] if marked else []))


def note_markdown(summary: Mapping[str, Any], html_path: str | Path | None = None) -> str:
    """The study's note (the dashboard's first screen): the three lines in bold, then the details,
    the other objectives' best arm means, and what the dashboard's own "Best Trial" is."""
    lines, detail = _answer(summary)
    parts = [f"## Answer (from the report, {summary.get('generated_at', '')})", ""]
    for line in lines:
        parts += [f"**{line}**", ""]
    parts += arms_table(summary)
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


def publish(study: "StudyConfig", paths: Mapping[str, Path]) -> None:
    """Write the answer as the study's note and attach report.html to the study (replacing an older copy).

    A study that is not in its storage (a report of a study copied elsewhere) is left alone.
    """
    import optuna  # Optuna loads when a report publishes, not when `run` imports this module to print the answer

    try:
        ostudy = optuna.load_study(study_name=study.study.name, storage=open_storage(study.storage_url))
    except KeyError:
        return
    publish_to(ostudy, open_artifact_store(study.output_dir), paths)


def publish_to(ostudy: "optuna.Study", store: Any, paths: Mapping[str, Path]) -> None:
    """The note and the artifact on an open study. One report artifact per study: a newer report
    overwrites the stored file under the same id (Optuna has no public way to drop an artifact's
    record, so re-uploading would pile up copies)."""
    # lazy: as above, only a report that publishes pays Optuna
    from optuna.artifacts import get_all_artifact_meta, upload_artifact
    from optuna_dashboard import save_note  # about a second to import: only a report that publishes pays it

    summary = json.loads(Path(paths["summary_json"]).read_text())
    save_note(ostudy, note_markdown(summary, paths.get("html")))
    html = Path(paths["html"])
    old = [m for m in get_all_artifact_meta(ostudy) if m.filename == html.name]
    if old:
        with html.open("rb") as f:
            store.write(old[0].artifact_id, f)
        return
    upload_artifact(artifact_store=store, file_path=str(html), study_or_trial=ostudy, mimetype="text/html")
