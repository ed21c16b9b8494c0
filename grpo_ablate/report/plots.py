"""Report plots: matplotlib figures of `ReportData`, each returned as an inline PNG data URI.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report import data, plots; \
print([f.id for f in plots.all_figures(data.collect(load_study('studies/tiny-cpu.yaml')))])"

Rendering only: every number comes from `ReportData`; error bars are the arms' 95% intervals,
cut to the range each metric can take (`vocab.Metric.low`/`high`). The style and canvas are
report/figure.py's; the reward curves are report/curves.py's. Each plot function returns a `Figure` whose `uri` is
None and whose `note` says why when the data cannot support the plot (one temperature, one
objective, no completed trials...); an unexpected error in one plot becomes such a note too,
so a half-finished study still gets its page.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure as MplFigure

from grpo_ablate.report.arms import ArmSummary
from grpo_ablate.report.curves import (plot_eval_seeds, plot_eval_vs_gpu_hours, plot_eval_vs_tokens,
                                      plot_reward_vs_time, plot_reward_vs_tokens, plot_training_curves)
from grpo_ablate.report.g_alloc import has_g_alloc, plot_g_vs_difficulty
from grpo_ablate.report.data import ReportData
from grpo_ablate.report.figure import (HALF, STYLE, WIDE, Figure, arm_colors, axis_label, done_arms, log2_g_axis,
                                       new_axes, palette, png, yerr)
from grpo_ablate.stats.seeds import MetricStat, stat
from grpo_ablate.stats.zero_spread import zero_spread, zero_spread_beta
from grpo_ablate.report.text import fmt
from grpo_ablate.core.vocab import PLANNED_SAMPLERS, Arm, Outcome, metric

__all__ = ["all_figures", "PLOTS", "EVAL_PLOTS", "PER_PROMPT_PLOTS"]


MAX_SERIES = 5  # beyond this many (batch, temperature) lines, points are coloured by temperature instead


def _series(arms: Sequence[ArmSummary]) -> dict[str, list[ArmSummary]] | None:
    """Arms split by what else varies (batch, temperature) so each line varies only G.

    None when there are too many such lines to read (continuous temperatures from adaptive
    samplers): the caller then draws one point per arm coloured by temperature.
    """
    keys = {(a.config.generation_batch_size, a.config.temperature) for a in arms}
    bs = {k[0] for k in keys}
    ts = {k[1] for k in keys}
    out: dict[str, list[ArmSummary]] = {}
    for a in sorted(arms, key=lambda a: a.config):
        parts = []
        if len(bs) > 1:
            parts.append(f"batch {a.config.generation_batch_size}")
        if len(ts) > 1:
            parts.append(f"T={a.config.temperature:g}")
        out.setdefault(", ".join(parts) or "all", []).append(a)
    return out if len(out) <= MAX_SERIES else None


_LINE_STYLES = ("-", "--", ":", "-.")


def _draw_by_g(fig: MplFigure, ax: Axes, arms: Sequence[ArmSummary], metric: str, label_prefix: str = "",
               lines: bool = True, colors: dict[Arm, Any] | None = None) -> None:
    """Mean and 95% interval per arm against G, each arm in its own colour (`colors`, figure.arm_colors):
    grey lines join a series' arms; too many series (adaptive samplers): temperature-coloured points."""
    series = _series(arms)
    if series is None:
        temps = [a.config.temperature for a in arms]
        norm = Normalize(min(temps), max(temps))
        cmap = colormaps["viridis"]
        for a in arms:
            s = a.metrics[metric]
            x = a.config.num_generations * 1.06 ** ((norm(a.config.temperature) - 0.5) * 2)
            ax.errorbar([x], [s.mean], yerr=yerr([s]), marker="o", ms=5, capsize=3, lw=0,
                        elinewidth=1.0, color=cmap(norm(a.config.temperature)))
        fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="temperature", shrink=0.9)
        return
    own = colors or dict(zip((a.config for a in arms), palette(len(arms))))
    k = len(series)
    for i, (name, sarms) in enumerate(series.items()):
        shift = 1.04 ** (i - (k - 1) / 2)  # side by side on the log axis
        xs = [a.config.num_generations * shift for a in sarms]
        ms = [a.metrics[metric].mean for a in sarms]
        if lines and len(sarms) > 1:
            ax.plot(xs, ms, color="#8a8a8a", lw=1.2, ls=_LINE_STYLES[i % len(_LINE_STYLES)], zorder=1,
                    label=None if name == "all" else f"{label_prefix}{name}")
        for x, a in zip(xs, sarms):
            s = a.metrics[metric]
            ax.errorbar([x], [s.mean], yerr=yerr([s]), color=own.get(a.config, "#333333"), marker="o", ms=5,
                        capsize=3, lw=0, elinewidth=1.2, zorder=2, label=f"{label_prefix}{a.title}")
            if len(s.values) > 1:
                ax.scatter([x] * len(s.values), s.values, color=own.get(a.config, "#333333"), s=16, alpha=0.6,
                           zorder=3, lw=0)


