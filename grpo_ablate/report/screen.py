"""The report's screen section: what the screen predicted before any training, which arms it dropped and why,
and, for a study that is the screen alone, the words that present it as a screen, not a verdict.

    python -c "from grpo_ablate.report.screen import screen_view; help(screen_view)"

Reads screen.json (files/screen_file.py) only; the drop rule and its measured agreement are the screen's own
(preflight/screen_rule.py, docs/screen.md). Pure data out, for the template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_ablate.files.reader import Owner
from grpo_ablate.files.screen_file import Screen, load_screen

__all__ = ["screen_view", "SCREEN_ALONE", "SCREEN_WHAT"]

SCREEN_WHAT = ("Before any training, the screen predicted each configuration's learning signal: the prompts per "
               "optimizer step whose group has reward spread, from the starting model's per-prompt success on the "
               "training prompts (advise), and timed each arm on this hardware (probe). It drops an arm only by a rule "
               "whose drops agreed with training on the CPU tasks (docs/screen.md); a prediction is not a measurement "
               "of held-out reward.")
SCREEN_ALONE = ("This study is a screen, not a verdict: no arm was trained (screen.confirm: false), so nothing here "
                "says which configuration trains best. The screen's table below says which arms it predicts are "
                "dominated and why; the study file's Design comment says what a confirm stage that decides would cost.")


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def screen_view(output_dir: Path, owner: Owner) -> dict[str, Any] | None:
    """The screen section's rows and sentences; None when the study's screen has not run."""
    screen = load_screen(output_dir, owner)
    return None if screen is None else _view(screen)


def _view(screen: Screen) -> dict[str, Any]:
    drops = {d.key: d for d in screen.dropped}
    rows = []
    for r in screen.rows:
        verdict = (f"dropped ({drops[r.key].rule})" if r.key in drops else "trained" if r.candidate and screen.confirm
                   else "kept" if r.candidate else f"not feasible: {r.infeasible}" if r.infeasible else "not an arm")
        rows.append({"label": r.label, "arm": "baseline" if r.baseline else "arm" if r.candidate else "",
                     "zero_spread": _fmt(r.zero_spread, ".0%"), "per_step": _fmt(r.signal_per_step, ".2f"),
                     "seconds": _fmt(r.seconds_per_step, ".3g"), "per_hour": _fmt(r.signal_per_hour, ",.0f"),
                     "memory": _fmt(r.peak_memory_mb, ",.0f"), "verdict": verdict})
    kept = [r.label for r in screen.rows if r.key in screen.kept]
    if not screen.confirm:
        headline = SCREEN_ALONE
    elif len(kept) < 2:
        headline = (f"The screen left {len(kept)} arm to train ({', '.join(kept) or 'none'}): nothing to compare, so "
                    "no confirm stage ran; this is the screen's prediction, not a verdict.")
    else:
        headline = (f"The screen dropped {len(screen.dropped)} arm(s) before training and the confirm stage trained "
                    f"{len(kept)}: {', '.join(kept)}.")
    return {"alone": not screen.confirm or len(kept) < 2, "headline": headline, "what": SCREEN_WHAT, "rows": rows,
            "drops": [d.reason for d in screen.dropped], "notes": list(screen.notes),
            "rules": ", ".join(screen.rules), "ratio": screen.ratio, "seconds": screen.seconds, "gpus": screen.gpus}
