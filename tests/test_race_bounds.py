"""The race goals' lower bounds (benchmarks/race_bounds.py) and the candidate race on planted worlds, i.i.d. seeds.

A bound that is too high would call a reachable goal impossible: each is checked against a race that has the
guarantee (the candidate with the sd known, on normal seeds, where Frazier's proof holds), which must spend at least
the bound. The candidate's P(within min_effect) at the least-favourable configuration is checked with its Monte
Carlo error stated (400 races: se 0.015 near 0.9; the check allows three).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from race_bounds import biz, kl, lfc_bound, tie_bound  # noqa: E402

K, SD, ME, CONF, RACES = 5, 0.078, 0.05, 0.9, 400  # addition_rare's paired sd


def _normal(means: list[float], seeds: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(means)[None, None, :] + SD * rng.standard_normal((RACES, seeds, K))


def test_bernoulli_divergence() -> None:
    assert kl(0.9, 0.1) == pytest.approx(0.8 * math.log(9))
    assert kl(0.3, 0.3) == pytest.approx(0.0)


def test_tied_arms_need_more_than_six_seeds_on_addition_rare() -> None:
    """Issue 51's tie goal (6 seeds per arm) is below what any race with the guarantee spends at this sd."""
    assert tie_bound(K, 1 - CONF, SD, ME) > 6.0
    assert tie_bound(K, 1 - CONF, SD, 0.02) > 6.0 * 6


@pytest.mark.parametrize("world", ["lfc", "tied"])
def test_a_race_with_the_guarantee_spends_at_least_the_bound(world: str) -> None:
    means = [ME, 0, 0, 0, 0] if world == "lfc" else [0.0] * K
    ran, pick = biz(_normal(means, 120, 1), ME, CONF, n0=1, sd=SD)
    bound = (lfc_bound if world == "lfc" else tie_bound)(K, 1 - CONF, SD, ME)
    se = ran.mean(axis=1).std(ddof=1) / math.sqrt(RACES)
    assert ran.mean() > bound + 3 * se
    if world == "lfc":  # Frazier's guarantee, the sd known, normal seeds
        assert (pick == 0).mean() >= CONF - 3 * math.sqrt(CONF * (1 - CONF) / RACES)


def test_the_candidate_with_its_variance_estimated_keeps_its_guarantee() -> None:
    x = _normal([ME + 0.001, 0, 0, 0, 0], 80, 2)
    ran, pick = biz(x, ME, CONF, n0=3)
    assert (pick == 0).mean() >= CONF - 3 * math.sqrt(CONF * (1 - CONF) / RACES)
    assert ran.mean() < 17  # Bechhofer's fixed design needs 17 seeds per arm here
    ties, _ = biz(_normal([0.0] * K, 80, 3), ME, CONF, n0=3)
    assert ties.mean() > tie_bound(K, 1 - CONF, SD, ME)