def _metric_vs_g(data: ReportData, metric: str, fid: str, title: str, caption: str) -> Figure:
    arms = done_arms(data, metric)
    if not arms:
        return Figure(fid, title, caption, note=f"no completed trial recorded {metric}")
    fig, (ax,) = new_axes()
    _draw_by_g(fig, ax, arms, metric, colors=arm_colors(data))
    log2_g_axis(ax, [a.config.num_generations for a in arms])
    ax.set_ylabel(axis_label(data, metric))
    if ax.get_legend_handles_labels()[1]:
        ax.legend(frameon=False)
    return Figure(fid, title, caption, png(fig))


def plot_reward_per_hour(data: ReportData) -> Figure:
    return _metric_vs_g(
        data, "reward_per_hour", "reward-per-hour", "Reward per hour vs num_generations",
        "Mean over seeds with 95% intervals (error bars; none for a single seed); dots are single seeds. "
        "The headline trade-off: bigger groups give a better signal per prompt but cost time.",
    )


def plot_stability(data: ReportData) -> Figure:
    return _metric_vs_g(
        data, "stability_variance", "stability", "Training stability vs num_generations",
        "How much the reward curve fluctuates around its trend (lower is steadier). Small groups "
        "estimate the advantage from few samples, so they are expected to be noisier.",
    )


def plot_throughput_memory(data: ReportData) -> Figure:
    fid, title = "throughput-memory", "Throughput and peak memory vs num_generations and generation batch"
    caption = ("Completions per second and peak memory, one line per generation batch size (mean over "
               "completed trials). Memory grows with the generation batch; throughput with parallelism.")
    done = [r for r in data.records if r.outcome == Outcome.COMPLETED.value and r.config is not None]
    if not done:
        return Figure(fid, title, caption, note="no completed trial yet")
    fig, axes = new_axes(width=WIDE, height=3.4, ncols=2)
    batches = sorted({r.config.generation_batch_size for r in done})  # type: ignore[union-attr]
    # batches in greys and line styles: on this page a colour always means one configuration (figure.arm_colors)
    greys = {b: (str(0.15 + 0.5 * i / max(1, len(batches) - 1)), _LINE_STYLES[i % len(_LINE_STYLES)])
             for i, b in enumerate(batches)}
    any_drawn = False
    for ax, name in zip(axes, ("samples_per_second", "peak_memory_mb")):
        bounds = metric(name)
        for b in batches:
            pts: list[tuple[int, MetricStat]] = []
            for g in sorted({r.config.num_generations for r in done if r.config.generation_batch_size == b}):  # type: ignore[union-attr]
                s = stat((r.metrics.get(name) for r in done
                          if r.config.num_generations == g and r.config.generation_batch_size == b),  # type: ignore[union-attr]
                         low=bounds.low, high=bounds.high)
                if s.mean is not None:
                    pts.append((g, s))
            if pts:
                any_drawn = True
                ax.errorbar([g for g, _ in pts], [s.mean for _, s in pts], yerr=yerr([s for _, s in pts]), marker="o",
                            ms=5, capsize=3, color=greys[b][0], ls=greys[b][1], label=f"batch {b}")
        log2_g_axis(ax, [r.config.num_generations for r in done])  # type: ignore[union-attr]
        ax.set_ylabel(axis_label(data, name))
        if bounds.low is not None:
            ax.set_ylim(bottom=bounds.low)
        ax.legend(frameon=False, title="generation batch" if len(batches) > 1 else None)
    if not any_drawn:
        return Figure(fid, title, caption, note="no trial recorded samples_per_second or peak_memory_mb", wide=True)
    return Figure(fid, title, caption, png(fig), wide=True)


