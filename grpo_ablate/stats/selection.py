"""Which configuration to use, and how sure: selection over seeds within min_effect of the best.

    python -c "from grpo_ablate.stats.selection import select; \
print(select({'a': {0: .70, 1: .72, 2: .69}, 'b': {0: .60, 1: .61, 2: .63}}, min_effect=0.05))"

A user acts on one configuration. The question is not "is it better than the baseline" but "is
it within min_effect of the best", and "which others might be". Every answer here reads the one
model of stats/model.py (paired over shared seeds, a pooled variance with a floor, no arm with
fewer than model.MIN_SEEDS seeds), the same model the calls against the baseline read:

- `p_within`: the posterior probability that an arm's true mean is within min_effect of the best
  arm's, over the model's joint posterior (a multivariate Student t), DRAWS Monte Carlo draws
  with a fixed seed over the arms in sorted order (common random numbers: the same values give
  the same probabilities in any arm order, in the race and in the report). The recommended
  configuration is the arm with the highest such probability (its PCS). An arm with fewer than
  MIN_SEEDS seeds is left out (`unmeasured`).
- the eps-best set: the arms that cannot be excluded from being within min_effect of the best,
  simultaneously: arm i is excluded when some arm j beats it by more than min_effect in the
  model's one-sided t test, with Holm's adjustment over every ordered pair (i, j). Every arm
  truly within min_effect of the best has all its hypotheses "j leads i by at most min_effect"
  true, so the chance that any of them is excluded is at most alpha: the set holds every
  arm within min_effect of the best at once with probability at least 1 - alpha (family-wise).
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

from grpo_ablate.stats.model import MIN_SEEDS, Fit, clean, fit
from grpo_ablate.stats.multiplicity import holm

__all__ = ["Selection", "select", "p_within", "eps_best", "bechhofer_seeds", "bechhofer_pcs", "DRAWS", "HOW"]

DRAWS = 10000  # Monte Carlo error of a probability near 0.95: 0.002
HOW = (f"a posterior probability from one model of the seeds (arm and seed effects, paired over shared seeds, "
       f"a pooled variance with a floor; at least {MIN_SEEDS} seeds per configuration), {DRAWS:,} Monte Carlo draws")


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
        """Arms with fewer than MIN_SEEDS seeds: in the set, but left out of the probability and the tests."""
        return tuple(a for a, n in self.seeds.items() if n < MIN_SEEDS)

    def as_dict(self) -> dict[str, object]:
        return {"recommended": self.recommended, "pcs": self.pcs, "p_within": dict(self.p_within),
                "eps_best": list(self.eps_best), "excluded": dict(self.excluded), "means": dict(self.means),
                "min_effect": self.min_effect, "alpha": self.alpha, "cheapest": self.cheapest,
                "costs": dict(self.costs), "seeds": dict(self.seeds), "how": HOW}


def _clean(values: Mapping[int, float]) -> dict[int, float]:
    return clean(values)


def _p_within(f: Fit, min_effect: float, maximize: bool, draws: int, seed: int) -> dict[str, float]:
    if not f.usable:
        return {}
    mu = (1.0 if maximize else -1.0) * f.draws(draws, seed)
    within = (mu >= mu.max(axis=0) - min_effect).mean(axis=1)
    return {a: float(p) for a, p in zip(f.arms, within)}


def p_within(values: Mapping[str, Mapping[int, float]], min_effect: float, maximize: bool = True,
             draws: int = DRAWS, seed: int = 0) -> dict[str, float]:
    """P(arm within min_effect of the best) for every arm with MIN_SEEDS seeds or more (the others are
    left out); {} when fewer than two arms have them."""
    return _p_within(fit(values), min_effect, maximize, draws, seed)


def _eps_best(f: Fit, arms: list[str], min_effect: float, maximize: bool,
              alpha: float) -> tuple[list[str], dict[str, str]]:
    pairs = [(i, j) for i in f.arms for j in f.arms if i != j]
    ps: list[float | None] = []
    for i, j in pairs:
        d = f.contrast(i, j)  # j minus i
        ps.append(d.one_sided_p(min_effect if maximize else -min_effect, greater=maximize) if d is not None else None)
    adjusted = holm(ps)
    excluded: dict[str, str] = {}
    best_by: dict[str, float] = {}
    for (i, j), p in zip(pairs, adjusted):
        if p is not None and p < alpha and (i not in excluded or p < best_by[i]):
            excluded[i], best_by[i] = j, p  # the rival with the strongest evidence
    return [a for a in arms if a not in excluded], excluded


def eps_best(values: Mapping[str, Mapping[int, float]], min_effect: float, maximize: bool = True,
             alpha: float = 0.05) -> tuple[list[str], dict[str, str]]:
    """(arms not excluded from being within min_effect of the best, {excluded arm: by which arm}), the
    exclusions simultaneous at family-wise level alpha (module docstring); arms with fewer than
    MIN_SEEDS seeds are never excluded."""
    arms = [a for a in values if _clean(values[a])]
    return _eps_best(fit(values), arms, min_effect, maximize, alpha)


def select(values: Mapping[str, Mapping[int, float]], min_effect: float, *, maximize: bool = True,
           alpha: float = 0.05, costs: Mapping[str, float] | None = None, draws: int = DRAWS,
           seed: int = 0) -> Selection:
    """The recommendation, its PCS, the eps-best set and its cheapest member (see the module docstring).

    An arm with fewer than MIN_SEEDS seeds has no test: it is left out of the probability
    (`unmeasured`) and stays in the set. Fewer than two arms with MIN_SEEDS seeds: the
    recommendation is the best mean, with no probability.
    """
    vals = {a: _clean(v) for a, v in values.items() if _clean(v)}
    sign = 1.0 if maximize else -1.0
    means = {a: float(np.mean(list(v.values()))) for a, v in vals.items()}
    if not vals:
        return Selection(None, None, {}, (), {}, {}, min_effect, alpha)
    f = fit(vals)
    probs = _p_within(f, min_effect, maximize, draws, seed)
    if probs:
        rec = max(sorted(probs), key=lambda a: (round(probs[a], 6), sign * means[a]))
    else:
        rec = max(sorted(vals), key=lambda a: sign * means[a])
    keep, excluded = _eps_best(f, list(vals), min_effect, maximize, alpha)
    keep.sort(key=lambda a: (-sign * means[a], a))
    priced = {a: float(costs[a]) for a in keep if costs and costs.get(a) is not None}
    cheapest = min(priced, key=lambda a: (priced[a], -sign * means[a], a)) if priced else None
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


