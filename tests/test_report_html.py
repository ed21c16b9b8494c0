"""The report page as HTML: untrusted text is escaped, the page is self-contained, the sections are there."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from _report_fixtures import STUDY_NAME, XSS, make_study
from grpo_ablate.report import write_outputs
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.html import render_html
from grpo_ablate.report.figure import Figure
from grpo_ablate.report.plots import EVAL_PLOTS, PER_PROMPT_PLOTS, PLOTS, all_figures
from grpo_ablate.report.records import load_trials

SECTIONS = ["answer", "warnings", "setup", "definitions", "plots", "configurations", "prompts", "trials", "exports"]
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


class Page(HTMLParser):
    """Collects what the assertions need: tags, ids, image sources, links, text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.imgs: list[dict[str, str | None]] = []
        self.links: list[str] = []
        self.metas: list[dict[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "img":
            self.imgs.append(a)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "meta":
            self.metas.append(a)

    def handle_data(self, data):
        self.text.append(data)


def _parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    storage, out = make_study(root, objectives=(("reward_per_hour", "maximize"), ("peak_memory_mb", "minimize")))
    attrs, frozen = load_trials(storage, STUDY_NAME)
    data = build_report_data(STUDY_NAME, attrs, frozen, storage_url=storage)
    paths = write_outputs(data, out / "report.html")
    return data, paths["html"].read_text(encoding="utf-8")


def test_untrusted_text_is_escaped_and_no_script_exists(report):
    _, html = report
    assert XSS not in html
    assert "<script" not in html.lower()
    page = _parse(html)
    assert "script" not in page.tags
    text = "".join(page.text)
    # the prompt, the completions, the failure reason and the study's model name all show as text
    assert text.count(XSS) >= 4
    assert html.count(ESCAPED) >= 4


def test_page_is_self_contained_and_forbids_scripts(report):
    _, html = report
    page = _parse(html)
    csp = [m for m in page.metas if (m.get("http-equiv") or "").lower() == "content-security-policy"]
    assert csp and "default-src 'none'" in csp[0]["content"] and "script-src" not in csp[0]["content"]
    assert "http://" not in html and "https://" not in html
    for link in page.links:
        assert link.startswith("#") or "/" not in link, link  # anchors or the exports beside the page


def test_every_image_is_an_inline_png(report):
    _, html = report
    page = _parse(html)
    assert len(page.imgs) >= 9
    for img in page.imgs:
        src = img["src"] or ""
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        assert img.get("alt")


def test_key_sections_and_figures_are_present(report):
    data, html = report
    page = _parse(html)
    assert set(SECTIONS) <= page.ids
    assert {f"fig-{fid}" for fid in ("training", "reward-time", "reward-tokens", "reward-per-hour", "stability",
                                     "throughput-memory", "zero-spread", "heatmap", "pareto", "importance",
                                     "history")} <= page.ids
    assert data.recommendation.split(":")[0] in html
    for href in ("trials.csv", "steps.csv", "prompts.csv", "summary.json"):
        assert href in page.links
    for kind in ("near_duplicates", "truncated", "zero_spread", "oom", "failed"):
        assert f'data-kind="{kind}"' in html


def test_all_plots_draw_for_a_complete_study(report):
    data, _ = report
    figs = all_figures(data)
    # a planned ablation answers with its effects table; the model-based importance ranking is left out
    assert [f.id for f in figs if f.uri is None] == ["importance"]
    assert len(figs) == len(PLOTS) - len(EVAL_PLOTS) - len(PER_PROMPT_PLOTS)  # no held-out evaluation, no per-prompt G


def test_missing_data_skips_plots_with_a_note(tmp_path):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = str(tmp_path / "study.journal")
    optuna.create_study(study_name="empty", storage=JournalStorage(JournalFileBackend(path)))
    attrs, frozen = load_trials(path, "empty")
    data = build_report_data("empty", attrs, frozen)
    figs = all_figures(data)
    assert all(f.uri is None and f.note for f in figs)
    html = render_html(data, figs)
    assert "Not drawn" in html and "No configuration completed yet" in html


def test_a_plot_that_raises_becomes_a_note(report):
    data, _ = report

    def plot_broken(_data) -> Figure:
        raise ValueError("boom <b>")

    (fig,) = all_figures(data, [plot_broken])
    assert fig.uri is None and "ValueError: boom <b>" in (fig.note or "")
    html = render_html(data, [fig])
    assert "boom &lt;b&gt;" in html


def test_summary_and_page_agree(report, tmp_path):
    data, html = report
    paths = write_outputs(data, tmp_path / "r.html")
    summary = json.loads(Path(paths["summary_json"]).read_text())
    assert summary["recommendation"] == data.recommendation


def test_adaptive_sampler_study_pools_curves_and_bins_temperatures(tmp_path):
    from _report_fixtures import make_tpe_study

    storage, _ = make_tpe_study(tmp_path)
    attrs, frozen = load_trials(storage, "tpe")
    data = build_report_data("tpe", attrs, frozen)
    assert all(a.name == a.config.label for a in data.arms)  # "tpe" is a sampler, not an arm name
    assert len(data.arms) > 8 and data.baseline is None
    figs = {f.id: f for f in all_figures(data)}
    assert [fid for fid, f in figs.items() if f.uri is None] == ["pareto"]
    assert "pooled by num_generations" in figs["reward-time"].caption
    # one seed per configuration: something to try, not a tested answer
    assert data.recommendation.startswith("Try ") and "baseline was not run" in data.recommendation
    assert [w.kind for w in data.warnings] == ["single_seed", "no_baseline"]


def test_the_training_curves_draw_every_metric_trl_logged_per_configuration(report, monkeypatch):
    """reward, learning rate, entropy, completion length, clip ratio and zero-spread share from steps.csv, one line per
    configuration in each panel; KL is left out (and said so) when the trials did not log it (beta 0)."""
    from grpo_ablate.report import curves

    drawn = []
    monkeypatch.setattr(curves, "png", lambda fig: drawn.append(fig) or "data:image/png;base64,")
    data, _ = report
    fig = curves.plot_training_curves(data)
    panels = [ax for ax in drawn[0].axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["reward", "learning rate", "entropy", "completion length",
                                                 "zero-spread share"]
    assert "Not logged by these trials: KL (TRL logs KL only when beta is not 0), clip ratio." in fig.caption
    done = {a.title for a in data.arms if a.n > 0}
    assert {line.get_label().rsplit(" (", 1)[0] for line in panels[1].get_lines()} == done
    assert fig.section == "training" and fig.wide


def test_the_optimisation_history_draws_no_best_single_trial(report, monkeypatch):
    """A single trial is one seed: the page never draws "the best so far" the answer tells users not to read."""
    from grpo_ablate.report import plots

    drawn = []
    monkeypatch.setattr(plots, "png", lambda fig: drawn.append(fig) or "data:image/png;base64,")
    fig = plots.plot_history(report[0])
    labels = [label for ax in drawn[0].axes for label in ax.get_legend_handles_labels()[1]]
    assert labels and not any("best" in label for label in labels) and "best single trial so far" not in fig.caption
    assert all(not ax.get_lines() for ax in drawn[0].axes)  # points only: no step line through the trials


def test_the_page_leads_with_the_answer_then_the_curves_then_the_tables(report):
    _, html = report
    at = {name: html.index(f'id="{name}"') for name in ("answer", "training", "compared", "configurations", "warnings",
                                                       "plots", "setup")}
    assert sorted(at, key=at.get) == ["answer", "training", "compared", "configurations", "warnings", "plots", "setup"]
