"""What every report plot is drawn with: the style, the Figure record, the canvas and the colours.

    python -c "from grpo_ablate.report.figure import Figure; print(Figure('x', 'X', '').uri)"

Figures use matplotlib's object-oriented API on an Agg canvas (no pyplot, no global backend
switch), so a report can be written from any thread or process.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Sequence

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FixedLocator, NullLocator

from grpo_ablate.report.arms import ArmSummary
from grpo_ablate.report.data import ReportData
from grpo_ablate.stats.seeds import MetricStat
from grpo_ablate.core.vocab import Arm

__all__ = ["Figure", "STYLE", "DPI", "HALF", "WIDE", "png", "new_axes", "palette", "arm_colors", "log2_g_axis",
           "axis_label", "yerr", "done_arms"]

# Half-width figures are drawn 4.8 in wide and shown ~480 px wide: 9 pt text stays ~12 px on
# screen, and 150 dpi keeps them sharp on high-density laptop screens and in print.
DPI = 150
HALF = (4.8, 3.1)
WIDE = 9.6
STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.facecolor": "white",
}


@dataclass(frozen=True)
class Figure:
    """One plot of the report: an image, or the reason there is none."""

    id: str
    title: str
    caption: str
    uri: str | None = None
    note: str | None = None
    wide: bool = False  # spans the page width (several panels)
    # where the page shows it: "held-out" right under the answer, "held-out-seeds" folded under those, "training"
    # next, "more" with the other plots further down (report/template.html.j2)
    section: str = "more"


def png(fig: MplFigure) -> str:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def new_axes(width: float = HALF[0], height: float = HALF[1], ncols: int = 1) -> tuple[MplFigure, list[Axes]]:
    fig = MplFigure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def palette(n: int) -> list[tuple[float, float, float, float]]:
    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(max(n, 1))]


def arm_colors(data: ReportData) -> dict[Arm, tuple[float, float, float, float]]:
    """One colour per arm (vocab.Arm), the same on every figure: the report's arm order, baseline first.

    Other groupings (a series of temperatures, a generation batch) are drawn in greys and line
    styles, so a colour on this page always means one configuration.
    """
    return dict(zip((a.config for a in data.arms), palette(len(data.arms))))


def log2_g_axis(ax: Axes, gs: Sequence[int]) -> None:
    """G doubles between arms in practice, so a log2 axis spaces them evenly."""
    gs = sorted(set(int(g) for g in gs))
    if not gs:
        return
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(gs))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(g) for g in gs])
    lo, hi = min(gs), max(gs)
    ax.set_xlim(lo / 1.35, hi * 1.35)
    ax.set_xlabel("num_generations (G)")


def axis_label(data: ReportData, name: str) -> str:
    m = data.metrics.get(name)
    if m is None:
        return name
    if m.direction is None:
        return m.label
    return f"{m.label} ({'↑' if m.higher_is_better else '↓'} better)"


def yerr(stats: Sequence[MetricStat]) -> list[list[float]]:
    """matplotlib's asymmetric error bars, [below, above]; none for a single seed."""
    errs = [s.errors or (0.0, 0.0) for s in stats]
    return [[e[0] for e in errs], [e[1] for e in errs]]


def done_arms(data: ReportData, metric: str | None = None) -> list[ArmSummary]:
    arms = [a for a in data.arms if a.n > 0]
    if metric is not None:
        arms = [a for a in arms if a.metrics.get(metric) is not None and a.metrics[metric].mean is not None]
    return arms
