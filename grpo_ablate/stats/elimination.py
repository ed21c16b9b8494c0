"""Fully sequential indifference-zone elimination with common seeds (Kim & Nelson's procedure KN).

    python -c "from grpo_ablate.stats.elimination import eliminate; help(eliminate)"

Why: the group-sequential race (stats/spending.py) stops when its posterior probability that the
leader is within min_effect of the best reaches a target; at the least-favourable configuration
(the best ahead by exactly min_effect) an arm min_effect behind already counts as "within", so it
stops early and picks the best about half the time. Selecting the best against an indifference
zone of width `delta` needs a procedure whose guarantee is stated there: P(the arm kept is the best)
>= 1 - alpha whenever the best leads every other arm by at least delta.

The procedure (Kim & Nelson, "A fully sequential procedure for indifference-zone selection in
simulation", ACM TOMACS 11(3), 2001), read on the seeds every arm shares, so each pair's
differences cancel the seed's common effect (common random numbers):

1. every arm runs the first n0 seeds; for each pair (i, l) the variance S2_il of their n0
   differences x_i - x_l (n0 - 1 degrees of freedom);
2. eta = ((2 alpha / (k - 1)) ** (-2 / (n0 - 1)) - 1) / 2, h2 = 2 eta (n0 - 1);
3. at r seeds (r = n0, n0 + 1, ...) arm i leaves when, for some arm l still in at this stage,
   mean_i(r) < mean_l(r) - W_il(r), W_il(r) = max(0, delta / (2 r) * (h2 S2_il / delta**2 - r));
4. it stops when one arm is left; every pair's W reaches zero by r = h2 S2_il / delta**2, so the
   procedure needs at most `max_seeds` seeds per arm (it can continue past that only while means tie
   exactly).

Ties: rewards on a grid (a held-out reward over 128 prompts) can make a pair's n0 differences all
equal, S2 = 0, W = 0: a tie read as certainty. A pair's variance is therefore never taken below
half the pooled pairwise variance (VARIANCE_FLOOR). Raising a variance only widens the region in
which an arm stays, and KN's bound on eliminating the best is a sum over pairs of a probability
that only falls as W grows, so the floor keeps PCS >= 1 - alpha (it can cost seeds, never the
guarantee). Arms with exactly equal values on every seed never eliminate each other.

Deterministic and order-independent: arms are read in sorted order and the seeds in their sorted
order (stage r uses the r smallest seeds the arms still in share), so the same table gives the same
answer however it was built (a race passes its seed list as `order`); rerunning the procedure on a longer table replays the earlier stages
exactly, which is how a race reads it after every seed (study/racing.py).
Nothing here knows trials: a per-seed table in, the live arms out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Elimination", "eliminate", "constants", "max_seeds", "VARIANCE_FLOOR"]

VARIANCE_FLOOR = 0.5  # a pair's first-stage variance is at least this share of the pooled pairwise variance


@dataclass(frozen=True)
class Elimination:
    """The state of the procedure on a table.

    `live`: the arms still in (sorted); `eliminated`: arm -> (the arm that eliminated it, the stage r
    at which it left); `seeds`: the last stage read (0: fewer than n0 shared seeds, not started);
    `stopped`: one arm is left (`selected`); `h2`, `variances`: the procedure's constant and each
    pair's first-stage variance after the floor; `max_seeds`: the most seeds per arm it can need.
    """

    live: tuple[str, ...]
    eliminated: dict[str, tuple[str, int]] = field(default_factory=dict)
    seeds: int = 0
    stopped: bool = False
    h2: float = 0.0
    variances: dict[tuple[str, str], float] = field(default_factory=dict)
    max_seeds: int | None = None

    @property
    def selected(self) -> str | None:
        return self.live[0] if self.stopped and self.live else None


def constants(k: int, alpha: float, n0: int) -> tuple[float, float]:
    """KN's (eta, h2) for k arms, PCS >= 1 - alpha, first stage of n0 seeds."""
    if k < 2:
        raise ValueError(f"elimination needs at least 2 arms, got {k}")
    if not 0.0 < alpha < 1.0 - 1.0 / k:
        raise ValueError(f"alpha must lie in (0, 1 - 1/k) = (0, {1 - 1 / k:g}), got {alpha}")
    if n0 < 2:
        raise ValueError(f"n0 (the first stage's seeds) must be at least 2, got {n0}")
    eta = 0.5 * ((2.0 * alpha / (k - 1)) ** (-2.0 / (n0 - 1)) - 1.0)
    return eta, 2.0 * eta * (n0 - 1)


