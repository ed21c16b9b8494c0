"""Which configuration to use, and how sure: selection over seeds within min_effect of the best.

    python -c "from grpo_ablate.stats.selection import select; \
print(select({'a': {0: .70, 1: .72, 2: .69}, 'b': {0: .60, 1: .61, 2: .63}}, min_effect=0.05))"

A user acts on one configuration. The question is not "is it better than the baseline" but "is
it within min_effect of the best", and "which others might be". Three answers, one per question:

- `p_within`: the posterior probability that an arm's true mean is within min_effect of the best
  arm's. Each arm's seeds are taken as normal with unknown mean and spread and the reference
  prior, so its mean's posterior is a scaled Student t (mean + sd / sqrt(n) * t_{n-1}); arms are
  drawn independently (measured on the built-in tasks: arms are uncorrelated within a seed, so
  pairing shrinks nothing; where arms are positively correlated this overstates the spread of a
  difference, i.e. errs on the cautious side). Monte Carlo over DRAWS joint draws, fixed seed.
  The recommended configuration is the arm with the highest such probability (the "probability
  of correct selection", PCS, of choosing it).
- the eps-best set: the arms that cannot be excluded from being within min_effect of the best.
  An arm i is excluded when some arm j beats it by more than min_effect in a one-sided t test
  (paired over shared seeds, Welch otherwise: stats.seeds.mean_difference) at level alpha/(k-1)
  (Bonferroni over i's k-1 rivals), so the truly best arm, and each arm within min_effect of it,
  stays in the set with probability at least 1 - alpha whatever the other means are.
- the cheapest arm in the eps-best set, by the cost the caller gives (generated tokens).
`bechhofer_seeds` is the fixed-size design's yardstick: Bechhofer's (1954, Ann. Math. Statist.
25(1)) indifference-zone number of seeds per arm that picks the best with probability P* when it
leads the rest by min_effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
from scipy import integrate
from scipy import stats as st

from grpo_ablate.stats.seeds import mean_difference

__all__ = ["Selection", "select", "p_within", "eps_best", "bechhofer_seeds", "bechhofer_pcs", "DRAWS", "HOW"]

DRAWS = 10000  # Monte Carlo error of a probability near 0.95: 0.002
HOW = (f"a posterior probability over the seeds: each arm's mean a Student t posterior from its own seeds, "
       f"{DRAWS:,} Monte Carlo draws")


@dataclass(frozen=True)
class Selection:
    """The answer a user acts on; `p_within[a]` is P(arm a within min_effect of the best)."""

    recommended: str | None
    pcs: float | None  # p_within of the recommended arm; None below two seeds per arm
    p_within: dict[str, float]
    eps_best: tuple[str, ...]  # arms not excluded, best mean first
    excluded: dict[str, str]  # arm -> the arm that excludes it
    means: dict[str, float]
    min_effect: float
    alpha: float
    cheapest: str | None = None  # the cheapest arm of eps_best by the caller's cost
    costs: dict[str, float] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)  # seeds per arm

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """Arms with a single seed: in the set, but left out of the probability."""
        return tuple(a for a, n in self.seeds.items() if n < 2)

    def as_dict(self) -> dict[str, object]:
        return {"recommended": self.recommended, "pcs": self.pcs, "p_within": dict(self.p_within),
                "eps_best": list(self.eps_best), "excluded": dict(self.excluded), "means": dict(self.means),
                "min_effect": self.min_effect, "alpha": self.alpha, "cheapest": self.cheapest,
                "costs": dict(self.costs), "seeds": dict(self.seeds), "how": HOW}


def _clean(values: Mapping[int, float]) -> dict[int, float]:
    return {s: float(v) for s, v in values.items() if v is not None and math.isfinite(float(v))}


def p_within(values: Mapping[str, Mapping[int, float]], min_effect: float, maximize: bool = True,
             draws: int = DRAWS, seed: int = 0) -> dict[str, float]:
    """P(arm within min_effect of the best) for every arm with two or more seeds (a single seed says nothing
    about spread, so such an arm is left out); {} when fewer than two arms have two seeds."""
    arms = [a for a in values if len(_clean(values[a])) >= 2]
    if len(arms) < 2:
        return {}
    rng = np.random.default_rng(seed)
    sign = 1.0 if maximize else -1.0
    mu = np.empty((len(arms), draws))
    for i, a in enumerate(arms):
        x = np.fromiter(_clean(values[a]).values(), float)
        n = x.size
        mu[i] = sign * (x.mean() + x.std(ddof=1) / math.sqrt(n) * rng.standard_t(n - 1, size=draws))
    within = (mu >= mu.max(axis=0) - min_effect).mean(axis=1)
    return {a: float(p) for a, p in zip(arms, within)}


def eps_best(values: Mapping[str, Mapping[int, float]], min_effect: float, maximize: bool = True,
             alpha: float = 0.05) -> tuple[list[str], dict[str, str]]:
    """(arms not excluded from being within min_effect of the best, {excluded arm: by which arm})."""
    arms = [a for a in values if _clean(values[a])]
    k = len(arms)
    excluded: dict[str, str] = {}
    if k < 2:
        return arms, excluded
    level = alpha / (k - 1)
    for i in arms:
        for j in arms:
            if i == j:
                continue
            d = mean_difference(_clean(values[i]), _clean(values[j]))  # j minus i
            if d is None:
                continue
            p = d.one_sided_p(min_effect if maximize else -min_effect, greater=maximize)
            if p is not None and p < level:
                excluded[i] = j
                break
    return [a for a in arms if a not in excluded], excluded


def select(values: Mapping[str, Mapping[int, float]], min_effect: float, *, maximize: bool = True,
           alpha: float = 0.05, costs: Mapping[str, float] | None = None, draws: int = DRAWS) -> Selection:
    """The recommendation, its PCS, the eps-best set and its cheapest member (see the module docstring).

    An arm with a single seed has no spread: it is left out of the probability (`unmeasured`) and
    stays in the set. Fewer than two arms with two seeds: the recommendation is the best mean,
    with no probability.
    """
    vals = {a: _clean(v) for a, v in values.items() if _clean(v)}
    sign = 1.0 if maximize else -1.0
    means = {a: float(np.mean(list(v.values()))) for a, v in vals.items()}
    probs = p_within(vals, min_effect, maximize, draws)
    if not vals:
        return Selection(None, None, {}, (), {}, {}, min_effect, alpha)
    if probs:
        rec = max(probs, key=lambda a: (round(probs[a], 6), sign * means[a]))
    else:
        rec = max(vals, key=lambda a: sign * means[a])
    keep, excluded = eps_best(vals, min_effect, maximize, alpha)
    keep.sort(key=lambda a: -sign * means[a])
    priced = {a: float(costs[a]) for a in keep if costs and costs.get(a) is not None}
    cheapest = min(priced, key=lambda a: (priced[a], -sign * means[a])) if priced else None
    return Selection(rec, probs.get(rec) if probs else None, probs, tuple(keep), excluded, means, min_effect, alpha,
                     cheapest, {a: float(c) for a, c in (costs or {}).items() if c is not None},
                     {a: len(v) for a, v in vals.items()})


def bechhofer_pcs(k: int, seeds: float, delta: float, sd: float) -> float:
    """P(the best of k independent normal arms has the best mean of `seeds` seeds) when it leads by delta."""
    shift = delta * math.sqrt(seeds) / sd
    val, _ = integrate.quad(lambda z: st.norm.pdf(z) * st.norm.cdf(z + shift) ** (k - 1), -12, 12, limit=200)
    return float(val)


def bechhofer_seeds(k: int, delta: float, sd: float, pcs: float = 0.95) -> int:
    """Bechhofer's indifference-zone seeds per arm: the fewest with P(correct selection) >= pcs."""
    if k < 2:
        return 1
    n = 1
    while bechhofer_pcs(k, n, delta, sd) < pcs:
        n += 1
        if n > 100000:
            raise ValueError("more than 100,000 seeds per arm")
    return n


