"""The confidence sequences' coverage under repeated looks, and the one rule's calls (stats/sequential.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from grpo_ablate.stats.min_effect import default_min_effect
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE, betting_cs, classify, t_cs

LOOKS = 12  # a look after every seed, as racing and stop-when-settled do
REPS = 1500


def _t_test_misses(d: np.ndarray, mu: float) -> bool:
    """A 95% paired t interval, recomputed after every seed from the second on: did any look miss mu?"""
    for n in range(2, d.size + 1):
        xs = d[:n]
        half = stats.t.ppf(0.975, n - 1) * xs.std(ddof=1) / np.sqrt(n)
        if abs(xs.mean() - mu) > half:
            return True
    return False


def _cs_misses(cs, mu: float) -> bool:
    return any(not (iv.low <= mu <= iv.high) for iv in cs)


def test_t_cs_covers_under_repeated_looks_where_a_repeated_t_test_does_not():
    rng = np.random.default_rng(20261201)
    mu, sd = 0.07, 0.05
    data = mu + sd * rng.standard_normal((REPS, LOOKS))
    t_miss = np.mean([_t_test_misses(d, mu) for d in data])
    cs_miss = np.mean([_cs_misses(t_cs(d), mu) for d in data])
    # nominal 5%: the repeated t-test misses far more often (~17% over 11 looks), the CS stays under
    assert cs_miss < 0.05, cs_miss
    assert t_miss > 0.10, t_miss
    assert t_miss > 3 * cs_miss


def test_betting_cs_covers_bounded_differences_under_repeated_looks():
    # paired differences of two rewards in [0, 1]: bounded by 1, skewed (not normal)
    rng = np.random.default_rng(7)
    a = rng.beta(8, 3, size=(600, LOOKS))
    b = rng.beta(6, 3, size=(600, LOOKS))
    mu = 8 / 11 - 6 / 9
    misses = np.mean([_cs_misses(betting_cs(x - y, bound=1.0), mu) for x, y in zip(a, b)])
    t_miss = np.mean([_t_test_misses(x - y, mu) for x, y in zip(a, b)])
    assert misses < 0.05, misses
    assert t_miss > misses


def test_t_cs_widths_shrink_and_nest():
    d = np.random.default_rng(3).normal(0.2, 0.05, 30)
    cs = t_cs(d)
    assert all(np.isinf(iv.high - iv.low) for iv in cs[:4])  # fewer than 5 observations: no bound yet
    widths = [iv.high - iv.low for iv in cs[4:]]
    assert all(w2 <= w1 for w1, w2 in zip(widths, widths[1:]))
    assert cs[-1].low <= 0.2 <= cs[-1].high


@pytest.mark.parametrize("mu, sd, expected", [
    (0.20, 0.03, BETTER),      # far above min_effect, tight: better
    (-0.20, 0.03, WORSE),
    (0.001, 0.004, EQUIVALENT),  # the whole CS inside +-0.02
    (0.03, 0.15, UNDECIDED),   # too noisy to say anything at 12 seeds
])
def test_classify_on_constructed_arms(mu, sd, expected):
    rng = np.random.default_rng(11)
    d = mu + sd * (rng.standard_normal(12))
    assert classify(list(d), min_effect=0.02).call == expected


def test_classify_minimize_flips_better_and_worse():
    d = [0.2, 0.21, 0.19, 0.2, 0.22, 0.18, 0.2, 0.2]
    assert classify(d, min_effect=0.02).call == BETTER
    assert classify(d, min_effect=0.02, maximize=False).call == WORSE


def test_classify_small_but_supported_difference_is_equivalent_not_better():
    # the CS excludes 0 but lies inside +-min_effect: a real difference too small to act on
    d = 0.01 + 0.001 * np.random.default_rng(5).standard_normal(12)
    assert classify(list(d), min_effect=0.02).call == EQUIVALENT
    assert classify(list(d), min_effect=0.005).call == BETTER


def test_betting_cs_refuses_out_of_bound_differences_and_needs_a_bound():
    with pytest.raises(ValueError, match="outside"):
        betting_cs([0.5, 1.5], bound=1.0)
    with pytest.raises(ValueError, match="bound"):
        classify([0.1, 0.2], min_effect=0.02, method="betting")


def test_default_min_effect_is_per_metric_never_the_reward_scale_elsewhere():
    assert default_min_effect("eval_final_reward") == pytest.approx(0.05)  # a reward in [0, 1]
    assert default_min_effect("frac_reward_zero_std") == pytest.approx(0.05)  # 5% of its range [0, 1]
    assert default_min_effect("tokens_per_second") is None  # no range and no reference: no default
    assert default_min_effect("tokens_per_second", reference=2000.0) == pytest.approx(100.0)