def max_seeds(k: int, delta: float, alpha: float, n0: int, sd_difference: float) -> int:
    """The most seeds per arm the procedure can take when every pair's difference has this sd
    (the planning figure: a study that plans fewer seeds may end before the procedure does)."""
    _, h2 = constants(k, alpha, n0)
    return max(n0, math.floor(h2 * sd_difference**2 / delta**2) + 1)


def eliminate(values: Mapping[str, Mapping[int, float]], *, delta: float, alpha: float, n0: int,
              maximize: bool = True, order: Sequence[int] = ()) -> Elimination:
    """Run KN on the per-seed table so far (arm -> {seed: value}); see the module docstring.

    Arms without values are ignored. Fewer than n0 seeds shared by every arm: not started (every
    arm live, `seeds` 0). The stages run while the arms still in share enough seeds; the result
    says where the table ran out (`stopped` False) or that one arm is left. `order`: the order the
    seeds are run in (a study's seed list); seeds not in it come after, sorted; empty: sorted.
    """
    if delta <= 0:
        raise ValueError(f"delta (min_effect) must be > 0, got {delta}")
    arms = sorted(a for a, v in values.items() if v)
    if len(arms) < 2:
        return Elimination(tuple(arms), stopped=len(arms) == 1)
    k = len(arms)
    _, h2 = constants(k, alpha, n0)
    sign = 1.0 if maximize else -1.0
    rank = {s: i for i, s in enumerate(dict.fromkeys(order))}

    def ordered(seeds: set[int]) -> list[int]:
        return sorted(seeds, key=lambda s: (rank.get(s, len(rank)), s))

    shared = ordered(set.intersection(*(set(values[a]) for a in arms)))
    if len(shared) < n0:
        return Elimination(tuple(arms), h2=h2)
    first = shared[:n0]
    x0 = np.array([[sign * float(values[a][s]) for s in first] for a in arms])
    raw: dict[tuple[str, str], float] = {}
    for i in range(k):
        for j in range(i + 1, k):
            raw[(arms[i], arms[j])] = float(np.var(x0[i] - x0[j], ddof=1))
    floor = VARIANCE_FLOOR * float(np.mean(list(raw.values())))
    s2 = {p: max(v, floor) for p, v in raw.items()}
    top = max(n0, math.floor(h2 * max(s2.values()) / delta**2) + 1)

    def var(a: str, b: str) -> float:
        return s2[(a, b)] if (a, b) in s2 else s2[(b, a)]

    live = list(arms)
    gone: dict[str, tuple[str, int]] = {}
    r = last = n0
    seq: list[int] = []
    csum = np.zeros((0, 0))
    while len(live) > 1:
        if len(seq) < r or not seq:  # the seeds the live arms share, in order; rebuilt when the live set changes
            seq = ordered(set.intersection(*(set(values[a]) for a in live)))
            if len(seq) < r:
                break
            csum = np.cumsum(np.array([[sign * float(values[a][s]) for s in seq] for a in live]), axis=1)
        means, last = csum[:, r - 1] / r, r
        out: dict[str, tuple[str, int]] = {}
        for i, a in enumerate(live):
            for j, b in enumerate(live):
                if i == j:
                    continue
                w = max(0.0, delta / (2.0 * r) * (h2 * var(a, b) / delta**2 - r))
                if means[i] < means[j] - w:
                    out[a] = (b, r)
                    break
        if out:
            gone.update(out)
            keep = [i for i, a in enumerate(live) if a not in out]
            live = [live[i] for i in keep]
            csum = csum[keep]
        if len(live) <= 1:
            break
        r += 1
    return Elimination(tuple(live), gone, last, len(live) == 1, h2, s2, top)
