"""Which configuration to use, and how sure: selection over seeds within min_effect of the best.

    python -c "from grpo_ablate.stats.selection import select; \
print(select({'a': {0: .70, 1: .72, 2: .69}, 'b': {0: .60, 1: .61, 2: .63}}, min_effect=0.05))"

A user acts on one configuration. The question is not "is it better than the baseline" but "is
it within min_effect of the best", and "which others might be". Every answer here reads the one
model of stats/model.py (paired over shared seeds, each contrast its own moderated variance with a
floor, no arm with fewer than model.MIN_SEEDS seeds), the same model the calls against the baseline read:

- `p_within`: the model's posterior probability that an arm's true mean is within min_effect of
  the best arm's (a multivariate Student t, DRAWS Monte Carlo draws with a fixed seed, laid out by
  the arms' values, not their names). It is a **model posterior, not a frequency**: in a world
  where one arm leads the rest by just over min_effect it is optimistic (an arm min_effect behind
  counts as within half the time), where arms tie it is cautious (any pick is right);
  benchmarks/calibration.py measures it world by world. The page says so beside it, and states the
  design's frequentist guarantee next to it (`design_pcs`).
- `leader`: the arm with the highest such probability (ties broken by the mean, then by the values,
  never by the name).
- the single recommendation (`recommend`, issue 49): among the arms whose probability reaches the
  study's confidence, the cheapest (the caller's cost: GPU-hours per optimizer step, or generated
  tokens); none reaching it: keep the reference (the baseline: the user's own recipe), naming the
  closest contender and its probability. Without a reference, or with one the eps-best set excludes
  (some arm leads it by more than min_effect, simultaneously at alpha: keeping it would contradict the
  page's own exclusion), the most probable arm not excluded, its probability below the confidence.
- the eps-best set: the arms that cannot be excluded from being within min_effect of the best,
  simultaneously: arm i is excluded when some arm j beats it by more than min_effect in the
  model's one-sided t test, with Holm's adjustment over every ordered pair (i, j). Every arm
  truly within min_effect of the best has all its hypotheses "j leads i by at most min_effect"
  true, so the chance that any of them is excluded is at most alpha: the set holds every
  arm within min_effect of the best at once with probability at least 1 - alpha (simultaneous).
- `design_pcs`: the design's guarantee at the indifference zone: Bechhofer's (1954, Ann. Math.
  Statist. 25(1)) probability that the best mean of k arms of n seeds is the best arm when it leads
  every other by min_effect, at the spread measured (the contrasts' mean variance). A frequency
  claim about the design, checked where it is claimed (the least-favourable configuration).
`bechhofer_seeds` is the fixed-size design's yardstick: the fewest seeds per arm reaching a PCS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Collection, Mapping, NamedTuple, Sequence

import numpy as np

from grpo_ablate.stats.model import MIN_SEEDS, Fit, canonical_order, clean, fit
from grpo_ablate.stats.multiplicity import holm

__all__ = ["Selection", "select", "p_within", "eps_best", "recommend", "bechhofer_seeds", "bechhofer_pcs", "design_pcs",
           "DRAWS", "HOW", "CONFIDENCE"]

DRAWS = 10000  # Monte Carlo error of a probability near 0.95: 0.002
CONFIDENCE = 0.95  # the probability an arm must reach to be recommended, unless the study sets racing.confidence
HOW = (f"a model posterior, not a frequency: the probability under one model of the seeds (arm and seed effects, "
       f"paired over shared seeds, each contrast its own variance moderated toward the pooled one, with a floor; at "
       f"least {MIN_SEEDS} seeds per configuration), {DRAWS:,} Monte Carlo draws")


@dataclass(frozen=True)
class Selection:
    """The answer a user acts on; `p_within[a]` is P(arm a within min_effect of the best) (a model posterior).

    `recommended`: the single recommendation (`recommend`); `kept`: no arm reached `confidence`, so it is the
    reference kept; `contender`: then the arm most likely within min_effect of the best; `reference_excluded`: no
    arm reached it and the reference is excluded from the eps-best set, so the recommendation is the most probable
    arm left instead. `leader`: the arm most likely within min_effect of the best, `pcs` its probability (what a
    race stops on)."""

    leader: str | None
    pcs: float | None  # p_within of the leader; None below two arms with MIN_SEEDS seeds
    p_within: dict[str, float]
    eps_best: tuple[str, ...]  # arms not excluded, best mean first
    excluded: dict[str, str]  # arm -> the arm that excludes it
    means: dict[str, float]
    min_effect: float
    alpha: float
    cheapest: str | None = None  # the cheapest arm of eps_best by the caller's cost
    costs: dict[str, float] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)  # seeds per arm
    confidence: float = CONFIDENCE
    recommended: str | None = None
    kept: bool = False
    contender: str | None = None
    design_pcs: float | None = None  # Bechhofer's P(correct selection) at the indifference zone for this design
    reference_excluded: str | None = None  # the reference not kept although no arm reached the confidence

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """Arms with fewer than MIN_SEEDS seeds: in the set, but left out of the probability and the tests."""
        return tuple(a for a, n in self.seeds.items() if n < MIN_SEEDS)

    @property
    def confident(self) -> tuple[str, ...]:
        """The arms whose probability reaches the confidence (the recommendation is the cheapest of them)."""
        return tuple(a for a, p in sorted(self.p_within.items(), key=lambda x: -x[1]) if p >= self.confidence)

    @property
    def probability(self) -> float | None:
        """P(the recommended arm is within min_effect of the best), a model posterior."""
        return self.p_within.get(self.recommended) if self.recommended is not None else None

    def as_dict(self) -> dict[str, object]:
        return {"recommended": self.recommended, "probability": self.probability, "kept": self.kept,
                "contender": self.contender, "confidence": self.confidence, "confident": list(self.confident),
                "leader": self.leader, "pcs": self.pcs, "p_within": dict(self.p_within),
                "eps_best": list(self.eps_best), "excluded": dict(self.excluded), "means": dict(self.means),
                "min_effect": self.min_effect, "alpha": self.alpha, "cheapest": self.cheapest,
                "costs": dict(self.costs), "seeds": dict(self.seeds), "design_pcs": self.design_pcs,
                "reference_excluded": self.reference_excluded, "how": HOW}


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
    arms = [a for a in values if clean(values[a])]
    return _eps_best(fit(values), arms, min_effect, maximize, alpha)


class Recommendation(NamedTuple):
    """`recommend`'s answer: `kept`, the reference kept for want of a confident arm, `contender` then the most
    probable other arm; `passed_over`, the reference not kept, none being confident, because it is excluded."""

    recommended: str | None
    kept: bool = False
    contender: str | None = None
    passed_over: str | None = None


def recommend(p_within: Mapping[str, float], *, confidence: float, costs: Mapping[str, float] | None = None,
              reference: str | None = None, rank: Mapping[str, int] | None = None,
              excluded: Collection[str] = ()) -> Recommendation:
    """The cheapest arm whose probability reaches `confidence` (ties: the higher
    probability, then `rank`, a name-free order); none reaching it: the `reference` kept (kept True) with the
    arm of the highest probability as the contender; no reference, or a reference in `excluded` (the eps-best
    set's exclusions: some arm leads it by more than min_effect, simultaneously at the page's level): the arm of
    the highest probability itself, never an excluded one while another is left (module docstring)."""
    if not p_within:
        return Recommendation(None)
    order = rank or {a: i for i, a in enumerate(sorted(p_within))}
    left = [a for a in p_within if a not in excluded] or list(p_within)
    best = min(left, key=lambda a: (-round(p_within[a], 6), order.get(a, 0)))
    confident = [a for a, p in p_within.items() if p >= confidence]
    if confident:
        def cost(a: str) -> float:
            c = (costs or {}).get(a)
            return float(c) if c is not None and math.isfinite(float(c)) else math.inf
        return Recommendation(min(confident, key=lambda a: (cost(a), -round(p_within[a], 6), order.get(a, 0))))
    if reference is None:
        return Recommendation(best)
    if reference in excluded:
        return Recommendation(best, passed_over=reference)
    return Recommendation(reference, True, best if best != reference else None)


_Z = np.linspace(-10.0, 10.0, 801)  # the standard normal's grid for Bechhofer's integral over many spreads at once
_SD_QUANTILES = 32  # points of the spread's posterior the design's guarantee averages over


def design_pcs(f: Fit, min_effect: float) -> float | None:
    """Bechhofer's P(correct selection) of this design at the indifference zone: k measured arms, the fewest seeds
    any of them ran, averaged over what the spread can be given the data (the per-arm variance that gives the
    contrasts' mean variance, s2, with their mean degrees of freedom nu: sigma^2 = nu s2 / chi2_nu, at
    _SD_QUANTILES quantiles). Read at the point estimate alone it overstates at few seeds (by 0.04-0.07 at 3
    seeds on the committed tables' least-favourable configuration; averaged, within 0.02: benchmarks/calibration.py).
    None without a usable fit."""
    if not f.usable or min_effect <= 0 or not f.pair_var:
        return None
    s2 = float(np.mean(list(f.pair_var.values()))) / 2
    if s2 <= 0:
        return None
    # lazy: every command imports this module (through plan/design.py); scipy costs ~0.6 s of each command's start
    from scipy import stats as st

    nu = float(np.mean(list(f.pair_df.values())))
    n = min(f.seeds[a] for a in f.arms)
    chi = st.chi2.ppf((np.arange(_SD_QUANTILES) + 0.5) / _SD_QUANTILES, nu)
    shift = min_effect * math.sqrt(n) / np.sqrt(nu * s2 / chi)
    dens = st.norm.pdf(_Z)[None, :] * st.norm.cdf(_Z[None, :] + shift[:, None]) ** (len(f.arms) - 1)
    return float(np.trapezoid(dens, _Z, axis=1).mean())


def select(values: Mapping[str, Mapping[int, float]], min_effect: float, *, maximize: bool = True,
           alpha: float = 0.05, costs: Mapping[str, float] | None = None, draws: int = DRAWS,
           seed: int = 0, confidence: float = CONFIDENCE, reference: str | None = None,
           chosen: Sequence[str] = ()) -> Selection:
    """The recommendation, its probability, the leader, the eps-best set and its cheapest member (module docstring).

    An arm with fewer than MIN_SEEDS seeds has no test: it is left out of the probability
    (`unmeasured`) and stays in the set. Fewer than two arms with MIN_SEEDS seeds: the
    recommendation is the best mean, with no probability. `chosen`: the arms a design with its own
    guarantee kept (an elimination race that stopped: its survivor, or its equivalent set): the recommendation
    is the cheapest of them, on that guarantee rather than the posterior's.
    """
    vals = {a: clean(v) for a, v in values.items() if clean(v)}
    sign = 1.0 if maximize else -1.0
    means = {a: float(np.mean(list(v.values()))) for a, v in vals.items()}
    if not vals:
        return Selection(None, None, {}, (), {}, {}, min_effect, alpha, confidence=confidence)
    f = fit(vals)
    probs = _p_within(f, min_effect, maximize, draws, seed)
    rank = {a: i for i, a in enumerate(canonical_order({a: {s: sign * x for s, x in v.items()} for a, v in vals.items()})[::-1])}
    if probs:
        leader = min(probs, key=lambda a: (-round(probs[a], 6), rank[a]))
    else:
        leader = min(vals, key=lambda a: rank[a])
    keep, excluded = _eps_best(f, list(vals), min_effect, maximize, alpha)
    keep.sort(key=lambda a: (-sign * means[a], rank[a]))
    priced = {a: float(costs[a]) for a in keep if costs and costs.get(a) is not None}
    cheapest = min(priced, key=lambda a: (priced[a], rank[a])) if priced else None
    ref = reference if reference in vals else None
    picked = [a for a in chosen if a in vals]
    if picked:
        answer = Recommendation(min(picked, key=lambda a: ((costs or {}).get(a, math.inf), rank[a])))
    elif probs:
        answer = recommend(probs, confidence=confidence, costs=costs, reference=ref, rank=rank, excluded=excluded)
    else:
        answer = Recommendation(leader)
    return Selection(leader, probs.get(leader) if probs else None, probs, tuple(keep), excluded, means, min_effect,
                     alpha, cheapest, {a: float(c) for a, c in (costs or {}).items() if c is not None},
                     {a: len(v) for a, v in vals.items()}, confidence, answer.recommended, answer.kept,
                     answer.contender, design_pcs(f, min_effect) if probs else None, answer.passed_over)


def bechhofer_pcs(k: int, seeds: float, delta: float, sd: float) -> float:
    """P(the best of k independent normal arms has the best mean of `seeds` seeds) when it leads by delta."""
    # lazy, as in design_pcs
    from scipy import integrate
    from scipy import stats as st

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
