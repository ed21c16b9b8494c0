"""The report's curves: held-out reward against GPU time and against generated tokens (what the page leads with,
each seed's own line beneath), the training curves TRL logged per step, and training reward over time and tokens;
G schedules' phase changes marked.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report import data, curves; \
print(curves.plot_training_curves(data.collect(load_study('studies/tiny-cpu.yaml'))).id)"

One line per configuration (mean over seeds, the band spanning them), pooled by num_generations
when a study proposed too many configurations for a line each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import EngFormatter

from grpo_ablate.report.data import ReportData
from grpo_ablate.report.figure import HALF, WIDE, Figure, arm_colors, done_arms, new_axes, png
from grpo_ablate.core.vocab import Outcome, Schedule

__all__ = ["plot_eval_vs_tokens", "plot_eval_vs_gpu_hours", "plot_eval_seeds", "plot_training_curves",
           "plot_reward_vs_time", "plot_reward_vs_tokens", "TRAINING_CURVES"]

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


@dataclass(frozen=True)
class _Axis:
    """An x axis of the curves: the column, how it is scaled for reading, its label."""

    column: str
    scale: float = 1.0
    label: str = ""
    tokens: bool = False  # engineering notation (1.2k, 3.4M)


def _time_axis(frame: pd.DataFrame, gpus: int) -> _Axis:
    """Training time (evaluation excluded) read as GPU time, train_seconds x the trial's GPUs, on a GPU study, else as
    wall time; in h, min or s by its size."""
    xmax = pd.to_numeric(frame["train_seconds"], errors="coerce").max() * max(gpus, 1) if "train_seconds" in frame else 0
    scale, unit = (3600.0, "h") if xmax > 3 * 3600 else (60.0, "min") if xmax > 600 else (1.0, "s")
    if gpus:
        return _Axis("train_seconds", scale / gpus, f"GPU time (GPU-{unit}: training time x {gpus} GPU{'s' if gpus > 1 else ''})")
    return _Axis("train_seconds", scale, f"training wall time ({unit})")


def _gpus(data: ReportData) -> int:
    hardware = data.config.get("hardware") if isinstance(data.config, dict) else None
    gpus = hardware.get("gpus") if isinstance(hardware, dict) else None
    return gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 else 0


def _draw(ax: Axes, data: ReportData, frame: pd.DataFrame, axis: _Axis, ycol: str,
          groups: list[tuple[str, int, list[int], Any]], smooth: bool, per_seed: bool = False) -> tuple[int, bool]:
    """One panel: per curve group its mean over seeds with the band spanning them (or, `per_seed`, a thin line per
    seed); (curves drawn, whether a G schedule's phase changes were marked)."""
    drawn, marked = 0, False
    for label, g, trials, color in groups:
        curves = []
        changes = []
        for t in trials:
            s = frame[frame["trial"] == t]
            if isinstance(g, Schedule) and "step" in s and not per_seed:
                xs = pd.Series(pd.to_numeric(s[axis.column], errors="coerce").to_numpy(dtype=float),
                               index=pd.to_numeric(s["step"], errors="coerce").fillna(-1).astype(int).to_numpy())
                changes.append(_phase_changes(data, t, xs[~xs.index.duplicated()]))
            x = pd.to_numeric(s[axis.column], errors="coerce").to_numpy(dtype=float)
            y = pd.to_numeric(s[ycol], errors="coerce").to_numpy(dtype=float)
            ok = np.isfinite(x) & np.isfinite(y)
            x, y = x[ok], y[ok]
            if len(x) == 0:
                continue
            order = np.argsort(x, kind="stable")
            curves.append((x[order] / axis.scale, _smooth(y[order]) if smooth else y[order]))
        if not curves:
            continue
        n = len(curves)
        if per_seed:
            for i, (x, y) in enumerate(curves):
                ax.plot(x, y, color=color, lw=1.0, alpha=0.75, label=f"{label} ({n} seed{'s' if n != 1 else ''})"
                        if i == 0 else None)
            drawn += 1
            continue
        mb = _mean_band(curves)
        if mb is None:
            continue
        gx, mean, lo, hi = mb
        ax.plot(gx, mean, color=color, lw=1.8, label=f"{label} ({n} seed{'s' if n != 1 else ''})")
        marked = _mark_phases(ax, changes, color, axis.scale) or marked
        if n > 1:
            ax.fill_between(gx, lo, hi, color=color, alpha=0.18, lw=0)
        drawn += 1
    if axis.tokens:
        ax.xaxis.set_major_formatter(EngFormatter())
    return drawn, marked


def _notes(caption: str, pooled: bool, marked: bool) -> str:
    if pooled:
        caption += " Configurations are pooled by num_generations (too many for a line each)."
    if marked:
        caption += (" Dotted lines: where a G schedule changed phase (mean over its seeds), labelled with the G "
                    "in force from there on; before the first line the schedule trains at its first G.")
    return caption


def _reward_curves(data: ReportData, axis: _Axis, fid: str, title: str, caption: str,
                   frame: pd.DataFrame | None = None, smooth: bool = True,
                   ylabel: str = "reward (mean over the step's completions)", section: str = "more",
                   height: float = HALF[1]) -> Figure:
    steps = data.steps if frame is None else frame
    if steps.empty or axis.column not in steps or "reward" not in steps:
        what = "step metrics" if frame is None else "evaluation rows"
        return Figure(fid, title, caption, note=f"no {what} with {axis.column} and reward were recorded", section=section)
    groups, pooled = _curve_groups(data)
    if not groups:
        return Figure(fid, title, caption, note="no completed trial yet", section=section)
    fig, (ax,) = new_axes(height=height)
    drawn, marked = _draw(ax, data, steps, axis, "reward", groups, smooth)
    if not drawn:
        return Figure(fid, title, caption, note="the completed trials logged no reward", section=section)
    ax.set_xlabel(axis.label)
    ax.set_ylabel(ylabel)
    ax.legend(loc="best", frameon=False)
    return Figure(fid, title, _notes(caption, pooled, marked), png(fig), section=section)


HELD_OUT_HEIGHT = 2.6  # inches: the two held-out plots sit under the answer, inside a laptop's first screen
HELD_OUT = ("The same held-out prompts, scored at the study's fixed evaluation decoding before the first step, at the "
            "same generated compute for every configuration, and at the end. Mean over seeds; the band spans the "
            "seeds' range (each seed's own line: below). This is what the answer is judged on.")


def plot_eval_vs_tokens(data: ReportData) -> Figure:
    return _reward_curves(
        data, _Axis("generated_tokens", label="training tokens generated", tokens=True), "eval-tokens",
        "Held-out reward vs generated tokens", HELD_OUT + " Equal tokens are equal generation compute, whatever G.",
        frame=data.evals, smooth=False, ylabel="held-out reward", section="held-out", height=HELD_OUT_HEIGHT,
    )


def plot_eval_vs_gpu_hours(data: ReportData) -> Figure:
    gpus = _gpus(data)
    what = "GPU-hours" if gpus else "training time"
    return _reward_curves(
        data, _time_axis(data.evals, gpus), "eval-hours", f"Held-out reward vs {what}",
        HELD_OUT + (" GPU time is training time (evaluation excluded) x the trial's GPUs." if gpus else
                    " A CPU study holds no GPUs: this is training wall time (evaluation excluded), which on short "
                    "trials moves with the machine's load; read it beside the tokens plot."),
        frame=data.evals, smooth=False, ylabel="held-out reward", section="held-out", height=HELD_OUT_HEIGHT,
    )


def plot_eval_seeds(data: ReportData) -> Figure:
    """Both held-out views again, a thin line per seed: how far apart the seeds are, and whether one carries an arm."""
    fid, title = "eval-seeds", "Held-out reward, each seed"
    caption = "Each seed of each configuration as its own line (the colours of the plots above), against both axes."
    ev = data.evals
    if ev.empty or "reward" not in ev:
        return Figure(fid, title, caption, note="no evaluation rows were recorded", section="held-out-seeds")
    groups, pooled = _curve_groups(data)
    if not groups:
        return Figure(fid, title, caption, note="no completed trial yet", section="held-out-seeds")
    fig, axes = new_axes(width=WIDE, height=3.1, ncols=2)
    drawn = 0
    for ax, axis in zip(axes, (_time_axis(ev, _gpus(data)),
                               _Axis("generated_tokens", label="training tokens generated", tokens=True))):
        if axis.column in ev:
            drawn += _draw(ax, data, ev, axis, "reward", groups, smooth=False, per_seed=True)[0]
        ax.set_xlabel(axis.label)
        ax.set_ylabel("held-out reward")
    if not drawn:
        return Figure(fid, title, caption, note="the completed trials logged no held-out reward", section="held-out-seeds")
    axes[-1].legend(loc="best", frameon=False, fontsize=7)
    return Figure(fid, title, _notes(caption, pooled, False), png(fig), wide=True, section="held-out-seeds")


# What each training curve draws: (title, steps.csv columns tried in order, y label). TRL logs kl only when beta != 0,
# clip ratios as clip_ratio/* since 0.19 (clip_ratio before), and nothing of reward on steps that trained on an
# earlier round's completions: a missing column is a panel left out and said so.
TRAINING_CURVES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("reward", ("reward",), "reward (training samples)"),
    ("learning rate", ("learning_rate",), "learning rate"),
    ("KL", ("kl",), "KL to the reference"),
    ("entropy", ("entropy",), "entropy (nats/token)"),
    ("completion length", ("completions_mean_length",), "mean completion length (tokens)"),
    ("clip ratio", ("clip_ratio/region_mean", "clip_ratio"), "clipped share of tokens"),
    ("zero-spread share", ("frac_reward_zero_std",), "groups without reward spread"),
)


