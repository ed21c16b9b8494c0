"""The one model of arms over seeds that the calls, the exclusions and the probability all read.

    python -c "from grpo_ablate.stats.model import fit; \
f = fit({'a': {0: .70, 1: .72, 2: .69}, 'b': {0: .60, 1: .61, 2: .63}}); print(f.kind, f.contrast('a', 'b'))"

Every answer about arms (better / worse / equivalent against the baseline, exclusion from the
eps-best set, P(within min_effect of the best)) comes from one fit of the values {arm: {seed: value}}:

- "paired" when every two arms share at least MIN_SEEDS seeds (a planned study, a race: every arm
  runs on the same seeds): value = arm effect + seed effect + noise, by least squares over every
  observation (a seed only some arms reached still pairs those arms; a dropped arm keeps its seeds).
  The seed effect removes what a seed does to every arm alike.
- "unpaired" otherwise (an adaptive study's arms): value = arm effect + noise.
In both, the noise has one variance, pooled over every arm (its degrees of freedom: observations
minus parameters): a tie in one pair of arms does not make the others certain. And that variance
is floored at the rounding error of the values' grid, step^2 / 12, with step the smallest gap
between two distinct values seen: held-out rewards are multiples of 1/128, so a few seeds can
repeat a difference exactly (with two arms the residuals are then all 0), and a variance of 0
would turn a tie into certainty. Values measured on a grid carry at least its rounding error;
the smallest gap seen is never below the grid's step, so the floor errs on the wide side. The
pooled variance assumes the arms' seed-to-seed spreads are alike (on the built-in tasks they are
0.05-0.075, measured over 40 seeds).

An arm enters the fit only with MIN_SEEDS seeds (fewer say too little about spread to test or
exclude anything); such arms are `unmeasured`. The posterior of the arm effects under the
reference prior is a multivariate Student t (location the estimates, scale the variance times
(X'X)^-1, the residual degrees of freedom); `draws` samples it with a fixed seed over the arms in
sorted order (common random numbers: the same values give the same draws whatever the order of
the arms, in the race and in the report). A contrast's test (`contrast`) is that same posterior's
marginal, the t test of the fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from grpo_ablate.stats.seeds import MeanDifference

__all__ = ["Fit", "fit", "clean", "grid_floor", "MIN_SEEDS", "PAIRED", "UNPAIRED", "WORDS"]

MIN_SEEDS = 3  # no test, exclusion or probability from fewer seeds (pairs, in the paired fit)
PAIRED, UNPAIRED = "paired", "unpaired"
WORDS = {PAIRED: "one model of arm and seed effects (paired over the shared seeds), its variance pooled over every "
                 "arm and floored at the values' rounding error",
         UNPAIRED: "one model of arm means (no shared seeds to pair), its variance pooled over every arm and floored "
                   "at the values' rounding error"}


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


@dataclass(frozen=True)
class Fit:
    """The fitted model: `arms` (sorted) with their effects `effects`, covariance `cov` (variance x
    (X'X)^-1 block), residual degrees of freedom `df`; `unmeasured`: arms left out (too few seeds)."""

    kind: str
    arms: tuple[str, ...]
    effects: np.ndarray
    cov: np.ndarray
    df: float
    sd: float  # the noise's standard deviation after the floor
    seeds: dict[str, int]
    unmeasured: tuple[str, ...]
    floored: bool

    @property
    def usable(self) -> bool:
        """Two arms or more, with residual degrees of freedom: tests and probabilities can be computed."""
        return len(self.arms) >= 2 and self.df >= 1 and self.sd > 0

    def index(self, arm: str) -> int:
        return self.arms.index(arm)

    def contrast(self, a: str, b: str) -> MeanDifference | None:
        """b's effect minus a's, with the fit's t test; None when either arm is not in the fit."""
        if not self.usable or a not in self.arms or b not in self.arms or a == b:
            return None
        i, j = self.index(a), self.index(b)
        var = float(self.cov[i, i] + self.cov[j, j] - 2 * self.cov[i, j])
        se = math.sqrt(max(var, 0.0))
        n = min(self.seeds[a], self.seeds[b])
        return MeanDifference(self.kind, float(self.effects[j] - self.effects[i]), se, self.df, n, se * math.sqrt(n))

    def draws(self, count: int, seed: int = 0) -> np.ndarray:
        """count joint posterior draws of the arm effects, shape (len(arms), count) (module docstring)."""
        rng = np.random.default_rng(seed)
        chol = np.linalg.cholesky(self.cov + 1e-18 * np.eye(len(self.arms)))
        z = rng.standard_normal((len(self.arms), count))
        scale = np.sqrt(self.df / rng.chisquare(self.df, size=count))
        return self.effects[:, None] + (chol @ z) * scale[None, :]


def grid_floor(values: np.ndarray) -> float:
    """The rounding-error variance step^2 / 12 of values on a grid, step the smallest gap between two
    distinct values (0 when all are equal)."""
    u = np.unique(np.round(values, 12))
    return float(np.diff(u).min()) ** 2 / 12 if u.size > 1 else 0.0


def _paired_design(vals: Mapping[str, dict[int, float]]) -> bool:
    arms = list(vals)
    return len(arms) >= 2 and all(len(set(vals[a]) & set(vals[b])) >= MIN_SEEDS
                                  for i, a in enumerate(arms) for b in arms[i + 1:])


def fit(values: Mapping[str, Mapping[int, float]]) -> Fit:
    """The model over the arms with MIN_SEEDS finite values or more (see the module docstring)."""
    allv = {a: clean(v) for a, v in values.items()}
    seeds = {a: len(v) for a, v in allv.items() if v}
    arms = tuple(sorted(a for a, v in allv.items() if len(v) >= MIN_SEEDS))
    unmeasured = tuple(sorted(a for a, n in seeds.items() if n < MIN_SEEDS))
    vals = {a: allv[a] for a in arms}
    k = len(arms)
    kind = PAIRED if _paired_design(vals) else UNPAIRED
    empty = Fit(kind, arms, np.zeros(k), np.zeros((k, k)), 0.0, 0.0, seeds, unmeasured, False)
    if k < 2:
        return empty
    rows = [(i, s, v) for i, a in enumerate(arms) for s, v in sorted(vals[a].items())]
    y = np.array([v for _, _, v in rows])
    n_obs = y.size
    floor = grid_floor(y)
    within_ss = sum(float(((np.array(list(vals[a].values())) - np.mean(list(vals[a].values()))) ** 2).sum())
                    for a in arms)
    within_df = n_obs - k
    within_var = within_ss / within_df if within_df > 0 else 0.0
    if kind == PAIRED:
        all_seeds = sorted({s for _, s, _ in rows})
        col = {s: k + c for c, s in enumerate(all_seeds[1:])}  # the first seed's effect is in the arm effects
        x = np.zeros((n_obs, k + len(col)))
        for r, (i, s, _) in enumerate(rows):
            x[r, i] = 1.0
            if s in col:
                x[r, col[s]] = 1.0
        xtx_inv = np.linalg.pinv(x.T @ x)
        beta = xtx_inv @ x.T @ y
        resid = y - x @ beta
        df = float(n_obs - np.linalg.matrix_rank(x))
        res_var = float(resid @ resid) / df if df > 0 else 0.0
        var = max(res_var, floor)
        effects, unit_cov = beta[:k], xtx_inv[:k, :k]
    else:
        df = float(within_df)
        res_var = within_var
        var = max(res_var, floor)
        effects = np.array([np.mean(list(vals[a].values())) for a in arms])
        unit_cov = np.diag([1.0 / len(vals[a]) for a in arms])
    if df < 1:
        return empty
    return Fit(kind, arms, effects, var * unit_cov, df, math.sqrt(var), seeds, unmeasured, var > res_var)
