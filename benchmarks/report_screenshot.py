"""What a user sees first in report.html: open it in Chromium at a laptop's size, check that the first plot lies
inside the first screen, right after the answer box, and save that screen as a PNG (docs/report.md's picture).

    grpo-ablate run studies/tiny-cpu.yaml                      # the demo (its report: runs/tiny-cpu/report.html)
    python benchmarks/report_screenshot.py studies/tiny-cpu.yaml --out docs/report-first-screen.png

tests/test_report_chromium.py runs the same check (`first_screen`) on the demo's answer and on a real run's page.
Needs Chromium (/usr/bin/chromium) and Playwright's Python package (a dev dependency); no network.

Exit codes: 0 the first plot is on the first screen after the answer (the PNG is written), 1 it is not, 2 the study
has no report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 800}  # a laptop's first screen
WAIT_MS = 300_000  # Chromium's start on a loaded 2-core machine can take tens of seconds

# Where the answer box ends and the first plot's image lies, in the first screen's coordinates (no scrolling).
LAYOUT = """() => {
  const box = document.querySelector('#answer .answer');
  const img = document.querySelector('figure img');
  const r = e => { const b = e.getBoundingClientRect(); return {top: b.top, bottom: b.bottom}; };
  return {answer: box ? r(box) : null, plot: img ? {...r(img), id: img.closest('figure').id} : null,
          height: window.innerHeight};
}"""


def first_screen(page: Any) -> dict[str, Any]:
    """The layout of a loaded page (Playwright's Page at VIEWPORT) and whether it holds: the first plot's image lies
    wholly inside the first screen, below the answer box (nothing but its heading between them)."""
    seen = page.evaluate(LAYOUT)
    answer, plot = seen["answer"], seen["plot"]
    seen["ok"] = bool(answer and plot and answer["bottom"] <= plot["top"] and plot["bottom"] <= seen["height"])
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check and save the report's first screen.")
    parser.add_argument("study")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report-first-screen.png")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from grpo_ablate.config import load_study

    html = load_study(args.study, args.sets).output_dir / "report.html"
    if not html.exists():
        print(f"no report at {html}: run `grpo-ablate run {args.study}` first", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=WAIT_MS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(WAIT_MS)
            page.goto(html.resolve().as_uri(), wait_until="load")
            seen = first_screen(page)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out))
        finally:
            browser.close()
    _shrink(args.out)
    print(f"{layout_words(seen)}; screenshot {args.out}")
    return 0 if seen["ok"] else 1


def layout_words(seen: dict[str, Any]) -> str:
    """The check's result in one line (the test's failure message too)."""
    answer, plot = seen.get("answer"), seen.get("plot")
    if not answer or not plot:
        return f"the page has {'no answer box' if not answer else 'no plot'}"
    return (f"answer box ends at {answer['bottom']:.0f} px; the first plot ({plot['id']}) spans {plot['top']:.0f}-"
            f"{plot['bottom']:.0f} px of the {seen['height']} px first screen: {'inside' if seen['ok'] else 'NOT inside'}")


def _shrink(png: Path) -> None:
    """A palette of 128 colours: text, flat colours and a few curves read the same at a fraction of the size."""
    from PIL import Image

    with Image.open(png) as im:
        small = im.convert("RGB").quantize(colors=128)
    small.save(png, optimize=True)


if __name__ == "__main__":
    raise SystemExit(main())