def plot_temperature_heatmap(data: ReportData) -> Figure:
    fid, title = "heatmap", "Temperature x num_generations"
    metric, direction = data.objectives[0] if data.objectives else ("reward_per_hour", "maximize")
    caption = (f"Mean {data.metrics[metric].label if metric in data.metrics else metric} over completed trials in each cell "
               f"(pooled over seeds and generation batches); brighter is better. Higher G usually wants a "
               f"higher temperature, or its completions repeat each other.")
    done = [r for r in data.records if r.outcome == Outcome.COMPLETED.value and r.config is not None
            and r.metrics.get(metric) is not None]
    gs = sorted({r.config.num_generations for r in done})  # type: ignore[union-attr]
    temps = sorted({r.config.temperature for r in done})  # type: ignore[union-attr]
    if len(temps) < 2:
        return Figure(fid, title, caption, note="only one temperature was run: no heatmap to draw")
    # continuous temperatures (adaptive samplers): bin them so cells hold several trials
    if len(temps) > 8:
        edges = np.linspace(temps[0], temps[-1], 7)
        labels = [f"{edges[i]:.2f}–{edges[i + 1]:.2f}" for i in range(6)]

        def row_of(t: float) -> int:
            return int(min(5, np.searchsorted(edges, t, side="right") - 1))
    else:
        labels = [f"{t:g}" for t in temps]

        def row_of(t: float) -> int:
            return temps.index(t)
    grid = np.full((len(labels), len(gs)), np.nan)
    counts = np.zeros_like(grid, dtype=int)
    cells: dict[tuple[int, int], list[float]] = {}
    for r in done:
        cells.setdefault((row_of(r.config.temperature), gs.index(r.config.num_generations)), []).append(  # type: ignore[union-attr]
            r.metrics[metric])  # type: ignore[arg-type]
    for (i, j), vals in cells.items():
        grid[i, j] = float(np.mean(vals))
        counts[i, j] = len(vals)
    fig, (ax,) = new_axes(height=max(2.6, 0.5 * len(labels) + 1.4))
    cmap = "viridis" if direction == "maximize" else "viridis_r"
    masked = np.ma.masked_invalid(grid)
    im = ax.imshow(masked, cmap=cmap, aspect="auto", origin="lower")
    ax.grid(False)
    ax.set_xticks(range(len(gs)), [str(g) for g in gs])
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("num_generations (G)")
    ax.set_ylabel("temperature")
    finite_vals = grid[np.isfinite(grid)]
    mid = float(np.nanmean(finite_vals)) if finite_vals.size else 0.0
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if np.isfinite(grid[i, j]):
                bright = (grid[i, j] > mid) == (direction == "maximize")
                ax.text(j, i, f"{fmt(float(grid[i, j]))}\n(n={counts[i, j]})", ha="center", va="center", fontsize=7.5,
                        color="black" if bright else "white")
    fig.colorbar(im, ax=ax, label=axis_label(data, metric), shrink=0.9)
    return Figure(fid, title, caption, png(fig))


def plot_pareto(data: ReportData) -> Figure:
    fid, title = "pareto", "Pareto front"
    caption = ("Each completed trial on the first two objectives; ringed points are not beaten on both at once. "
               "Pick from the ring by what matters more to you.")
    if len(data.objectives) < 2:
        return Figure(fid, title, caption, note="single-objective study: no Pareto front")
    (m1, _), (m2, _) = data.objectives[:2]
    done = [r for r in data.records if r.outcome == Outcome.COMPLETED.value and r.values is not None
            and len(r.values) >= 2 and r.config is not None]
    if not done:
        return Figure(fid, title, caption, note="no completed trial yet")
    colors = arm_colors(data)
    fig, (ax,) = new_axes(height=3.4)
    for a in data.arms:
        pts = [r for r in done if r.config == a.config]
        if pts:
            ax.scatter([r.values[0] for r in pts], [r.values[1] for r in pts], color=colors[a.config], s=30,  # type: ignore[index]
                       label=a.title, zorder=3)
    front = sorted((r for r in done if r.number in data.pareto), key=lambda r: r.values[0])  # type: ignore[index]
    if front:
        ax.scatter([r.values[0] for r in front], [r.values[1] for r in front], s=110, facecolors="none",  # type: ignore[index]
                   edgecolors="black", lw=1.2, zorder=4, label="Pareto front")
        ax.plot([r.values[0] for r in front], [r.values[1] for r in front], color="black", lw=0.8, ls="--")  # type: ignore[index]
    ax.set_xlabel(axis_label(data, m1))
    ax.set_ylabel(axis_label(data, m2))
    ax.legend(frameon=False, fontsize=7.5)
    if len(data.objectives) > 2:
        caption += " Only the first two of the study's objectives are drawn."
    return Figure(fid, title, caption, png(fig))


