"""Reward curves: training reward over time and tokens, held-out reward over tokens, G phases marked.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report import data, curves; \
print(curves.plot_reward_vs_tokens(data.collect(load_study('studies/tiny-cpu.yaml'))).id)"

One line per configuration (mean over seeds, the band spanning them), pooled by num_generations
when a study proposed too many configurations for a line each.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import EngFormatter

from grpo_ablate.report.data import ReportData
from grpo_ablate.report.figure import Figure, arm_colors, done_arms, new_axes, png
from grpo_ablate.vocab import Outcome, Schedule

__all__ = ["plot_eval_vs_tokens", "plot_reward_vs_time", "plot_reward_vs_tokens"]

# More configurations than this and curves are pooled by num_generations (adaptive samplers
# propose many one-off configurations; a line each would be unreadable).
MAX_CURVES = 8


def _curve_groups(data: ReportData) -> tuple[list[tuple[str, int, list[int], Any]], bool]:
    """(legend label, G, trial numbers, colour) per curve; pooled by G when there are too many arms.

    An arm's curve has the arm's colour on every figure (figure.arm_colors); pooled curves, which
    are no single arm, are greys.
    """
    arms = done_arms(data)
    done = {r.number for r in data.records if r.outcome == Outcome.COMPLETED.value}
    if len(arms) <= MAX_CURVES:
        colors = arm_colors(data)
        return [(a.title, a.config.num_generations, [t for t in a.trials if t in done], colors[a.config])
                for a in arms], False
    by_g: dict[int, list[int]] = {}
    for a in arms:
        by_g.setdefault(a.config.num_generations, []).extend(t for t in a.trials if t in done)
    shades = {g: str(0.1 + 0.6 * i / max(1, len(by_g) - 1)) for i, g in enumerate(sorted(by_g))}
    return [(f"G={g}", g, ts, shades[g]) for g, ts in sorted(by_g.items())], True


def _smooth(y: np.ndarray) -> np.ndarray:
    w = max(1, len(y) // 25)
    if w == 1:
        return y
    return pd.Series(y).rolling(w, min_periods=1).mean().to_numpy()


def _mean_band(curves: list[tuple[np.ndarray, np.ndarray]], points: int = 120) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Seeds sampled onto one x grid, up to where every seed still has data."""
    curves = [(x, y) for x, y in curves if len(x) >= 1]
    if not curves:
        return None
    end = min(float(x[-1]) for x, _ in curves)
    start = max(float(x[0]) for x, _ in curves)
    if end <= start:
        x, y = curves[0]
        return x, y, y, y
    grid = np.linspace(start, end, points)
    ys = np.vstack([np.interp(grid, x, y) for x, y in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def _phase_changes(data: ReportData, trial: int, xs: pd.Series) -> list[tuple[int, float, int]]:
    """(step, x, new G) where a trial's G in force changed, read from its groups' sizes.

    groups.jsonl records every logged group with the G it was drawn with, so a G schedule's
    phases show there; `xs` maps the trial's steps to the curve's x.
    """
    g = data.groups
    if g.empty or "group_size" not in g or "step" not in g:
        return []
    rows = g[g["trial"] == trial][["step", "group_size"]].dropna().drop_duplicates("step").sort_values("step")
    out: list[tuple[int, float, int]] = []
    previous = None
    for step, size in zip(rows["step"].astype(int), rows["group_size"].astype(int)):
        if previous is not None and size != previous and step in xs.index:
            out.append((step, float(xs.loc[step]), size))
        previous = size
    return out


def _mark_phases(ax: Axes, changes: list[list[tuple[int, float, int]]], color, scale: float) -> bool:
    """A dotted line at each phase change (mean x over the seeds), labelled with the G that starts there."""
    if not changes or not any(changes):
        return False
    for i in range(max(len(c) for c in changes)):
        at = [c[i] for c in changes if len(c) > i]
        x = sum(a[1] for a in at) / len(at) / scale
        ax.axvline(x, color=color, ls=":", lw=1.2)
        ax.annotate(f"G={at[0][2]}", (x, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                    textcoords="offset points", va="top", fontsize=7, color=color)
    return True


def _reward_curves(data: ReportData, xcol: str, fid: str, title: str, xlabel: str, caption: str,
                   frame: pd.DataFrame | None = None, smooth: bool = True,
                   ylabel: str = "reward (mean over the step's completions)") -> Figure:
    steps = data.steps if frame is None else frame
    if steps.empty or xcol not in steps or "reward" not in steps:
        what = "step metrics" if frame is None else "evaluation rows"
        return Figure(fid, title, caption, note=f"no {what} with {xcol} and reward were recorded")
    groups, pooled = _curve_groups(data)
    if not groups:
        return Figure(fid, title, caption, note="no completed trial yet")
    fig, (ax,) = new_axes()
    drawn = 0
    scale, unit = 1.0, ""
    if xcol == "train_seconds":
        xmax = pd.to_numeric(steps[xcol], errors="coerce").max()
        scale, unit = (3600.0, "h") if xmax > 3 * 3600 else (60.0, "min") if xmax > 600 else (1.0, "s")
    marked = False
    for label, g, trials, color in groups:
        curves = []
        changes = []
        for t in trials:
            s = steps[steps["trial"] == t]
            if isinstance(g, Schedule) and "step" in s:
                xs = pd.Series(pd.to_numeric(s[xcol], errors="coerce").to_numpy(dtype=float),
                               index=pd.to_numeric(s["step"], errors="coerce").fillna(-1).astype(int).to_numpy())
                changes.append(_phase_changes(data, t, xs[~xs.index.duplicated()]))
            x = pd.to_numeric(s[xcol], errors="coerce").to_numpy(dtype=float)
            y = pd.to_numeric(s["reward"], errors="coerce").to_numpy(dtype=float)
            ok = np.isfinite(x) & np.isfinite(y)
            x, y = x[ok], y[ok]
            if len(x) == 0:
                continue
            order = np.argsort(x, kind="stable")
            curves.append((x[order] / scale, _smooth(y[order]) if smooth else y[order]))
        mb = _mean_band(curves)
        if mb is None:
            continue
        gx, mean, lo, hi = mb
        n = len(curves)
        ax.plot(gx, mean, color=color, lw=1.8, label=f"{label} ({n} seed{'s' if n != 1 else ''})")
        marked = _mark_phases(ax, changes, color, scale) or marked
        if n > 1:
            ax.fill_between(gx, lo, hi, color=color, alpha=0.18, lw=0)
        drawn += 1
    if not drawn:
        return Figure(fid, title, caption, note="the completed trials logged no reward")
    ax.set_xlabel(xlabel + (f" ({unit})" if unit else ""))
    if xcol == "generated_tokens":
        ax.xaxis.set_major_formatter(EngFormatter())
    ax.set_ylabel(ylabel)
    ax.legend(loc="best", frameon=False)
    if pooled:
        caption += " Configurations are pooled by num_generations (too many for a line each)."
    if marked:
        caption += (" Dotted lines: where a G schedule changed phase (mean over its seeds), labelled with the G "
                    "in force from there on; before the first line the schedule trains at its first G.")
    return Figure(fid, title, caption, png(fig))


def plot_eval_vs_tokens(data: ReportData) -> Figure:
    return _reward_curves(
        data, "generated_tokens", "eval-tokens", "Held-out reward vs generated tokens",
        "training tokens generated",
        "The same held-out prompts, scored at the study's fixed evaluation decoding before the first step, at the "
        "same generated compute for every configuration, and at the end. Mean over seeds; the band spans the "
        "seeds' range. This is what the answer is judged on.",
        frame=data.evals, smooth=False, ylabel="held-out reward",
    )


def plot_reward_vs_time(data: ReportData) -> Figure:
    return _reward_curves(
        data, "train_seconds", "reward-time", "Reward vs training wall time",
        "training wall time",
        "Mean over seeds; the band spans the seeds' range. The curve that climbs highest soonest "
        "buys the most reward per hour.",
    )


def plot_reward_vs_tokens(data: ReportData) -> Figure:
    return _reward_curves(
        data, "generated_tokens", "reward-tokens", "Reward vs generated tokens",
        "tokens generated",
        "The same runs against tokens instead of time: sample efficiency, independent of how fast "
        "the hardware generated them.",
    )


# ---------------------------------------------------------------- metrics vs G
