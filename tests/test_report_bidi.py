"""A bidi override (U+202E) in user text stays inside that text in the report (issue 23, cosmetic):
every prompt, completion, reason, name and setting sits in a <bdi> or dir="auto" element."""

from __future__ import annotations

from html.parser import HTMLParser

import _report_fixtures as fx
from grpo_ablate.report import write_outputs
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.records import load_trials

RLO = "\u202e"
VOID = {"br", "img", "meta", "link", "input", "hr", "col", "source", "wbr"}


class _Isolation(HTMLParser):
    """Collects each text run holding an RLO with whether an ancestor isolates it."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, bool]] = []
        self.runs: list[tuple[str, bool, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        self.stack.append((tag, tag == "bdi" or dict(attrs).get("dir") == "auto"))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if RLO in data:
            where = "/".join(t for t, _ in self.stack)
            self.runs.append((where, any(iso for _, iso in self.stack), data[:60]))


def test_every_bidi_override_in_user_text_is_isolated(tmp_path, monkeypatch):
    evil = f"{RLO}gnp.exe {fx.XSS}"
    monkeypatch.setattr(fx, "XSS", evil)  # the fixture's hostile model text, now also a bidi attack
    prompts = [f"{RLO}What is 2+2?", f"{evil} Say hi", "Name a prime."]
    monkeypatch.setattr(fx, "PROMPTS", prompts)
    monkeypatch.setattr(fx, "PROMPT_VAR", dict(zip(prompts, fx.PROMPT_VAR.values())))
    monkeypatch.setattr(fx, "PROMPT_MEAN", dict(zip(prompts, fx.PROMPT_MEAN.values())))
    storage, out = fx.make_study(tmp_path)
    attrs, frozen = load_trials(storage, fx.STUDY_NAME)
    data = build_report_data(f"{fx.STUDY_NAME}{RLO}x", attrs, frozen, storage_url=f"sqlite:///{RLO}x.db")
    html = write_outputs(data, out / "report.html")["html"].read_text(encoding="utf-8")

    parser = _Isolation()
    parser.feed(html)
    kinds = {where.split("/")[-1] for where, _, _ in parser.runs}
    assert len(parser.runs) >= 5 and {"div", "bdi"} <= kinds, parser.runs  # prompts, completions, reasons, names
    leaks = [(where, text) for where, isolated, text in parser.runs if not isolated]
    assert leaks == []
    title = html.split("<title>", 1)[1].split("</title>", 1)[0]
    assert RLO not in title and fx.STUDY_NAME in title
