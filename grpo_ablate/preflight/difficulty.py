"""The zero-spread law over prompts of varying difficulty: fit, predict, compare.

A group of G completions teaches nothing when all G rewards agree. For a binary reward with
per-prompt success rate p that chance is p^G + (1-p)^G. Real prompts vary in p, so the share
over a prompt set is E[p^G + (1-p)^G] under the distribution of p: with p ~ Beta(a, b) it is
(B(a+G, b) + B(a, b+G)) / B(a, b). (a, b) is fitted by maximum likelihood to K samples per
prompt (a beta-binomial). For non-binary rewards, the chance that G draws from a prompt's own
K rewards all agree is averaged over prompts instead.

    python -c "from grpo_ablate.stats.zero_spread import zero_spread_beta; print(zero_spread_beta(8, 27, 122))"

The law itself lives in stats/zero_spread.py (its one owner); this module fits and compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["BetaFit", "fit_beta_binomial", "is_binary", "zero_spread_empirical"]


@dataclass(frozen=True)
class BetaFit:
    a: float
    b: float
    k: int
    n_prompts: int

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)


def is_binary(rewards: Sequence[Sequence[float]]) -> bool:
    return all(r in (0.0, 1.0) for row in rewards for r in row)


def fit_beta_binomial(successes: Sequence[int], k: int) -> BetaFit:
    """Maximum-likelihood Beta(a, b) of per-prompt success rates from `successes` out of `k` each."""
    # lazy: every command imports this module (commands/advise.py); scipy costs ~0.6 s of each command's start
    from scipy.optimize import minimize
    from scipy.stats import betabinom

    s = np.asarray(successes, dtype=float)
    mean = float(np.clip(s.mean() / k, 1e-3, 1 - 1e-3))

    def ab(theta: np.ndarray) -> tuple[float, float]:
        # (logit of the mean, log of a + b): the concentration may run to its cap when prompts are
        # equally hard (no spread beyond the binomial's) without distorting the mean.
        m = 1.0 / (1.0 + math.exp(-float(np.clip(theta[0], -30.0, 30.0))))
        c = math.exp(float(np.clip(theta[1], -9.0, 16.0)))
        return m * c, (1.0 - m) * c

    def nll(theta: np.ndarray) -> float:
        value = -float(betabinom.logpmf(s, k, *ab(theta)).sum())
        return value if math.isfinite(value) else 1e300  # where scipy's pmf underflows: never a best

    best = None
    for scale in (0.5, 2.0, 10.0, 100.0):  # a few starts: the likelihood is flat in a + b when prompts agree
        res = minimize(nll, np.array([math.log(mean / (1 - mean)), math.log(scale)]), method="Nelder-Mead",
                       options={"xatol": 1e-7, "fatol": 1e-10, "maxiter": 4000})
        if math.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        raise ValueError(f"the beta-binomial fit failed for {len(s)} prompts x {k} samples")
    a, b = ab(best.x)
    return BetaFit(float(a), float(b), k, len(s))


def zero_spread_empirical(g: int, rewards: Sequence[Sequence[float]]) -> float:
    """Non-binary rewards: the chance that G draws from a prompt's own K rewards all agree, averaged."""
    total = 0.0
    for row in rewards:
        counts: dict[float, int] = {}
        for r in row:
            counts[round(float(r), 9)] = counts.get(round(float(r), 9), 0) + 1
        total += sum((c / len(row)) ** g for c in counts.values())
    return total / len(rewards)
