"""The report's words: the one number formatter, seed statistics as text, deltas and the answer.

    python -c "from grpo_ablate.report.text import fmt; print(fmt(1234.5), fmt(2e-5), fmt(None))"

Stdlib only, so the command line's tables (run-one, compare) format numbers with `fmt` too
without importing pandas or matplotlib.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Mapping, Sequence

from grpo_ablate.report.stats import Difference, MetricStat
from grpo_ablate.vocab import Metric

if TYPE_CHECKING:
    from grpo_ablate.report.arms import ArmSummary, Best, Delta

__all__ = ["fmt", "fmt_stat", "fmt_stat_short", "delta_words", "recommendation", "clip", "MISSING"]

MISSING = "–"  # what every table shows for a value that is not there


def fmt(x: object, digits: int = 3) -> str:
    """Any value for a person: floats to three significant digits, ints exactly, '–' when missing.

    Everyday magnitudes are never in scientific notation; only below 0.001 and from a million up.
    """
    if x is None:
        return MISSING
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    f = float(x)
    if not math.isfinite(f):
        return MISSING
    if f == 0:
        return "0"
    mag = abs(f)
    if mag >= 1e6 or mag < 1e-3:
        return f"{f:.{digits - 1}e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(mag))))
    return f"{f:,.{decimals}f}"


def _spread(s: MetricStat) -> str | None:
    """'± 0.10', or '+0.20/−0.10' when the interval was cut to the metric's range."""
    err = s.errors
    if err is None:
        return None
    below, above = err
    if math.isclose(below, above, rel_tol=1e-9, abs_tol=1e-12):
        return f"± {fmt(above, 2)}"
    return f"+{fmt(above, 2)}/−{fmt(below, 2)}"


def fmt_stat_short(s: MetricStat | None) -> str:
    """'1.24 ± 0.10' for table cells whose seed count is shown once per row."""
    if s is None or s.mean is None:
        return MISSING
    spread = _spread(s)
    return fmt(s.mean) if spread is None else f"{fmt(s.mean)} {spread}"


def fmt_stat(s: MetricStat | None) -> str:
    """'1.24 ± 0.10 (3 seeds)'; a single seed says so rather than pretending to certainty."""
    if s is None or s.mean is None:
        return MISSING
    spread = _spread(s)
    if spread is None:
        return f"{fmt(s.mean)} (1 seed)"
    return f"{fmt(s.mean)} {spread} ({s.n} seeds)"


def clip(text: str, n: int) -> str:
    """At most n characters, an ellipsis marking a cut."""
    return text if len(text) <= n else text[: n - 1] + "…"


def delta_words(m: Metric, arm_title: str, base_title: str, value: MetricStat, base: MetricStat,
                diff: Difference, better: bool | None) -> str:
    """One sentence a person can act on: how much, which way, and whether noise could explain it."""
    how = f"({fmt(value.mean)} vs {fmt(base.mean)})"
    if diff.delta == 0:
        return f"{arm_title}: {m.label} is the same as {base_title} {how}."
    if diff.relative is not None:
        size = f"{abs(diff.relative) * 100:.0f}% {'higher' if diff.delta > 0 else 'lower'}"
    else:
        size = f"{fmt(abs(diff.delta))} {'higher' if diff.delta > 0 else 'lower'}"
    verdict = "better" if better else "worse"
    if diff.clear is True:
        noise = f"a difference larger than the seed-to-seed spread ({value.n} vs {base.n} seeds)"
    elif diff.clear is False:
        noise = f"within the seed-to-seed spread, so not a reliable difference ({value.n} vs {base.n} seeds)"
    else:
        noise = "from a single seed, so the seed-to-seed spread is unknown"
    return f"{arm_title}: {m.label} is {size} than {base_title} {how}: {verdict}, {noise}."


def recommendation(best: Mapping[str, "Best | None"], deltas: Mapping[str, Mapping[str, "Delta"]],
                   arms: Sequence["ArmSummary"], objectives: Sequence[tuple[str, str]],
                   metrics: Mapping[str, Metric]) -> str:
    """The sentence a person acts on, judged on the first objective."""
    if not objectives:
        return "The study has no objectives: nothing to recommend."
    primary = objectives[0][0]
    b = best.get(primary)
    if b is None:
        return "No configuration completed yet: nothing to recommend. Run (or resume) the study."
    label = metrics[primary].label if primary in metrics else primary
    base = next((a for a in arms if a.is_baseline), None)
    cfg = b.arm.config.words
    if base is None:
        text = (f"Use {cfg}: it had the best {label}, {fmt_stat(b.stat)}. The baseline was not run, "
                f"so there is no comparison to the default.")
    elif b.arm.is_baseline:
        text = f"Keep the baseline ({cfg}): no other configuration beat its {label}, {fmt_stat(b.stat)}."
    else:
        d = deltas.get(b.arm.name, {}).get(primary)
        bs = base.metrics.get(primary)
        pct = (f"{abs(d.diff.relative) * 100:.0f}% {'higher' if d.diff.delta > 0 else 'lower'}"
               if d is not None and d.diff.relative is not None else "different")
        versus = f"{fmt(b.stat.mean)} vs {fmt(bs.mean if bs else None)} for the baseline {base.config.label}"
        if d is not None and d.diff.clear:
            text = (f"Use {cfg}: its {label} was {pct} than the baseline's ({versus}), "
                    f"more than the seed-to-seed spread explains.")
        elif d is not None and d.diff.clear is False:
            text = (f"Keep the baseline ({base.config.words}) for now: {b.arm.config.label} had the best {label} "
                    f"({pct}: {fmt(b.stat.mean)} vs {fmt(bs.mean if bs else None)}), but the difference is within "
                    f"the seed-to-seed spread; add seeds (study.seeds) to confirm it.")
        else:
            text = (f"Try {cfg}: it had the best {label} ({pct} than the baseline: {versus}), from a single "
                    f"seed per configuration; add seeds (study.seeds) before switching for good.")
    for name, _ in objectives[1:]:
        o = best.get(name)
        if o is not None and o.arm.config != b.arm.config:
            olabel = metrics[name].label if name in metrics else name
            text += f" For {olabel} the best was {o.arm.config.label} ({fmt_stat(o.stat)}): see the Pareto front."
    return text
