"""Group-sequential error spending: how much of alpha each planned look may use.

    python -c "from grpo_ablate.stats.spending import plan; print(plan('haybittle-peto', [2, 3, 4, 6, 12], 12))"

A planned study (grid, ablation) knows its maximum seeds, so its race looks a known number of
times; a confidence sequence, built for unbounded looks, pays for looks that never come (at 12
seeds it needs |t| > 3.68 where one t-test needs 2.20). Error spending pays only for the planned
looks. The boundaries are those of normal statistics with independent increments (Jennison &
Turnbull, "Group Sequential Methods", 2000, ch. 19: the recursive numerical integration of the
score's density over the continuation region), turned into one nominal two-sided p-value per
look that each look's t-test (or its adjusted p-value) is compared with.

- "haybittle-peto" (the default): every early look at a strict nominal level (EARLY_LEVEL,
  0.0002), the last look at alpha itself. A race that never stops early therefore gives exactly
  the fixed-sample answer; the price is that the overall level exceeds alpha by what the early
  looks reject beyond the last look's rejections, which `Plan.total` computes: 0.0503 for a look
  after every seed from 2 to 12, 0.0508 from 3 to 40 (with Haybittle's classic 0.001 it would be
  0.0519 and 0.0536, hence the stricter early level).
- "obrien-fleming": Lan & DeMets' (1983, Biometrika 70(3)) spending function
  alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) over the information fractions t = seeds / maximum;
  the overall level is exactly alpha, and the last look's level is a little below alpha.
The t statistics of a few seeds are only roughly normal: the nominal levels are the usual
approximation (the same one a single t-test makes about its seeds' noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy import stats as st
from scipy.optimize import brentq

__all__ = ["Plan", "plan", "crossing_probability", "KINDS", "EARLY_LEVEL"]

KINDS = ("haybittle-peto", "obrien-fleming")
EARLY_LEVEL = 0.0002  # Haybittle-Peto's nominal two-sided level at every look but the last (see the docstring)
_GRID = 60  # grid points per standard deviation of the score in the recursive integration


@dataclass(frozen=True)
class Plan:
    """The nominal two-sided level of each planned look, and the overall level they add up to."""

    kind: str
    looks: tuple[int, ...]  # seeds at each look
    maximum: int
    levels: tuple[float, ...]  # nominal two-sided p-value a test must beat at each look
    total: float  # P(any look rejects) for a true null, computed for normal statistics

    def level(self, seeds: int) -> float:
        """The level of the look at `seeds` (the last level once the planned seeds are spent)."""
        for n, lv in zip(self.looks, self.levels):
            if seeds <= n:
                return lv
        return self.levels[-1]

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "looks": list(self.looks), "maximum": self.maximum, "levels": list(self.levels),
                "total": self.total}


def _z(level: float) -> float:
    return float(st.norm.isf(level / 2))


def _region(edge: float, t: float) -> np.ndarray:
    """The continuation region's grid for the score at information t (beyond 9 sd the density is nil)."""
    half = min(edge, 9.0 * math.sqrt(t))
    return np.linspace(-half, half, 2 * int(_GRID * half / math.sqrt(t)) + 1)


def _crossings(bounds: Sequence[float], fractions: Sequence[float]) -> list[float]:
    """P(first |Z| >= bound at look k) for k = 1..K under the null (standardised statistics Z_k)."""
    out: list[float] = []
    grid = dens = None  # the sub-density of the score S on the continuation region after the last look
    prev_t = 0.0
    for c, t in zip(bounds, fractions):
        sd_inc = math.sqrt(t - prev_t)
        edge = c * math.sqrt(t)
        if grid is None:
            out.append(float(2 * st.norm.sf(edge / sd_inc)))
            new = _region(edge, t)
            dens = st.norm.pdf(new / sd_inc) / sd_inc
        else:
            w = np.full(grid.size, grid[1] - grid[0])
            w[0] = w[-1] = w[0] / 2  # trapezoid weights
            mass = dens * w
            cross = st.norm.sf((edge - grid) / sd_inc) + st.norm.cdf((-edge - grid) / sd_inc)
            out.append(float(mass @ cross))
            new = _region(edge, t)
            dens = st.norm.pdf((new[:, None] - grid[None, :]) / sd_inc) @ mass / sd_inc
        grid, prev_t = new, t
    return out


def crossing_probability(levels: Sequence[float], looks: Sequence[int], maximum: int | None = None) -> float:
    """P(some look's nominal two-sided test rejects) under the null, looks at `looks` seeds."""
    top = maximum or looks[-1]
    return float(sum(_crossings([_z(lv) for lv in levels], [n / top for n in looks])))


def plan(kind: str, looks: Sequence[int], maximum: int, alpha: float = 0.05, early: float = EARLY_LEVEL) -> Plan:
    """The nominal levels of `kind` for looks after `looks` seeds (increasing) out of `maximum`."""
    return _plan(kind, tuple(int(n) for n in looks), int(maximum), float(alpha), float(early))


@lru_cache(maxsize=256)  # a race asks for the same plan at every look
def _plan(kind: str, looks: tuple[int, ...], maximum: int, alpha: float, early: float) -> Plan:
    if not looks or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] < 1 or looks[-1] > maximum:
        raise ValueError(f"looks must increase within 1..{maximum}, got {list(looks)}")
    fractions = [n / maximum for n in looks]
    if kind == "haybittle-peto":
        levels = [min(early, alpha)] * (len(looks) - 1) + [alpha]
        if looks[-1] < maximum:  # the last planned look is at the maximum, whether or not it is listed
            levels[-1] = min(early, alpha)
    elif kind == "obrien-fleming":
        z = _z(alpha)
        spend = [float(2 * st.norm.sf(z / math.sqrt(t))) for t in fractions]
        bounds: list[float] = []
        spent = 0.0
        for k, target in enumerate(spend):
            want = target - spent

            def excess(c: float, k: int = k, want: float = want) -> float:
                return _crossings(bounds + [c], fractions[: k + 1])[-1] - want

            c = brentq(excess, 0.5, 40.0, xtol=1e-8) if want > 1e-15 else 40.0
            bounds.append(c)
            spent += _crossings(bounds, fractions[: k + 1])[-1]
        levels = [float(2 * st.norm.sf(c)) for c in bounds]
    else:
        raise ValueError(f"unknown spending {kind!r}; choose one of {KINDS}")
    total = float(sum(_crossings([_z(lv) for lv in levels], fractions)))
    return Plan(kind, looks, maximum, tuple(levels), total)
