"""Seed statistics: mean, spread and 95% intervals from a handful of seeds.

    python -c "from grpo_ablate.stats.seeds import stat; print(stat([1.0, 1.2, 0.9]))"

Arms run over 1-5 seeds, so Student's t is used rather than the normal 1.96, which would claim
far more certainty than the data holds. Per-arm intervals use a quantile table (this part is
stdlib only, so the command line's tables import it cheaply); between rows the next smaller
df is used, which errs on the wide side. The arm-vs-baseline tests and their power (paired or
Welch t, one rule chosen from the design: `mean_difference`; detectable difference, seeds
needed) use scipy, imported when first called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from grpo_ablate.core.vocab import finite

__all__ = ["MetricStat", "Difference", "stat", "difference", "t975", "Comparison", "compare_to_baseline",
           "model_comparison", "MODEL_PAIRED", "MODEL_UNPAIRED", "TOO_FEW",
           "MeanDifference", "mean_difference",
           "detectable_difference", "seeds_needed", "coefficient_of_variation", "ALPHA", "POWER", "MAX_SEEDS"]

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
    bounded: bool = False  # ci95 is the betting interval for a mean inside [low, high] (stats/bounded.py), not t's

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


def stat(values: Iterable[object], *, low: float | None = None, high: float | None = None,
         bounded: bool = False) -> MetricStat:
    """Mean, sample std and t-based 95% interval of the finite values, the interval within [low, high].

    `bounded` (low and high given, the values known to lie between them): the interval is the betting
    interval for a bounded mean (stats/bounded.py) instead of a t interval cut at the bounds."""
    xs = tuple(v for v in (finite(x) for x in values) if v is not None)
    n = len(xs)
    if n == 0:
        return MetricStat(0, None, None, None, ())
    mean = math.fsum(xs) / n
    if n == 1:
        return MetricStat(1, mean, None, None, xs)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    std = math.sqrt(var)
    if bounded and low is not None and high is not None and all(low <= x <= high for x in xs):
        from grpo_ablate.stats.bounded import bounded_interval  # numpy, only when a bounded interval is asked for

        return MetricStat(n, mean, std, bounded_interval(xs, low, high), xs, True)
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


# ---------------------------------------------------------------- arm vs baseline, with power

ALPHA = 0.05  # two-sided
POWER = 0.8
MAX_SEEDS = 1000  # "seeds needed" beyond this is reported as more than this


MODEL_PAIRED, MODEL_UNPAIRED = "model paired", "model unpaired"  # Comparison.kind of a one-model contrast
TOO_FEW = "too few seeds"  # Comparison.kind of an arm the one model left out (fewer than 3 seeds): no test


@dataclass(frozen=True)
class Comparison:
    """An arm's metric minus the baseline's, with the test that backs it.

    `kind` says which comparison was used (`mean_difference`'s rule): "paired" (Student t on the
    per-seed differences, at least two seeds shared by both arms), "welch" (unpaired, unequal
    variances), or "single seed" (no spread, so no test); or, for a contrast of stats/model.py's
    one model (the model the calls and the probability read), MODEL_PAIRED / MODEL_UNPAIRED; TOO_FEW
    for an arm that model left out (fewer than 3 seeds: the difference of the means, no interval, no
    test). `sd` and `n` are what the power figures use: the SD of the paired differences over n
    pairs, or the pooled per-arm SD with n seeds per arm.
    """

    kind: str
    delta: float
    ci95: tuple[float, float] | None
    p_value: float | None
    n: int
    sd: float | None

    @property
    def clear(self) -> bool | None:
        """The interval excludes zero (p < 0.05); None when no test was possible."""
        if self.ci95 is None:
            return None
        lo, hi = self.ci95
        return not (lo <= 0 <= hi)

    @property
    def words(self) -> str:
        """'paired t over 3 shared seeds' / 'Welch t (unpaired), 3 vs 2 seeds' / 'a single seed'."""
        if self.kind == "paired":
            return f"paired t test over {self.n} shared seeds"
        if self.kind == MODEL_PAIRED:
            return (f"paired t test over {self.n} shared seeds, in one model of every arm (the pair's own variance, "
                    f"moderated toward the pooled one, floored)")
        if self.kind == MODEL_UNPAIRED:
            return (f"t test over {self.n} seeds per arm, in one model of every arm's mean (each arm's own variance, "
                    f"moderated toward the pooled one, floored)")
        if self.kind == "welch":
            return f"Welch t test (unpaired) over {self.n} seeds per arm"
        if self.kind == TOO_FEW and self.n > 1:
            return f"{self.n} seeds, fewer than the 3 a test needs (no test)"
        return "a single seed (no test possible)"

    def as_dict(self) -> dict[str, object]:
        return {"comparison": self.kind, "delta": self.delta, "ci95": list(self.ci95) if self.ci95 else None,
                "p_value": self.p_value, "n": self.n, "sd": self.sd, "clear": self.clear}


def _t_ppf(q: float, df: float) -> float:
    # lazy: scipy when first called; the tables import this module stdlib-only (docstring)
    from scipy import stats as st

    return float(st.t.ppf(q, df))


@dataclass(frozen=True)
class MeanDifference:
    """b minus a from seeds: the one test every comparison in the package uses.

    The rule is chosen from the design, before any value is seen: "paired" (Student t on the
    per-seed differences) when the arms share at least two seeds (a planned study runs every arm
    on the same seeds, same data order and initialisation); "welch" (unequal variances) when they
    do not (an adaptive study's arms). The old rule, the narrower of the two intervals, chose
    after seeing the data and rejected a true null 5.7% of the time at a nominal 5%.
    """

    kind: str  # paired | welch
    mean: float
    se: float
    df: float
    n: int  # pairs (paired) or the smaller arm's seeds (welch)
    sd: float  # of the paired differences, or the pooled per-arm SD

    def _t(self, null: float) -> float:
        if self.se == 0:
            return math.copysign(math.inf, self.mean - null) if self.mean != null else 0.0
        return (self.mean - null) / self.se

    def two_sided_p(self, null: float = 0.0) -> float:
        from scipy.special import stdtr  # Student t's cdf without scipy.stats' per-call overhead

        t = self._t(null)
        return float(2 * stdtr(self.df, -abs(t))) if math.isfinite(t) else 0.0

    def one_sided_p(self, null: float = 0.0, greater: bool = True) -> float:
        """p of "the difference exceeds `null`" (greater) or "falls below it"."""
        # lazy: scipy when first called; the tables import this module stdlib-only (docstring)
        from scipy.special import stdtr

        t = self._t(null) if greater else -self._t(null)
        if not math.isfinite(t):
            return 0.0 if t > 0 else 1.0
        return float(stdtr(self.df, -t))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        half = _t_ppf(0.5 + level / 2, self.df) * self.se if self.se > 0 else 0.0
        return self.mean - half, self.mean + half


def mean_difference(a: Mapping[int, float], b: Mapping[int, float]) -> MeanDifference | None:
    """b minus a over seeds ({seed: value}, finite values); None when neither test is possible."""
    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        d = [b[s] - a[s] for s in shared]
        n = len(d)
        mean = math.fsum(d) / n
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
        return MeanDifference("paired", mean, sd / math.sqrt(n), n - 1, n, sd)
    xa, xb = list(a.values()), list(b.values())
    if len(xa) < 2 or len(xb) < 2:
        return None
    ma, mb = math.fsum(xa) / len(xa), math.fsum(xb) / len(xb)
    va = math.fsum((x - ma) ** 2 for x in xa) / (len(xa) - 1)
    vb = math.fsum((x - mb) ** 2 for x in xb) / (len(xb) - 1)
    se2 = va / len(xa) + vb / len(xb)
    df = se2**2 / ((va / len(xa)) ** 2 / (len(xa) - 1) + (vb / len(xb)) ** 2 / (len(xb) - 1)) if se2 > 0 else \
        float(len(xa) + len(xb) - 2)
    return MeanDifference("welch", mb - ma, math.sqrt(se2), df, min(len(xa), len(xb)), math.sqrt((va + vb) / 2))


def compare_to_baseline(base: Mapping[int, float], arm: Mapping[int, float], *,
                        low: float | None = None, high: float | None = None) -> Comparison | None:
    """The arm minus the baseline on one metric, by seed ({seed: value}); None when either is empty.

    `mean_difference`'s one rule (paired over shared seeds, else Welch), at 95%, one comparison
    alone: no floor under a tie's spread and a test from two seeds. The report never calls it (its
    calls read stats/model.py's one model: report.arms.baseline_calls); the older benchmarks
    (per_prompt_g.py, adaptive.py) keep it so their committed figures stay reproducible. The
    interval is cut to the range a difference of the quantity can take ([low - high, high - low]).
    """
    b = {s: v for s, v in ((s, finite(x)) for s, x in base.items()) if v is not None}
    a = {s: v for s, v in ((s, finite(x)) for s, x in arm.items()) if v is not None}
    if not a or not b:
        return None
    d = mean_difference(b, a)
    if d is None:
        delta = math.fsum(a.values()) / len(a) - math.fsum(b.values()) / len(b)
        return Comparison("single seed", delta, None, None, 1, None)
    lo, hi = d.interval(0.95)
    if low is not None and high is not None:
        span = high - low
        lo, hi = max(lo, -span), min(hi, span)
    p = d.two_sided_p() if d.se > 0 else (0.0 if d.mean != 0 else 1.0)
    return Comparison(d.kind, d.mean, (lo, hi), p, d.n, d.sd)


def model_comparison(d: MeanDifference, *, low: float | None = None, high: float | None = None) -> Comparison:
    """A contrast of stats/model.py's one model as a Comparison: the interval and p the calls read, so a
    tie among a few seeds (sd 0 alone) keeps the model's floored spread instead of a zero-width interval.
    The interval is cut to the range a difference of the quantity can take, as compare_to_baseline's."""
    lo, hi = d.interval(0.95)
    if low is not None and high is not None:
        span = high - low
        lo, hi = max(lo, -span), min(hi, span)
    kind = MODEL_PAIRED if d.kind == "paired" else MODEL_UNPAIRED
    return Comparison(kind, d.mean, (lo, hi), d.two_sided_p(), d.n, d.sd)


def _power(delta: float, sd: float, n: int, paired: bool, alpha: float = ALPHA) -> float:
    """Power of the two-sided t test to see a true difference `delta` (noncentral t)."""
    # lazy: scipy when first called; the tables import this module stdlib-only (docstring)
    from scipy import stats as st

    if paired:
        df, ncp = n - 1, delta / (sd / math.sqrt(n))
    else:  # two arms of n seeds each, equal spread
        df, ncp = 2 * n - 2, delta / (sd * math.sqrt(2.0 / n))
    ncp = abs(ncp)
    crit = _t_ppf(1 - alpha / 2, df)
    upper = float(st.nct.sf(crit, df, ncp))
    lower = float(st.nct.cdf(-crit, df, ncp))  # the wrong-sign tail: negligible, and scipy's NaN far out
    if not math.isfinite(upper):  # scipy's noncentral t fails far in the tails: the normal limit
        upper = float(st.norm.sf(crit - ncp))
    return min(1.0, upper + (lower if math.isfinite(lower) else 0.0))


def detectable_difference(sd: float, n: int, paired: bool = True, power: float = POWER,
                          alpha: float = ALPHA) -> float | None:
    """The smallest true difference a study of n seeds would detect with `power` at `alpha`.

    From the observed spread `sd` (of the paired differences, or of one arm for unpaired);
    None below two seeds or without spread.
    """
    if n < 2 or not sd or not math.isfinite(sd) or sd <= 0:
        return None
    # lazy: scipy when first called; the tables import this module stdlib-only (docstring)
    from scipy.optimize import brentq

    hi = sd
    while _power(hi, sd, n, paired, alpha) < power:
        hi *= 2
        if hi > sd * 1e6:
            return None
    return float(brentq(lambda d: _power(d, sd, n, paired, alpha) - power, 0.0, hi, xtol=sd * 1e-6))


def seeds_needed(delta: float, sd: float, paired: bool = True, power: float = POWER,
                 alpha: float = ALPHA) -> int | None:
    """About how many seeds would detect a true difference `delta` (smallest n reaching `power`).

    None when delta is 0 or there is no spread; MAX_SEEDS + 1 when even MAX_SEEDS would not do.
    """
    if not delta or not sd or not math.isfinite(sd) or sd <= 0:
        return None
    delta = abs(delta)

    def enough(n: int) -> bool:
        return _power(delta, sd, n, paired, alpha) >= power - 1e-6  # brentq's root of the same curve

    if not enough(MAX_SEEDS):
        return MAX_SEEDS + 1
    lo, hi = 1, MAX_SEEDS  # power grows with n: the smallest n that is enough, by bisection
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return max(2, hi)


def coefficient_of_variation(values: Iterable[object]) -> float | None:
    """Sample SD over mean; None below two values or at a zero mean."""
    xs = [v for v in (finite(x) for x in values) if v is not None]
    if len(xs) < 2:
        return None
    mean = math.fsum(xs) / len(xs)
    if mean == 0:
        return None
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    return sd / abs(mean)