def plot_importances(data: ReportData) -> Figure:
    fid, title = "importance", "Parameter importances"
    caption = ("Share of each objective's variation explained by each parameter (Optuna's default evaluator, over "
               "completed trials).")
    if any("seed" in imp for imp in data.importances.values()):
        caption += " A large share for seed means seeds matter as much as the knobs: add seeds."
    sampler = (data.config.get("study") or {}).get("sampler") if isinstance(data.config, dict) else None
    if sampler in PLANNED_SAMPLERS:
        # a model-based ranking of knobs can disagree with the measured, tested effects; one answer per page
        return Figure(fid, title, caption, note=(
            f"left out for a planned study ({sampler}): the table of every configuration against the baseline "
            f"is the measured answer, with its tests"))
    if not data.importances:
        return Figure(fid, title, caption, note=data.importance_note or "not enough completed trials")
    metrics = list(data.importances)
    wide = len(metrics) > 1
    fig, axes = new_axes(width=WIDE if wide else HALF[0],
                     height=max(2.0, 0.4 * max(len(v) for v in data.importances.values()) + 1.1), ncols=len(metrics))
    for ax, name in zip(axes, metrics):
        imp = data.importances[name]
        names = list(imp)[::-1]
        ax.barh(names, [imp[n] for n in names], color="#4c72b0")
        ax.set_xlim(0, 1)
        ax.set_title(data.metrics[name].label if name in data.metrics else name)
        ax.set_xlabel("importance")
        ax.grid(axis="y", visible=False)
    return Figure(fid, title, caption, png(fig), wide=wide)



_NO_RESULT = frozenset(o.value for o in (Outcome.PRUNED, Outcome.OOM, Outcome.FAILED, Outcome.INTERRUPTED))


def plot_history(data: ReportData) -> Figure:
    fid, title = "history", "Optimisation history"
    caption = ("Each objective per trial in the order they ran, one colour per configuration; crosses at the bottom "
               "mark trials that produced no result (pruned, out of memory, failed). A single trial is one seed: the "
               "answer compares configurations by their means over seeds, never by the best single trial.")
    if not data.records:
        return Figure(fid, title, caption, note="the study has no trials yet")
    k = max(1, len(data.objectives))
    fig, axes = new_axes(width=WIDE if k > 1 else HALF[0], height=3.2, ncols=k)
    colors = arm_colors(data)
    drawn = False
    for i, (ax, (objective, _)) in enumerate(zip(axes, data.objectives)):
        done = [r for r in data.records if r.outcome == Outcome.COMPLETED.value and r.values is not None
                and i < len(r.values)]
        for a in data.arms:
            pts = [r for r in done if r.config == a.config]
            if pts:
                ax.scatter([r.number for r in pts], [r.values[i] for r in pts], color=colors[a.config], s=22,  # type: ignore[index]
                           label=a.title, zorder=3)
        drawn = drawn or bool(done)
        bad = [r for r in data.records if r.outcome in _NO_RESULT]
        if bad:
            ax.scatter([r.number for r in bad], [0.02] * len(bad), transform=ax.get_xaxis_transform(), marker="x",
                       color="#555555", s=22, label="no result", zorder=4)
        numbers = [r.number for r in data.records]
        ax.set_xlim(min(numbers) - 0.6, max(numbers) + 0.6)
        ax.set_xlabel("trial")
        ax.set_ylabel(axis_label(data, objective))
        ax.legend(frameon=False, fontsize=7, loc="best")
    if not drawn:
        return Figure(fid, title, caption, note="no completed trial yet")
    return Figure(fid, title, caption, png(fig), wide=k > 1)


def plot_zero_spread(data: ReportData) -> Figure:
    fid, title = "zero-spread", "Groups without reward spread vs num_generations"
    caption = ("Measured share of groups whose completions all scored the same (TRL's frac_reward_zero_std; mean "
               "and 95% interval over trials), against p^G + (1-p)^G, the share a binary reward with success "
               "rate p would give if every prompt were equally hard. Real prompts differ in difficulty, so the "
               "measured share usually sits above the curve.")
    arms = [a for a in data.arms if a.metrics.get("frac_reward_zero_std") is not None
            and a.metrics["frac_reward_zero_std"].mean is not None]
    if not arms:
        return Figure(fid, title, caption, note="no trial logged frac_reward_zero_std")
    fig, (ax,) = new_axes()
    _draw_by_g(fig, ax, arms, "frac_reward_zero_std", label_prefix="measured, ", lines=False, colors=arm_colors(data))
    gs = [a.config.num_generations for a in arms]
    p = data.success_p
    if p is not None and data.success_p_unit:
        grid = np.geomspace(min(gs) / 1.3, max(gs) * 1.3, 200)
        ax.plot(grid, [zero_spread(float(g), p) for g in grid], color="black", lw=1.2, ls="--",  # type: ignore[arg-type]
                label=f"p^G + (1-p)^G, p = {p:.2f}")
    else:
        caption += (" The curve is left out: the rewards are not in [0, 1], so they are not a success rate."
                    if p is not None else " The curve is left out: no reward was recorded.")
    if data.advice:
        gs += _draw_advice(ax, data.advice)
        caption += (" Dotted: what `grpo-ablate advise` predicted before any trial, from the starting model's "
                    "samples and the prompts' fitted difficulty, per training temperature.")
    log2_g_axis(ax, gs)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("share of groups with zero reward spread")
    if ax.get_legend_handles_labels()[1]:
        ax.legend(frameon=False)
    return Figure(fid, title, caption, png(fig))


