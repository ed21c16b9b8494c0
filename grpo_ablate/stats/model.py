"""The one model of arms over seeds that the calls, the exclusions, the probability and the race all read.

    python -c "from grpo_ablate.stats.model import fit; \
f = fit({'a': {0: .70, 1: .72, 2: .69}, 'b': {0: .60, 1: .61, 2: .63}}); print(f.kind, f.contrast('a', 'b'))"

Every answer about arms (better / worse / equivalent against the baseline, exclusion from the
eps-best set, P(within min_effect of the best), the elimination race's continuation region) comes
from one fit of the values {arm: {seed: value}}:

- "paired" when every two arms share at least MIN_SEEDS seeds (a planned study, a race: every arm
  runs on the same seeds): value = arm effect + seed effect + noise, the effects by least squares
  over every observation (a seed only some arms reached still pairs those arms; a dropped arm keeps
  its seeds). The seed effect removes what a seed does to every arm alike.
- "unpaired" otherwise (an adaptive study's arms): value = arm effect + noise.

**Each contrast its own variance.** Arms are not alike: on the committed 40-seed tables the variance
of a paired difference ranges from 0.5x to 1.4x the pooled model's (two arms that share half their
schedule move together; others move apart), so one pooled variance makes some tests too bold (a
family of calls erred 0.06-0.09 at a nominal 0.05 where one arm was better and the rest equal). Each
pair of arms (paired) or each arm (unpaired) therefore has its own variance: its sample variance
over its shared seeds, moderated toward the pooled model's in the form of Smyth (2004, "Linear
models and empirical Bayes methods for assessing differential expression", Stat. Appl. Genet. Mol.
Biol. 3(1)): v = (d0 * pooled + d * own) / (d0 + d), with d0 + d degrees of freedom, where d is the
pair's own degrees of freedom and the prior's weight d0 is set to d (never more than the pooled
model's degrees of freedom beyond the pair's own), not estimated: an empirical-Bayes estimate from
3-10 correlated pairs is too noisy to lean on, and with d0 = d the calls held their family-wise
error on every table and null tried (benchmarks/calibration.py). With two arms the pooled variance
is the pair's own and nothing is borrowed.

**The floor.** Values measured on a grid carry at least its rounding error, step^2 / 12 each (step:
the smallest gap between two distinct values seen, never below the grid's step): held-out rewards
are multiples of 1/128, so a few seeds can repeat a difference exactly, and a variance of 0 would
turn a tie into certainty. A difference of two values carries twice that.

An arm enters the fit only with MIN_SEEDS seeds (fewer say too little about spread to test or
exclude anything); such arms are `unmeasured`. A contrast's test (`contrast`) is Student's t with
the contrast's own variance and degrees of freedom. The joint posterior of the arm effects that the
probability reads (`draws`) is a multivariate Student t whose every pairwise contrast has exactly
that variance (its covariance is the double-centred matrix of the contrasts' variances, the
classical-scaling identity; a covariance is only defined up to a shift common to every arm, which no
contrast sees), with the smallest of the contrasts' degrees of freedom. The draws are laid out over
the arms in an order fixed by their values, not their names (common random numbers: the same values
give the same draws whatever the arms are called or the order they come in, in the race and in the
report).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from grpo_ablate.stats.seeds import MeanDifference

__all__ = ["Fit", "fit", "clean", "grid_floor", "canonical_order", "MIN_SEEDS", "PAIRED", "UNPAIRED", "WORDS"]

MIN_SEEDS = 3  # no test, exclusion or probability from fewer seeds (pairs, in the paired fit)
PAIRED, UNPAIRED = "paired", "unpaired"
WORDS = {PAIRED: "one model of arm and seed effects (paired over the shared seeds), each pair of arms with its own "
                 "variance moderated toward the pooled one and floored at the values' rounding error",
         UNPAIRED: "one model of arm means (no shared seeds to pair), each arm with its own variance moderated toward "
                   "the pooled one and floored at the values' rounding error"}


def clean(values: Mapping[int, float]) -> dict[int, float]:
    """The finite values of one arm, {seed: value}."""
    out = {}
    for s, v in values.items():
        if v is None:
            continue
        x = float(v)
        if math.isfinite(x):
            out[int(s)] = x
    return out


def canonical_order(vals: Mapping[str, Mapping[int, float]]) -> list[str]:
    """The arms in an order fixed by their values (mean, then the sorted values), names only breaking an exact tie
    of every value: what a draw or a tie-break may depend on without depending on what an arm is called."""
    def key(a: str) -> tuple[object, ...]:
        xs = sorted(round(float(v), 12) for v in vals[a].values())
        return (round(float(np.mean(xs)), 12) if xs else 0.0, len(xs), tuple(xs), a)
    return sorted(vals, key=key)


@dataclass(frozen=True)
class Fit:
    """The fitted model: `arms` (sorted) with their effects `effects`; `cov` the joint posterior's scale matrix
    (each pairwise contrast's variance exactly), `df` its degrees of freedom (the smallest contrast's);
    `pair_var[(a, b)]` (a < b) a contrast's per-seed variance after moderation and floor and `pair_df` its
    degrees of freedom; `unmeasured`: arms left out (too few seeds)."""

    kind: str
    arms: tuple[str, ...]
    effects: np.ndarray
    cov: np.ndarray
    df: float
    sd: float  # the pooled model's noise standard deviation after the floor (per value)
    seeds: dict[str, int]
    unmeasured: tuple[str, ...]
    floored: bool  # some contrast's variance was raised to the floor
    pair_var: dict[tuple[str, str], float] = field(default_factory=dict)
    pair_df: dict[tuple[str, str], float] = field(default_factory=dict)
    pair_n: dict[tuple[str, str], int] = field(default_factory=dict)
    contrast_var: dict[tuple[str, str], float] = field(default_factory=dict)  # variance of the estimated contrast
    order: tuple[str, ...] = ()  # the arms in canonical order (canonical_order): how draws are laid out

    @property
    def usable(self) -> bool:
        """Two arms or more, with degrees of freedom: tests and probabilities can be computed."""
        return len(self.arms) >= 2 and self.df >= 1 and bool(self.contrast_var)

    def index(self, arm: str) -> int:
        return self.arms.index(arm)

    def _pair(self, a: str, b: str) -> tuple[str, str]:
        return (a, b) if a < b else (b, a)

    def contrast(self, a: str, b: str) -> MeanDifference | None:
        """b's effect minus a's, with the t test of the pair's own (moderated, floored) variance; None when either
        arm is not in the fit."""
        if not self.usable or a not in self.arms or b not in self.arms or a == b:
            return None
        p = self._pair(a, b)
        se = math.sqrt(max(self.contrast_var[p], 0.0))
        n = self.pair_n[p]
        return MeanDifference(self.kind, float(self.effects[self.index(b)] - self.effects[self.index(a)]), se,
                              self.pair_df[p], n, math.sqrt(self.pair_var[p]))

    def draws(self, count: int, seed: int = 0) -> np.ndarray:
        """count joint posterior draws of the arm effects, shape (len(arms), count), rows in `arms` order; the random
        numbers are laid out in canonical order (module docstring)."""
        rng = np.random.default_rng(seed)
        pos = [self.index(a) for a in (self.order or self.arms)]
        cov = self.cov[np.ix_(pos, pos)]
        k = len(pos)
        # a shift common to every arm changes no contrast: it makes the matrix definite, so its Cholesky root (unique,
        # unlike an eigenbasis) ties each random number to an arm's place in the canonical order
        shift = float(np.trace(cov)) / k + 1e-12
        root = np.linalg.cholesky(cov + shift * np.ones((k, k)) + 1e-12 * shift * np.eye(k))
        z = rng.standard_normal((k, count))
        scale = np.sqrt(self.df / rng.chisquare(self.df, size=count))
        out = np.empty((len(self.arms), count))
        out[pos] = self.effects[pos, None] + (root @ z) * scale[None, :]
        return out


def grid_floor(values: np.ndarray) -> float:
    """The rounding-error variance step^2 / 12 of values on a grid, step the smallest gap between two
    distinct values (0 when all are equal)."""
    u = np.unique(np.round(values, 12))
    return float(np.diff(u).min()) ** 2 / 12 if u.size > 1 else 0.0


def _paired_design(vals: Mapping[str, dict[int, float]]) -> bool:
    arms = list(vals)
    return len(arms) >= 2 and all(len(set(vals[a]) & set(vals[b])) >= MIN_SEEDS
                                  for i, a in enumerate(arms) for b in arms[i + 1:])


def _moderate(own: float, own_df: float, pooled: float, pooled_df: float) -> tuple[float, float]:
    """(variance, degrees of freedom): the own variance moderated toward the pooled one, the prior's weight the own
    degrees of freedom, never more than the pooled model has beyond them (module docstring)."""
    d0 = max(0.0, min(own_df, pooled_df - own_df))
    if own_df + d0 <= 0:
        return pooled, pooled_df
    return (d0 * pooled + own_df * own) / (d0 + own_df), d0 + own_df


def _covariance(arms: tuple[str, ...], contrast_var: Mapping[tuple[str, str], float]) -> np.ndarray:
    """A scale matrix whose every contrast e_b - e_a has the given variance: -1/2 J D J (D the contrasts' variances,
    J the centring matrix), its negative eigenvalues (rounding, or unbalanced seeds) set to zero."""
    k = len(arms)
    d = np.zeros((k, k))
    for (a, b), v in contrast_var.items():
        i, j = arms.index(a), arms.index(b)
        d[i, j] = d[j, i] = v
    j = np.eye(k) - np.ones((k, k)) / k
    b = -0.5 * j @ d @ j
    w, v = np.linalg.eigh((b + b.T) / 2)
    return (v * np.clip(w, 0.0, None)) @ v.T


def fit(values: Mapping[str, Mapping[int, float]]) -> Fit:
    """The model over the arms with MIN_SEEDS finite values or more (see the module docstring)."""
    allv = {a: clean(v) for a, v in values.items()}
    seeds = {a: len(v) for a, v in allv.items() if v}
    arms = tuple(sorted(a for a, v in allv.items() if len(v) >= MIN_SEEDS))
    unmeasured = tuple(sorted(a for a, n in seeds.items() if n < MIN_SEEDS))
    vals = {a: allv[a] for a in arms}
    k = len(arms)
    kind = PAIRED if _paired_design(vals) else UNPAIRED
    order = tuple(canonical_order(vals))
    empty = Fit(kind, arms, np.zeros(k), np.zeros((k, k)), 0.0, 0.0, seeds, unmeasured, False, order=order)
    if k < 2:
        return empty
    rows = [(i, s, v) for i, a in enumerate(arms) for s, v in sorted(vals[a].items())]
    y = np.array([v for _, _, v in rows])
    floor = grid_floor(y)
    pair_var: dict[tuple[str, str], float] = {}
    pair_df: dict[tuple[str, str], float] = {}
    pair_n: dict[tuple[str, str], int] = {}
    contrast_var: dict[tuple[str, str], float] = {}
    floored = False
    if kind == PAIRED:
        all_seeds = sorted({s for _, s, _ in rows})
        col = {s: k + c for c, s in enumerate(all_seeds[1:])}  # the first seed's effect is in the arm effects
        x = np.zeros((y.size, k + len(col)))
        for r, (i, s, _) in enumerate(rows):
            x[r, i] = 1.0
            if s in col:
                x[r, col[s]] = 1.0
        xtx_inv = np.linalg.pinv(x.T @ x)
        beta = xtx_inv @ x.T @ y
        resid = y - x @ beta
        pooled_df = float(y.size - np.linalg.matrix_rank(x))
        if pooled_df < 1:
            return empty
        pooled = 2.0 * float(resid @ resid) / pooled_df  # a difference's variance under the pooled model
        effects = beta[:k]
        for i, a in enumerate(arms):
            for j in range(i + 1, k):
                b = arms[j]
                shared = sorted(set(vals[a]) & set(vals[b]))
                d = np.array([vals[b][s] - vals[a][s] for s in shared])
                var, df = _moderate(float(np.var(d, ddof=1)), len(shared) - 1.0, pooled, pooled_df)
                if var < 2 * floor:
                    var, floored = 2 * floor, True
                c = np.zeros(k)
                c[i], c[j] = -1.0, 1.0
                unit = float(c @ xtx_inv[:k, :k] @ c) / 2  # 1 / shared seeds when balanced
                pair_var[(a, b)], pair_df[(a, b)], pair_n[(a, b)] = var, df, len(shared)
                contrast_var[(a, b)] = var * unit
        sd = math.sqrt(max(pooled / 2, floor))
    else:
        effects = np.array([np.mean(list(vals[a].values())) for a in arms])
        n = {a: len(vals[a]) for a in arms}
        within = sum(float(((np.array(list(vals[a].values())) - np.mean(list(vals[a].values()))) ** 2).sum())
                     for a in arms)
        pooled_df = float(sum(n.values()) - k)
        pooled = within / pooled_df
        arm_var, arm_df = {}, {}
        for a in arms:
            v, df = _moderate(float(np.var(list(vals[a].values()), ddof=1)), n[a] - 1.0, pooled, pooled_df)
            if v < floor:
                v, floored = floor, True
            arm_var[a], arm_df[a] = v, df
        for i, a in enumerate(arms):
            for b in arms[i + 1:]:
                va, vb = arm_var[a] / n[a], arm_var[b] / n[b]
                se2 = va + vb
                df = se2**2 / (va**2 / arm_df[a] + vb**2 / arm_df[b]) if se2 > 0 else arm_df[a] + arm_df[b]
                # the per-seed spread a power figure reads: the two arms' mean variance
                pair_var[(a, b)], pair_df[(a, b)], pair_n[(a, b)] = (arm_var[a] + arm_var[b]) / 2, df, min(n[a], n[b])
                contrast_var[(a, b)] = se2
        sd = math.sqrt(max(pooled, floor))
    if min(pair_df.values()) < 1 or max(contrast_var.values()) <= 0:
        return empty
    return Fit(kind, arms, np.asarray(effects, dtype=float), _covariance(arms, contrast_var), float(min(pair_df.values())),
               sd, seeds, unmeasured, floored, pair_var, pair_df, pair_n, contrast_var, order)
