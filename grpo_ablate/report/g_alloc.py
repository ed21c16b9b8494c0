"""Per-prompt G against estimated difficulty: where the per-prompt arms spent their completions.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report import data, g_alloc; \
print(g_alloc.plot_g_vs_difficulty(data.collect(load_study('studies/tiny-cpu.yaml'))).note)"

Each training step of a per-prompt-G arm (`adaptive:8[2-16]`) records, in metrics.jsonl's
`g_alloc`, one [estimated pass rate, G] pair per prompt of its round: the posterior mean the
allocation saw, and the completions it gave. The plot puts every pair on one axis (pass rate)
against G, with the mean G per tenth of pass rate as a line per arm. Drawn only for studies
that ran such an arm (report/plots.py PER_PROMPT_PLOTS).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from grpo_ablate.report.data import ReportData
from grpo_ablate.report.figure import Figure, arm_colors, done_arms, new_axes, png

__all__ = ["plot_g_vs_difficulty", "has_g_alloc", "g_alloc_points"]

FID = "g-difficulty"
TITLE = "Per-prompt G against estimated pass rate"


def has_g_alloc(data: ReportData) -> bool:
    return "g_alloc" in data.steps and bool(data.steps["g_alloc"].notna().any())


def g_alloc_points(value: Any) -> list[tuple[float, int]]:
    """The (pass rate, G) pairs of one step's `g_alloc` (a list, or its JSON text in the report's tables)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, list):
        return []
    return [(float(p), int(g)) for p, g in (x for x in value if isinstance(x, (list, tuple)) and len(x) == 2)]


def plot_g_vs_difficulty(data: ReportData) -> Figure:
    caption = ("Each point is one prompt in one generation round of a per-prompt-G arm: its estimated pass rate "
               "(the Beta posterior mean the allocation used) and the completions it was given. The line is the "
               "mean G per tenth of pass rate. The allocation maximises the expected number of groups with reward "
               "spread, so prompts near 0 or 1 that can still go either way get more, and prompts already mixed at "
               "a small G fewer.")
    if not has_g_alloc(data):
        return Figure(FID, TITLE, caption, note="no per-prompt G arm in this study")
    colors = arm_colors(data)
    fig, (ax,) = new_axes()
    rng = np.random.default_rng(0)
    drawn = 0
    lows, highs = [], []
    for arm in done_arms(data):
        rows = data.steps[data.steps["trial"].isin(arm.trials)]
        pts = [pt for v in rows.get("g_alloc", []) for pt in g_alloc_points(v)]
        if not pts:
            continue
        p = np.array([x for x, _ in pts])
        g = np.array([y for _, y in pts], dtype=float)
        color = colors[arm.config]
        lows.append(getattr(arm.config.num_generations, "low", int(g.min())))
        highs.append(getattr(arm.config.num_generations, "high", int(g.max())))
        ax.scatter(p, g + rng.uniform(-0.15, 0.15, len(g)), s=6, alpha=0.25, color=color, lw=0)
        bins = np.minimum((p * 10).astype(int), 9)
        xs = [(b + 0.5) / 10 for b in range(10) if (bins == b).any()]
        ys = [g[bins == b].mean() for b in range(10) if (bins == b).any()]
        ax.plot(xs, ys, color=color, lw=1.8, marker="o", ms=3, label=f"{arm.title} ({len(pts)} prompt-rounds)")
        drawn += 1
    if not drawn:
        return Figure(FID, TITLE, caption, note="the per-prompt G arms have no completed trial yet")
    ax.set_xlim(0, 1)
    ax.set_ylim(min(lows) - 0.5, max(highs) + 0.5)  # the whole [g_min, g_max] range, so an even split looks even
    ax.set_xlabel("estimated pass rate of the prompt")
    ax.set_ylabel("completions given (G)")
    ax.legend(loc="best", frameon=False)
    return Figure(FID, TITLE, caption, png(fig))
