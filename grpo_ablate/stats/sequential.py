"""Anytime-valid comparisons of paired differences: confidence sequences and the one rule on them.

    python -c "from grpo_ablate.stats.sequential import classify; \
print(classify([0.3, 0.25, 0.35, 0.3, 0.28, 0.33], min_effect=0.05, bound=1.0))"

An open-ended study (the anytime race, study/racing.py with racing.design "anytime") looks at its
comparisons after every round of seeds with no planned last look; a planned study's race uses
group-sequential error spending instead (stats/spending.py), which pays only for its planned
looks (at 12 seeds this sequence needs |t| > 3.68 where one t-test needs 2.20). A t-test
repeated at every look rejects a true null far more often than its nominal 5 %; a confidence sequence (CS) is a sequence of intervals that all cover the true mean at once, with
probability at least 1 - alpha, so it may be read after every seed and the study may stop on it.

Two sequences, both for the mean of paired differences d_i (arm minus reference, same seed):

- `betting_cs`: assumption-free for bounded data. Waudby-Smith & Ramdas, "Estimating means of
  bounded random variables by betting", JRSSB 86(1), 2024: the hedged capital process (their
  Section 4.2, theta = 1/2) with predictable plug-in bets (their eq. for lambda^PrPl, truncated at
  c/m and c/(1-m), c = 3/4), evaluated on a grid of candidate means; the CS at time t is the set of
  candidates whose capital has stayed below 1/alpha, intersected over time. Differences must lie
  in [-bound, +bound] (for a reward in [0, 1]: bound 1). Honest but slow at few seeds: with n
  observations no candidate can be rejected unless |d| is a large share of the bound (every
  observation multiplies the capital by at most 1 + c(x - m)/m), so at 12 seeds it only settles
  differences above roughly 0.3 x bound.
- `t_cs` (the anytime race's default): ASSUMES the paired differences are independent draws from
  a normal distribution (the paired t-test's assumption, here needed at every look). It is not
  robust to skew: on lognormal-skewed differences it missed the true mean 14.5% of the time
  where 5% was asked (issue 26's measurement); for a bounded objective with skewed seed noise
  use `betting_cs`. Its construction is the scale-invariant mixture martingale of Lai
  (1976, "On confidence sequences", Ann. Statist. 4(2)) as written by Wang & Ramdas, "Anytime-valid
  t-tests and confidence sequences for Gaussian means with unknown variance", Sequential Analysis
  2024: for each candidate mean mu0, with t the one-sample t statistic of (d - mu0) over n
  observations and a normal mixture of precision `rho` over the standardised effect,
      M_n(mu0) = (rho/(n+rho))^(1/2) * ((1 + t^2/(n-1)) / (1 + t^2 rho/((n-1)(n+rho))))^(n/2)
  is a nonnegative martingale under mu0 (scale-invariant filtration, n >= 2), so by Ville's
  inequality {mu0 : M_n(mu0) < 1/alpha} is a CS. It needs two observations and no bound.

`classify` turns a CS into the words the study uses everywhere (racing, stopping, the verdict):
better / worse (the CS excludes 0 on that side), equivalent (the whole CS inside +-min_effect),
undecided otherwise. The tests measure the coverage of both sequences against a repeated t-test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

__all__ = ["Interval", "betting_cs", "t_cs", "confidence_sequence", "classify", "Call", "BETTER", "WORSE",
           "EQUIVALENT", "UNDECIDED", "CALLS", "METHODS", "ALPHA"]

ALPHA = 0.05
BETTER, WORSE, EQUIVALENT, UNDECIDED = "better", "worse", "equivalent", "undecided"
CALLS = (BETTER, WORSE, EQUIVALENT, UNDECIDED)
METHODS = ("t", "betting")
_GRID = 2001  # candidate means for the betting CS (resolution: bound / 1000)
_RHO = 1.0  # the t-CS's mixture precision: tuned for effects of about one standard deviation


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"low": self.low, "high": self.high, "n": self.n}


def betting_cs(diffs: Sequence[float], bound: float, alpha: float = ALPHA, c: float = 0.75,
               grid: int = _GRID, horizon: int | None = None) -> list[Interval]:
    """The hedged betting CS for the mean of `diffs` (each in [-bound, bound]) after every observation.

    `horizon`: the sample size is fixed and known (a confidence interval, not a sequence): the bets are tuned to
    it (WSR's predictable plug-in for a fixed n, their Section 4), which narrows the last interval."""
    if bound <= 0:
        raise ValueError(f"bound must be > 0, got {bound}")
    x = (np.asarray(diffs, dtype=float) + bound) / (2 * bound)  # onto [0, 1]
    if x.size and (x.min() < -1e-12 or x.max() > 1 + 1e-12):
        raise ValueError(f"a difference lies outside [-{bound}, {bound}]")
    x = np.clip(x, 0.0, 1.0)
    m = np.linspace(0.0, 1.0, grid)
    log_plus = np.zeros(grid)
    log_minus = np.zeros(grid)
    alive: np.ndarray = np.ones(grid, dtype=bool)
    s, s2 = 0.5, 0.25  # the plug-in mean's and variance's priors (WSR: mu_0 = 1/2, sigma_0^2 = 1/4)
    out: list[Interval] = []
    threshold = math.log(1.0 / alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        for t, xi in enumerate(x, start=1):
            var_hat = s2 / t  # from observations before t (predictable)
            lam = math.sqrt(2 * math.log(2 / alpha) / (var_hat * (horizon if horizon else t * math.log(t + 1))))
            lp = np.minimum(lam, c / np.maximum(m, 1e-12))
            lm = np.minimum(lam, c / np.maximum(1 - m, 1e-12))
            log_plus += np.log1p(lp * (xi - m))
            log_minus += np.log1p(-lm * (xi - m))
            # the hedged capital max(K+/2, K-/2) reaching 1/alpha rejects the candidate for good
            alive &= np.maximum(log_plus, log_minus) - math.log(2) < threshold
            s += xi
            s2 += (xi - s / (t + 1)) ** 2
            if alive.any():
                lo, hi = m[alive].min(), m[alive].max()
            else:  # numerically empty: the last mean itself
                lo = hi = float(np.clip(s / (t + 1), 0, 1))
            out.append(Interval(float(lo * 2 * bound - bound), float(hi * 2 * bound - bound), t))
    return out


def _lai_log_m(n: int, t2: np.ndarray, rho: float) -> np.ndarray:
    nu = n - 1
    return 0.5 * math.log(rho / (n + rho)) + (n / 2) * (np.log1p(t2 / nu) - np.log1p(t2 * rho / (nu * (n + rho))))


@lru_cache(maxsize=4096)
def _t_star(n: int, alpha: float, rho: float) -> float:
    """The |t| at which M_n reaches 1/alpha (it depends on n only); inf when M_n never does."""
    target = math.log(1.0 / alpha)
    f = lambda tt: float(_lai_log_m(n, np.array([tt * tt]), rho)[0]) - target  # noqa: E731
    # as t grows M_n tends to ((n+rho)/rho)^((n-1)/2): below 1/alpha (few observations) no
    # candidate can be rejected, and the CS is the whole line
    if (n - 1) / 2 * math.log((n + rho) / rho) <= target:
        return math.inf
    # lazy: every command imports this module (through report/); scipy costs ~0.6 s of each command's start
    from scipy.optimize import brentq

    top = 10.0
    while f(top) < 0:
        top *= 10
    return float(brentq(f, 0.0, top, xtol=1e-12))


def t_cs(diffs: Sequence[float], alpha: float = ALPHA, rho: float = _RHO) -> list[Interval]:
    """Lai's t confidence sequence for the mean of `diffs` after every observation (infinite before two).

    M_n(mu0) depends on mu0 only through t^2 and grows with it, so the CS at n is the symmetric
    interval mean +- t*_n s / sqrt(n), with t*_n solving M_n = 1/alpha; the running intersection
    keeps it nested.
    """
    d = np.asarray(diffs, dtype=float)
    out: list[Interval] = []
    lo, hi = -math.inf, math.inf
    for n in range(1, d.size + 1):
        if n >= 2:
            xs = d[:n]
            mean, sd = float(xs.mean()), float(xs.std(ddof=1))
            star = _t_star(n, alpha, rho)
            half = math.inf if math.isinf(star) else star * sd / math.sqrt(n)
            lo, hi = max(lo, mean - half), min(hi, mean + half)
            if lo > hi:  # the running intersection can only empty by chance (probability <= alpha)
                lo = hi = mean
        out.append(Interval(lo, hi, n))
    return out


def confidence_sequence(diffs: Sequence[float], *, method: str = "t", bound: float | None = None,
                        alpha: float = ALPHA) -> list[Interval]:
    if method == "betting":
        if bound is None:
            raise ValueError("the betting CS needs the differences' bound")
        return betting_cs(diffs, bound, alpha)
    if method == "t":
        return t_cs(diffs, alpha)
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


@dataclass(frozen=True)
class Call:
    """One arm against its reference: the call, the CS it rests on, and the observations it used."""

    call: str
    interval: Interval | None
    mean: float | None

    def as_dict(self) -> dict[str, object]:
        return {"call": self.call, "mean": self.mean, "cs": self.interval.as_dict() if self.interval else None}


def classify(diffs: Sequence[float], *, min_effect: float, maximize: bool = True, method: str = "t",
             bound: float | None = None, alpha: float = ALPHA) -> Call:
    """better / worse / equivalent / undecided for `diffs` (arm minus reference, paired by seed).

    equivalent: the whole CS inside [-min_effect, +min_effect] (checked first: a difference the
    data supports but too small to act on is a tie); better / worse: the CS wholly on that side of
    0; undecided otherwise. When maximize is False a lower value is better.
    """
    if not diffs:
        return Call(UNDECIDED, None, None)
    cs = confidence_sequence(diffs, method=method, bound=bound, alpha=alpha)[-1]
    mean = float(np.mean(diffs))
    lo, hi = (cs.low, cs.high) if maximize else (-cs.high, -cs.low)
    if -min_effect <= lo and hi <= min_effect:
        call = EQUIVALENT
    elif lo > 0:
        call = BETTER
    elif hi < 0:
        call = WORSE
    else:
        call = UNDECIDED
    return Call(call, cs, mean)