def plot_training_curves(data: ReportData) -> Figure:
    fid, title = "training", "Training curves per configuration"
    caption = ("What TRL logged at every optimizer step (metrics.jsonl; steps.csv beside this page): mean over seeds, "
               "the band spanning them, a rolling mean over 4% of the steps where there are many. The learning rate "
               "shows where each trial sits in its schedule (a trial that ends inside the warmup never trained at "
               "the full rate); reward here is on each configuration's own samples, not the held-out prompts.")
    steps = data.steps
    if steps.empty or "step" not in steps:
        return Figure(fid, title, caption, note="no step metrics were recorded", section="training")
    groups, pooled = _curve_groups(data)
    if not groups:
        return Figure(fid, title, caption, note="no completed trial yet", section="training")
    panels = [(name, next(c for c in cols if c in steps), ylabel) for name, cols, ylabel in TRAINING_CURVES
              if any(c in steps and pd.to_numeric(steps[c], errors="coerce").notna().any() for c in cols)]
    missing = [name for name, cols, _ in TRAINING_CURVES if name not in {p[0] for p in panels}]
    if not panels:
        return Figure(fid, title, caption, note="the trials logged none of the training curves", section="training")
    cols = 4 if len(panels) > 3 else len(panels)
    rows = -(-len(panels) // cols)
    fig = MplFigure(figsize=(WIDE, 2.15 * rows + 0.5), layout="constrained")
    axes: list[Axes] = list(fig.subplots(rows, cols, squeeze=False).ravel())
    marked = False
    step = _Axis("step", label="optimizer step")
    for ax, (name, col, ylabel) in zip(axes, panels):
        _, m = _draw(ax, data, steps, step, col, groups, smooth=True)
        marked = marked or m
        ax.set_title(name)
        ax.set_ylabel(ylabel, fontsize=7.5)
        ax.set_xlabel(step.label, fontsize=7.5)
        if col == "learning_rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    for ax in axes[len(panels):]:
        ax.axis("off")
    handles, labels = axes[0].get_legend_handles_labels()
    if len(panels) < len(axes):  # the legend in the empty cell, else under the panels
        axes[len(panels)].legend(handles, labels, loc="center", frameon=False)
    else:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)), frameon=False)
    if missing:
        caption += " Not logged by these trials: " + ", ".join(
            "KL (TRL logs KL only when beta is not 0)" if name == "KL" else name for name in missing) + "."
    return Figure(fid, title, _notes(caption, pooled, marked), png(fig), wide=True, section="training")


def plot_reward_vs_time(data: ReportData) -> Figure:
    return _reward_curves(
        data, _time_axis(data.steps, 0), "reward-time", "Reward vs training wall time",
        "Mean over seeds; the band spans the seeds' range. The curve that climbs highest soonest "
        "buys the most reward per hour.",
    )


def plot_reward_vs_tokens(data: ReportData) -> Figure:
    return _reward_curves(
        data, _Axis("generated_tokens", label="tokens generated", tokens=True), "reward-tokens",
        "Reward vs generated tokens",
        "The same runs against tokens instead of time: sample efficiency, independent of how fast "
        "the hardware generated them.",
    )


# ---------------------------------------------------------------- metrics vs G
