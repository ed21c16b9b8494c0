"""Seed statistics: mean, spread and 95% intervals from a handful of seeds.

    python -c "from grpo_ablate.report.stats import stat; print(stat([1.0, 1.2, 0.9]))"

Arms run over 1-5 seeds, so Student's t is used rather than the normal 1.96, which would claim
far more certainty than the data holds. The quantiles come from a table (no scipy for one
number); between rows the next smaller df is used, which errs on the wide side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from grpo_ablate.vocab import finite

__all__ = ["MetricStat", "Difference", "stat", "difference", "t975"]

# Two-sided 95% Student t quantiles (0.975) by degrees of freedom.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t; fractional df (Welch) round down, i.e. wider."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    d = int(math.floor(df))
    if d in _T975:
        return _T975[d]
    if d > 120:
        return 1.960
    return _T975[max(k for k in _T975 if k <= d)]


@dataclass(frozen=True)
class MetricStat:
    """One metric of one arm over its seeds."""

    n: int
    mean: float | None
    std: float | None  # sample standard deviation (ddof=1); None below two seeds
    # None below two seeds (one seed says nothing about spread); cut to the range the quantity
    # can take (no negative memory), so it need not be symmetric around the mean
    ci95: tuple[float, float] | None
    values: tuple[float, ...]

    @property
    def half_width(self) -> float | None:
        """The t interval's half-width, before it was cut to the metric's range."""
        if self.std is None or self.n < 2:
            return None
        return t975(self.n - 1) * self.std / math.sqrt(self.n)

    @property
    def errors(self) -> tuple[float, float] | None:
        """(below, above) the mean: what an error bar draws."""
        if self.ci95 is None or self.mean is None:
            return None
        return self.mean - self.ci95[0], self.ci95[1] - self.mean

    def as_dict(self) -> dict[str, object]:
        return {
            "mean": self.mean,
            "std": self.std,
            "ci95": list(self.ci95) if self.ci95 is not None else None,
            "n": self.n,
        }


def stat(values: Iterable[object], *, low: float | None = None, high: float | None = None) -> MetricStat:
    """Mean, sample std and t-based 95% interval of the finite values, the interval within [low, high]."""
    xs = tuple(v for v in (finite(x) for x in values) if v is not None)
    n = len(xs)
    if n == 0:
        return MetricStat(0, None, None, None, ())
    mean = math.fsum(xs) / n
    if n == 1:
        return MetricStat(1, mean, None, None, xs)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    std = math.sqrt(var)
    half = t975(n - 1) * std / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if low is not None:  # never past the mean, should a value break the bound
        lo = max(lo, min(low, mean))
    if high is not None:
        hi = min(hi, max(high, mean))
    return MetricStat(n, mean, std, (lo, hi), xs)


@dataclass(frozen=True)
class Difference:
    """B minus A for one metric, with Welch's 95% interval when both sides have two seeds."""

    delta: float
    relative: float | None  # delta / |A|; None when A is 0
    ci95: tuple[float, float] | None
    clear: bool | None  # the interval excludes 0; None when it cannot be computed


def difference(a: MetricStat, b: MetricStat) -> Difference | None:
    """How far b's mean is from a's, and whether seeds' spread could explain it."""
    if a.mean is None or b.mean is None:
        return None
    delta = b.mean - a.mean
    relative = delta / abs(a.mean) if a.mean != 0 else None
    if a.std is None or b.std is None:
        return Difference(delta, relative, None, None)
    va, vb = a.std**2 / a.n, b.std**2 / b.n
    se = math.sqrt(va + vb)
    if se == 0:
        return Difference(delta, relative, (delta, delta), delta != 0)
    df = (va + vb) ** 2 / ((va**2 / (a.n - 1)) + (vb**2 / (b.n - 1)))
    half = t975(max(df, 1.0)) * se
    lo, hi = delta - half, delta + half
    return Difference(delta, relative, (lo, hi), not (lo <= 0 <= hi))
