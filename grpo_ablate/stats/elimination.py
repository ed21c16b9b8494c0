"""Fully sequential indifference-zone elimination with common seeds (Kim & Nelson's procedure KN), with an
equivalence stop, and the seeds it spends.

    python -c "from grpo_ablate.stats.elimination import eliminate; help(eliminate)"

Why: selecting the best against an indifference zone of width `delta` needs a procedure whose guarantee
is stated there: P(the arm kept is the best) >= 1 - alpha whenever the best leads every other arm by at
least delta. A posterior P(within delta of the best) cannot give it: at that configuration an arm delta
behind already counts as within, so a race stopping on it picks the best about half the time.

The procedure (Kim & Nelson, "A fully sequential procedure for indifference-zone selection in
simulation", ACM TOMACS 11(3), 2001), read on the seeds every arm shares, so each pair's differences
cancel the seed's common effect (common random numbers):

1. every arm runs the first n0 seeds;
2. at r seeds (r = n0, n0 + 1, ...), for each pair (i, l) still in, S2_il(r): the variance of their
   differences over the r seeds, the pair's own moderated toward the pooled one of the arms still in
   as the one model does (stats/model.py), floored at the rounding error of the first stage's grid, with
   f(r) degrees of freedom (up to 2 (r - 1)). KN reads the first stage's variance only; updating it at
   every stage is Kim & Nelson's KN++ (Kim & Nelson 2006, "On the asymptotic validity of fully
   sequential selection procedures for steady-state simulation", Oper. Res. 54(3)), valid as delta
   shrinks rather than at every delta, and measured where it is claimed instead
   (benchmarks/calibration.py: at the least-favourable configuration of the committed tables a stated
   0.90 came true 0.91-0.94 of the time, where KN's first-stage form came true 0.95-0.97 for half again
   the seeds);
3. eta = ((2 alpha / (k - 1)) ** (-2 / f) - 1) / 2, h2 = 2 eta f (k: the arms at the start);
4. arm i leaves when, for some arm l still in at this stage, mean_i(r) < mean_l(r) - W_il(r),
   W_il(r) = max(0, delta / (2 r) * (h2 S2_il / delta**2 - r));
5. it stops when one arm is left, or (the equivalence stop) when every pair still in has its interval
   inside +-delta: the mean difference +- t * sqrt(S2_il / r), t Student's at a two-sided level of
   alpha_eq / (pairs x looks): a union bound over every pair and every look up to the planned cap, so
   the claim "every arm still in is within delta of every other" is false with probability at most
   alpha_eq however the stop was reached. The race then recommends the cheapest of that equivalent
   set. alpha_eq is EQUIVALENCE_SHARE of alpha and KN runs at the rest, so P(the configuration
   recommended is within delta of the best) >= 1 - alpha at the indifference zone whichever way it
   stops. (On seeds as noisy as the committed tables' it rarely fires before KN ends: an interval of
   +-delta at that level needs far more seeds than KN; it ends races between arms that barely differ
   from seed to seed.)

Ties: rewards on a grid can make a pair's differences all equal, S2 = 0, W = 0: a tie read as
certainty. The model's floor keeps S2 above the grid's rounding error, and its moderation keeps it
near the other pairs'. Arms with exactly equal values on every seed never eliminate each other.

Deterministic and order-independent: arms are read in sorted order and the seeds in their sorted
order (stage r uses the r smallest seeds the arms still in share), so the same table gives the same
answer however it was built (a race passes its seed list as `order`); rerunning the procedure on a
longer table replays the earlier stages exactly, which is how a race reads it after every seed
(study/racing.py). `simulate` runs the procedure on normal seeds, many races at once, for the seeds a
design spends on average (plan/price.py plans on that mean, not the median).
Nothing here knows trials: a per-seed table in, the live arms out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np

from grpo_ablate.stats.model import grid_floor

__all__ = ["Elimination", "eliminate", "constants", "max_seeds", "simulate", "RaceCost", "race_cost",
           "EQUIVALENCE_SHARE", "EQUIVALENT_STOP", "ONE_LEFT"]

EQUIVALENCE_SHARE = 0.2  # of alpha, for the equivalence stop; KN runs at the rest
ONE_LEFT, EQUIVALENT_STOP = "one configuration left", "every configuration left within min_effect of every other"


@dataclass(frozen=True)
class Elimination:
    """The state of the procedure on a table.

    `live`: the arms still in (sorted); `eliminated`: arm -> (the arm that eliminated it, the stage r
    at which it left); `seeds`: the last stage read (0: fewer than n0 shared seeds, not started);
    `stopped`: one arm is left (`selected`) or the live arms were found equivalent (`equivalent`);
    `h2`, `variances`: the procedure's constant (the largest pair's) and each pair's first-stage
    variance; `max_seeds`: the most seeds per arm it can need.
    """

    live: tuple[str, ...]
    eliminated: dict[str, tuple[str, int]] = field(default_factory=dict)
    seeds: int = 0
    stopped: bool = False
    h2: float = 0.0
    variances: dict[tuple[str, str], float] = field(default_factory=dict)
    max_seeds: int | None = None
    equivalent: bool = False  # stopped by the equivalence stop: every live arm within delta of every other

    @property
    def selected(self) -> str | None:
        return self.live[0] if self.stopped and len(self.live) == 1 else None

    @property
    def why(self) -> str | None:
        return (EQUIVALENT_STOP if self.equivalent else ONE_LEFT) if self.stopped else None


def constants(k: int, alpha: float, n0: int, df: float | None = None) -> tuple[float, float]:
    """KN's (eta, h2) for k arms, PCS >= 1 - alpha, first stage of n0 seeds, the variance's `df` degrees of
    freedom (KN's own: n0 - 1)."""
    if k < 2:
        raise ValueError(f"elimination needs at least 2 arms, got {k}")
    if not 0.0 < alpha < 1.0 - 1.0 / k:
        raise ValueError(f"alpha must lie in (0, 1 - 1/k) = (0, {1 - 1 / k:g}), got {alpha}")
    if n0 < 2:
        raise ValueError(f"n0 (the first stage's seeds) must be at least 2, got {n0}")
    f = float(n0 - 1 if df is None else df)
    eta = 0.5 * ((2.0 * alpha / (k - 1)) ** (-2.0 / f) - 1.0)
    return eta, 2.0 * eta * f


def max_seeds(k: int, delta: float, alpha: float, n0: int, sd_difference: float, df: float | None = None) -> int:
    """The most seeds per arm the procedure can take when every pair's difference has this sd
    (the planning figure: a study that plans fewer seeds may end before the procedure does)."""
    _, h2 = constants(k, alpha, n0, df)
    return max(n0, math.floor(h2 * sd_difference**2 / delta**2) + 1)


@lru_cache(maxsize=4096)
def _t(level: float, df: float) -> float:
    # lazy: plan/price.py imports this module, and every command with it; scipy.stats costs ~0.6 s of each command's start
    from scipy import stats as st

    return float(st.t.isf(level / 2, df))


def _moderated(own: np.ndarray, live: np.ndarray, r: int, floor: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S2, f) at stage r: `own` the pairs' own variances over r seeds, shape (..., k, k); `live` the arms still in,
    shape (..., k); each pair moderated toward the mean over the live pairs (the pooled model's variance of a
    difference, for seeds every live arm shares) with the model's weight (stats/model.py), floored at 2 x `floor`."""
    k = own.shape[-1]
    pair = live[..., :, None] & live[..., None, :] & ~np.eye(k, dtype=bool)
    count = pair.sum(axis=(-2, -1))
    pooled = (own * pair).sum(axis=(-2, -1)) / np.maximum(count, 1)
    pooled_df = (r - 1) * (np.maximum(live.sum(axis=-1), 2) - 1)
    d0 = np.clip(np.minimum(r - 1, pooled_df - (r - 1)), 0, None).astype(float)
    s2 = (d0[..., None, None] * pooled[..., None, None] + (r - 1) * own) / (d0[..., None, None] + r - 1)
    return np.maximum(s2, 2 * np.asarray(floor)[..., None, None]), d0 + r - 1


def _per_run(f: np.ndarray, g: Callable[[float], float]) -> np.ndarray:
    """g of each run's degrees of freedom, computed once per distinct value."""
    u, inv = np.unique(f, return_inverse=True)
    return np.array([g(float(v)) for v in u])[inv.ravel()]


def _floor(x: np.ndarray) -> float:
    """The grid's rounding-error variance of the values seen (stats/model.grid_floor)."""
    return grid_floor(np.asarray(x).ravel())


def eliminate(values: Mapping[str, Mapping[int, float]], *, delta: float, alpha: float, n0: int,
              maximize: bool = True, order: Sequence[int] = (), equivalence: bool = True,
              cap: int | None = None) -> Elimination:
    """Run the procedure on the per-seed table so far (arm -> {seed: value}); see the module docstring.

    Arms without values are ignored. Fewer than n0 seeds shared by every arm: not started (every
    arm live, `seeds` 0). The stages run while the arms still in share enough seeds; the result
    says where the table ran out (`stopped` False), or that one arm is left, or that the arms left
    are equivalent. `order`: the order the seeds are run in (a study's seed list); seeds not in it
    come after, sorted; empty: sorted. `equivalence`: False runs KN alone at alpha. `cap`: the most seeds
    per arm the study plans (the equivalence stop's looks; None: the first stage's worst case).
    """
    if delta <= 0:
        raise ValueError(f"delta (min_effect) must be > 0, got {delta}")
    arms = sorted(a for a, v in values.items() if v)
    if len(arms) < 2:
        return Elimination(tuple(arms), stopped=len(arms) == 1)
    k = len(arms)
    kn_alpha = alpha * (1 - EQUIVALENCE_SHARE) if equivalence else alpha
    _, h2_first = constants(k, kn_alpha, n0)  # the arguments' checks
    sign = 1.0 if maximize else -1.0
    rank = {s: i for i, s in enumerate(dict.fromkeys(order))}

    def ordered(seeds: set[int]) -> list[int]:
        return sorted(seeds, key=lambda s: (rank.get(s, len(rank)), s))

    shared = ordered(set.intersection(*(set(values[a]) for a in arms)))
    if len(shared) < n0:
        return Elimination(tuple(arms), h2=h2_first)
    floor = _floor(np.array([[values[a][s] for a in arms] for s in shared[:n0]]))  # the first stage's grid
    live = list(range(k))
    gone: dict[str, tuple[str, int]] = {}
    r = last = n0
    seq: list[int] = []
    x = np.zeros((0, 0))
    first: dict[tuple[str, str], float] = {}
    top, h2_top, equivalent = n0, 0.0, False

    def stage(block: np.ndarray) -> tuple[np.ndarray, float]:
        d = block[:, :, None] - block[:, None, :]
        s2, f = _moderated(d.var(axis=0, ddof=1), np.ones(block.shape[1], dtype=bool), block.shape[0], floor)
        return s2, float(f)

    while len(live) > 1:
        if len(seq) < r or not seq:  # the seeds the live arms share, in order; rebuilt when the live set changes
            seq = ordered(set.intersection(*(set(values[arms[i]]) for i in live)))
            if len(seq) < r:
                break
            x = np.array([[sign * float(values[arms[i]][s]) for i in live] for s in seq])
        s2, f = stage(x[:r])
        h2 = constants(k, kn_alpha, n0, f)[1]
        if r == n0:  # the first stage: its variances and worst case, for the record and the equivalence looks
            first = {(arms[i], arms[j]): float(s2[a, b]) for a, i in enumerate(live) for b, j in enumerate(live) if i < j}
            top = max(n0, math.floor(h2 * float(s2.max()) / delta**2) + 1)
            h2_top = h2
        means, last = x[:r].mean(axis=0), r
        w = np.maximum(0.0, delta / (2.0 * r) * (h2 * s2 / delta**2 - r))
        out: dict[int, tuple[int, int]] = {}
        for a, i in enumerate(live):
            beaten = [b for b in range(len(live)) if b != a and means[a] < means[b] - w[a, b]]
            if beaten:
                out[i] = (live[beaten[0]], r)
        if out:
            gone.update({arms[i]: (arms[j], rr) for i, (j, rr) in out.items()})
            keep = [a for a, i in enumerate(live) if i not in out]
            live = [live[a] for a in keep]
            x = x[:, keep]
        if len(live) <= 1:
            break
        if equivalence:
            if out:
                s2, f = stage(x[:r])
            looks = max(1, (cap if cap is not None else top) - n0 + 1)
            level = alpha * EQUIVALENCE_SHARE / (k * (k - 1) / 2 * looks)
            m = x[:r].mean(axis=0)
            if bool((np.abs(m[:, None] - m[None, :]) + _t(level, f) * np.sqrt(s2 / r) < delta).all()):
                equivalent = True
                break
        r += 1
    return Elimination(tuple(arms[i] for i in live), gone, last, len(live) == 1 or equivalent, h2_top, first, top,
                       equivalent)


# ---------------------------------------------------------------- the seeds a design spends


def simulate(means: Sequence[float], sd: float, *, delta: float, alpha: float, n0: int, max_seeds: int,
             runs: int = 2000, seed: int = 0, equivalence: bool = True,
             x: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(seeds each arm ran, shape (runs, k); the index of the arm kept, -1 for an equivalent set or none), for
    `runs` races of the procedure (the same stages as `eliminate`, many races at once) on independent normal
    seeds of sd `sd` per arm around `means` (a larger mean is better), or on `x` (runs, seeds, k) when given,
    capped at `max_seeds` per arm; an arm still in at the cap ran the cap. Values are not rounded to a grid here,
    so the floor is 0 unless `x` carries one."""
    k = len(means)
    kn_alpha = alpha * (1 - EQUIVALENCE_SHARE) if equivalence else alpha
    if x is None:
        rng = np.random.default_rng(seed)
        x = np.asarray(means, dtype=float)[None, None, :] + sd * rng.standard_normal((runs, max_seeds, k))
    runs, max_seeds = x.shape[0], min(max_seeds, x.shape[1])
    floor = np.array([_floor(x[i, :n0]) for i in range(runs)])  # the first stage's grid, as `eliminate`
    c1, c2 = np.zeros((runs, k, k)), np.zeros((runs, k, k))
    cs = np.zeros((runs, k))
    live: np.ndarray = np.ones((runs, k), dtype=bool)
    done: np.ndarray = np.zeros(runs, dtype=bool)
    ran = np.full((runs, k), max_seeds)
    kept = np.full(runs, -1)
    eye: np.ndarray = np.eye(k, dtype=bool)
    looks = max_seeds - n0 + 1
    eq_level = alpha * EQUIVALENCE_SHARE / (k * (k - 1) / 2 * looks)
    for r in range(1, max_seeds + 1):  # running sums of the differences, their squares and the values
        d = x[:, r - 1, :, None] - x[:, r - 1, None, :]
        c1 += d
        c2 += d**2
        cs += x[:, r - 1, :]
        act = ~done
        if r < n0:
            continue
        if not act.any():
            break
        own = (c2 - c1**2 / r) / (r - 1)
        s2, f = _moderated(own, live, r, floor)
        h2 = _per_run(f, lambda v: constants(k, kn_alpha, n0, v)[1])[:, None, None]
        m = cs / r
        gap = m[:, None, :] - m[:, :, None]  # [run, i, l] = mean_l - mean_i
        w = np.maximum(0.0, delta / (2.0 * r) * (h2 * s2 / delta**2 - r))
        beaten = ((gap > w) & live[:, None, :] & ~eye[None]).any(axis=2) & live & act[:, None]
        ran[beaten] = r
        live &= ~beaten
        one = act & (live.sum(axis=1) <= 1)
        kept[one] = np.where(live[one].any(axis=1), live[one].argmax(axis=1), -1)
        ran[one[:, None] & live] = r
        done |= one
        if equivalence:
            s2, f = _moderated(own, live, r, floor)
            half = _per_run(f, lambda v: _t(eq_level, v))[:, None, None] * np.sqrt(s2 / r)
            pair = live[:, :, None] & live[:, None, :] & ~eye[None]
            inside = ((np.abs(gap) + half < delta) | ~pair).all(axis=(1, 2))
            eq = act & ~done & inside
            ran[eq[:, None] & live] = r
            done |= eq
    return ran, kept


@dataclass(frozen=True)
class RaceCost:
    """Mean seeds per arm of an elimination race (Monte Carlo on normal seeds), where it is cheapest to be sure
    and where it is costliest: the least-favourable configuration (the best ahead by delta) and all arms tied."""

    least_favourable: float
    tied: float
    cap: int
    runs: int

    @property
    def planning(self) -> float:
        """The figure a budget is planned on: the larger mean (tied arms, for KN)."""
        return max(self.least_favourable, self.tied)

    def as_dict(self) -> dict[str, float | int]:
        return {"least_favourable": self.least_favourable, "tied": self.tied, "cap": self.cap, "runs": self.runs,
                "planning": self.planning}


@lru_cache(maxsize=256)
def race_cost(k: int, delta: float, sd_difference: float, confidence: float, n0: int, cap: int,
              runs: int = 1000) -> RaceCost:
    """The mean seeds per arm the elimination race spends (k arms, min_effect delta, each paired difference's sd
    `sd_difference`, racing.confidence, first stage n0, at most `cap` seeds per arm): the mean, not the median, so
    a budget planned on it holds on average (issue 51). Deterministic (fixed seed)."""
    sd = sd_difference / math.sqrt(2)
    cap = max(cap, n0)
    lfc, _ = simulate([delta * 1.0001] + [0.0] * (k - 1), sd, delta=delta, alpha=1 - confidence, n0=n0,
                      max_seeds=cap, runs=runs, seed=1)
    tied, _ = simulate([0.0] * k, sd, delta=delta, alpha=1 - confidence, n0=n0, max_seeds=cap, runs=runs, seed=2)
    return RaceCost(float(lfc.mean()), float(tied.mean()), cap, runs)
