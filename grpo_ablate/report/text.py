"""The report's words: the one number formatter, p-values and intervals, seed statistics as text, deltas.

The answer itself is report.verdict.

    python -c "from grpo_ablate.report.text import fmt; print(fmt(1234.5), fmt(2e-5), fmt(None))"

Stdlib only, so the command line's tables (run-one, compare) format numbers with `fmt` too
without importing pandas or matplotlib.
"""

from __future__ import annotations

import math
import numbers

from grpo_ablate.stats.seeds import Comparison, Difference, MetricStat
from grpo_ablate.core.vocab import Metric

__all__ = ["fmt", "fmt_p", "fmt_interval", "fmt_stat", "fmt_stat_short", "delta_words", "clip", "MISSING"]

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


def fmt_p(p: float | None) -> str:
    """A p-value for a person, as a phrase: 'p = 0.0091', 'p = 0.50', 'p < 0.001'."""
    if p is None:
        return f"p {MISSING}"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


def fmt_interval(ci: tuple[float, float] | None, signed: bool = True) -> str:
    """'+0.12 to +0.31' (signed, for differences) or '0.12 to 0.31'."""
    if ci is None:
        return MISSING

    def one(x: float) -> str:
        s = fmt(x)
        return ("+" + s) if signed and x > 0 else s
    return f"{one(ci[0])} to {one(ci[1])}"


def clip(text: str, n: int) -> str:
    """At most n characters, an ellipsis marking a cut."""
    return text if len(text) <= n else text[: n - 1] + "…"


def delta_words(m: Metric, arm_title: str, base_title: str, value: MetricStat, base: MetricStat,
                diff: Difference, better: bool | None, comparison: Comparison | None = None,
                p_adjusted: float | None = None) -> str:
    """One sentence a person can act on: how much, which way, and whether noise could explain it.

    `diff.clear` is the call (report.arms.baseline_deltas: the Holm-adjusted p of the one model's
    test); `p_adjusted` is printed beside the test that made it."""
    how = f"({fmt(value.mean)} vs {fmt(base.mean)})"
    if diff.delta == 0:
        return f"{arm_title}: {m.label} is the same as {base_title} {how}."
    if diff.relative is not None:
        size = f"{abs(diff.relative) * 100:.0f}% {'higher' if diff.delta > 0 else 'lower'}"
    else:
        size = f"{fmt(abs(diff.delta))} {'higher' if diff.delta > 0 else 'lower'}"
    test = f"{value.n} vs {base.n} seeds"
    if comparison is not None and comparison.p_value is not None:
        test = f"{comparison.words}, {fmt_p(comparison.p_value)}"
        if p_adjusted is not None:
            test += f", Holm-adjusted over the configurations {fmt_p(p_adjusted)}"
    # "better"/"worse" only where the test says so: a skimmer must not take a winner from noise
    if diff.clear is True:
        tail = f"{'better' if better else 'worse'}, a difference larger than the seed-to-seed spread ({test})"
    elif diff.clear is False:
        tail = (f"not distinguishable from it: the difference is within the seed-to-seed spread once every "
                f"configuration's comparison is counted ({test})")
    elif comparison is None and min(value.n, base.n) >= 3:
        tail = "not tested: a diagnostic, which explains rather than decides"
    elif min(value.n, base.n) <= 1:
        tail = "from a single seed, so the seed-to-seed spread is unknown: no call"
    else:
        tail = f"from {min(value.n, base.n)} seeds, fewer than the 3 a test needs: no call"
    return f"{arm_title}: {m.label} is {size} than {base_title} {how}: {tail}."
