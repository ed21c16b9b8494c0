"""What a user sees first in `grpo-ablate dashboard`: open its address in Chromium, check that the
answer's three lines are on the first screen, and save that screen as a PNG (docs/dashboard-answer.png, on the manual's report page).

    python benchmarks/dashboard_screenshot.py studies/tiny-cpu.yaml --out docs/dashboard-answer.png

The study must have been run and reported (`grpo-ablate run` writes the report, its summary.json
and the study's Note). The real command serves the dashboard on a free port; the browser opens
`http://127.0.0.1:PORT/`, the address the command prints, and is sent where the command sends it.
Needs Chromium (/usr/bin/chromium) and Playwright's Python package (a dev dependency).

Exit codes: 0 the first screen shows the three lines (the PNG is written), 1 it does not, 2 the
study has no report or the dashboard never answered.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 800}  # a laptop's first screen
WAIT_S = 300.0  # a loaded 2-core machine starts the dashboard and Chromium in tens of seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(study_args: list[str], port: int) -> subprocess.Popen[str]:
    """`grpo-ablate dashboard` on `port`, once its API answers (raises RuntimeError when it never does)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "dashboard", *study_args, "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=30):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    proc.wait(timeout=30)
    raise RuntimeError(f"the dashboard never answered on port {port}")


def first_screen(url: str, lines: list[str], png: Path | None) -> dict[str, Any]:
    """Open `url` in Chromium at a laptop's size, wait for the answer's first line, and say where the
    browser landed and which of `lines` lie wholly inside the first screen; save it to `png`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=WAIT_S * 1000)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(WAIT_S * 1000)
            page.goto(url)
            page.get_by_text(lines[0]).first.wait_for()
            shown = []
            for line in lines:
                box = page.get_by_text(line).first.bounding_box()
                shown.append(box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"])
            if png is not None:
                png.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(png))
                _shrink(png)
            return {"url": page.url, "shown": shown}
        finally:
            browser.close()


def _shrink(png: Path) -> None:
    """A palette of 64 colours: the screen is text on flat colours, so it reads the same at a third the size."""
    from PIL import Image

    with Image.open(png) as im:
        small = im.convert("RGB").quantize(colors=64)
    small.save(png, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check and save the dashboard's first screen.")
    parser.add_argument("study")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard-answer.png")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from grpo_ablate.config import load_study

    study = load_study(args.study, args.sets)
    summary = study.output_dir / "summary.json"
    if not summary.exists():
        print(f"no report at {summary}: run `grpo-ablate run {args.study}` first", file=sys.stderr)
        return 2
    lines = (json.loads(summary.read_text()).get("verdict") or {}).get("lines") or []
    if not lines:
        print(f"{summary} has no answer lines: rerun `grpo-ablate report {args.study}`", file=sys.stderr)
        return 2
    port = free_port()
    study_args = [args.study] + [x for s in args.sets for x in ("--set", s)]
    try:
        proc = serve(study_args, port)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        seen = first_screen(f"http://127.0.0.1:{port}/", lines, args.out)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    ok = seen["url"].endswith("/note") and all(seen["shown"])
    print(f"landed on {seen['url']}; the three lines on the first screen: {seen['shown']}; screenshot {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
