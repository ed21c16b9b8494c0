"""The report as a person sees it: headless Chromium loads it, every image decodes, nothing errs.

    pytest -m slow tests/test_report_chromium.py     # screenshots: $GRPO_ABLATE_ARTIFACTS or the tmp dir

Uses Debian's chromium (installed by .ci/run) over the DevTools protocol (tests/_cdp.py), so
the page keeps its no-script policy while the test still sees console errors and image state.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from _cdp import Browser, find_chromium
from _report_fixtures import STUDY_NAME, XSS, make_study
from grpo_ablate.report import write_outputs
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.records import load_trials

pytestmark = pytest.mark.slow

SECTIONS = ["answer", "warnings", "setup", "definitions", "plots", "configurations", "prompts", "trials", "exports"]

CHECKS = """(() => {
  const imgs = Array.from(document.images).map(i => ({
    id: i.closest('figure') ? i.closest('figure').id : '', complete: i.complete,
    w: i.naturalWidth, h: i.naturalHeight, shown: i.getBoundingClientRect().width }));
  const sections = %s.map(id => {
    const el = document.getElementById(id);
    return {id, present: !!el, height: el ? el.getBoundingClientRect().height : 0};
  });
  return {
    title: document.title,
    imgs, sections,
    scripts: document.scripts.length,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    promptText: (document.getElementById('prompts') || {innerText: ''}).innerText,
    answer: (document.querySelector('#answer .rec') || {innerText: ''}).innerText,
    skipped: document.querySelectorAll('ul.skipped li').length,
  };
})()"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if find_chromium() is None:
        reason = "needs chromium (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):  # as tests/conftest.py: CI must not skip
            pytest.fail(f"required under CI but unavailable: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("chromium")
    storage, out = make_study(root, objectives=(("reward_per_hour", "maximize"), ("peak_memory_mb", "minimize")))
    attrs, frozen = load_trials(storage, STUDY_NAME)
    data = build_report_data(STUDY_NAME, attrs, frozen, storage_url=storage)
    html = write_outputs(data, out / "report.html")["html"]
    shots = Path(os.environ.get("GRPO_ABLATE_ARTIFACTS") or root / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    with Browser(root / "profile", width=1280, height=2000) as browser:
        browser.open(html.resolve().as_uri())
        result = browser.evaluate(CHECKS % SECTIONS)
        errors = browser.errors()
        browser.screenshot(shots / "report.png")  # what a 1280x2000 laptop window shows first
        browser.screenshot(shots / "report-full.png", full_page=True)
        pdf = browser.pdf()
    print(f"screenshots: {shots / 'report.png'} {shots / 'report-full.png'}")
    return {"result": result, "errors": errors, "pdf": pdf, "shots": shots, "data": data}


def test_loads_without_console_errors(page):
    assert page["errors"] == []
    assert page["result"]["title"] == f"GRPO ablation: {STUDY_NAME}"
    assert page["result"]["scripts"] == 0


def test_every_image_decodes(page):
    imgs = page["result"]["imgs"]
    assert len(imgs) == 10
    bad = [i for i in imgs if not (i["complete"] and i["w"] > 0 and i["h"] > 0)]
    assert bad == []
    assert all(i["shown"] >= 300 for i in imgs), imgs  # legible, not thumbnails


def test_key_sections_are_present_and_visible(page):
    assert [s["id"] for s in page["result"]["sections"] if not (s["present"] and s["height"] > 0)] == []
    assert page["result"]["answer"].startswith("Use num_generations=4")


def test_a_complete_study_draws_every_plot(page):
    assert page["result"]["skipped"] == 0


def test_model_text_shows_as_text(page):
    assert XSS in page["result"]["promptText"]


def test_fits_a_laptop_window(page):
    assert page["result"]["overflow"] <= 0  # wide tables scroll inside their own box


def test_prints(page):
    pdf = page["pdf"]
    assert pdf.startswith(b"%PDF") and len(pdf) > 20_000
    assert pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 3


def test_screenshots_saved(page):
    for name in ("report.png", "report-full.png"):
        png = (page["shots"] / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    if os.environ.get("GRPO_ABLATE_ARTIFACTS") is None:
        shutil.rmtree(page["shots"], ignore_errors=True)