def _draw_advice(ax: Axes, advice: dict) -> list[int]:
    """advise.json's predicted zero-spread share against G, one dotted line per temperature; its Gs."""

    temps = [float(t) for t in advice.get("temperatures") or []]
    predicted: dict[float, dict[int, float]] = {}
    for row in advice.get("predictions") or []:
        predicted.setdefault(float(row["temperature"]), {})[int(row["num_generations"])] = float(row["zero_spread"])
    gs = sorted({g for by_g in predicted.values() for g in by_g})
    shades = [colormaps["Greys"](0.5 + 0.45 * i / max(1, len(temps) - 1)) for i in range(len(temps))]
    for t, color in zip(temps, shades):  # greys: never mistaken for a measured series' colour
        fit = (advice.get("fits") or {}).get(str(t))
        if fit and gs:  # binary rewards: the fitted Beta's curve, smooth between the Gs
            grid = np.geomspace(min(gs) / 1.3, max(gs) * 1.3, 120)
            ys = [zero_spread_beta(float(g), float(fit["a"]), float(fit["b"])) for g in grid]  # type: ignore[arg-type]  # G on a smooth grid
        elif predicted.get(t):
            grid, ys = (list(v) for v in zip(*sorted(predicted[t].items())))
        else:
            continue
        ax.plot(grid, ys, color=color, lw=1.2, ls=":", label=f"advise, T={t:g}")
    return gs


# In page order: the held-out curves the page leads with (and their per-seed lines), the training curves, then the rest.
PLOTS: tuple[Callable[[ReportData], Figure], ...] = (
    plot_eval_vs_gpu_hours,
    plot_eval_vs_tokens,
    plot_eval_seeds,
    plot_training_curves,
    plot_reward_vs_time,
    plot_reward_vs_tokens,
    plot_reward_per_hour,
    plot_stability,
    plot_throughput_memory,
    plot_zero_spread,
    plot_g_vs_difficulty,
    plot_temperature_heatmap,
    plot_pareto,
    plot_importances,
    plot_history,
)


def _fallback(fn: Callable[[ReportData], Figure]) -> tuple[str, str]:
    name = fn.__name__.removeprefix("plot_").replace("_", "-")
    return name, name.replace("-", " ").capitalize()


# Drawn only for studies with held-out evaluation; a study without it is not missing a plot.
EVAL_PLOTS: frozenset[Callable[[ReportData], Figure]] = frozenset({plot_eval_vs_gpu_hours, plot_eval_vs_tokens,
                                                                  plot_eval_seeds})
# Where a plot that raised is said (its note stands where its figure would have): the page's sections by plot.
_SECTIONS: dict[Callable[[ReportData], Figure], str] = {plot_eval_vs_gpu_hours: "held-out", plot_eval_vs_tokens: "held-out",
                                                        plot_eval_seeds: "held-out-seeds", plot_training_curves: "training"}
# Drawn only for studies with a per-prompt G arm (`adaptive:8[2-16]`).
PER_PROMPT_PLOTS: frozenset[Callable[[ReportData], Figure]] = frozenset({plot_g_vs_difficulty})


def all_figures(data: ReportData, plots: Sequence[Callable[[ReportData], Figure]] = PLOTS) -> list[Figure]:
    """Every plot, in report order; a plot that raises becomes a note, not a missing report."""
    out = []
    with rc_context(STYLE):
        for fn in plots:
            if fn in EVAL_PLOTS and not data.has_eval:
                continue
            if fn in PER_PROMPT_PLOTS and not has_g_alloc(data):
                continue
            try:
                out.append(fn(data))
            except Exception as e:  # noqa: BLE001 - one bad plot must not cost the whole page
                fid, title = _fallback(fn)
                out.append(Figure(fid, title, "", note=f"could not be drawn ({type(e).__name__}: {e})",
                                  section=_SECTIONS.get(fn, "more")))
    return out
