"""stats/elimination.py: KN's fully sequential indifference-zone selection with common seeds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from grpo_ablate.stats.elimination import constants, eliminate, max_seeds


def world(means: list[float], n: int, rng: np.random.Generator, sd: float = 1.0, common: float = 1.0,
          grid: float | None = None) -> dict[str, dict[int, float]]:
    """n seeds of k arms: each seed a common effect (sd `common`) plus each arm's own noise (sd `sd`)."""
    x = np.array(means) + rng.normal(0, sd, (n, len(means))) + rng.normal(0, common, (n, 1))
    if grid:
        x = np.round(x / grid) * grid
    return {f"arm{j}": {i: float(x[i, j]) for i in range(n)} for j in range(len(means))}


def test_constants_follow_the_published_formula():
    eta, h2 = constants(k=5, alpha=0.1, n0=10)
    assert eta == pytest.approx(0.5 * ((2 * 0.1 / 4) ** (-2 / 9) - 1))
    assert h2 == pytest.approx(2 * eta * 9)
    assert max_seeds(5, 0.02, 0.1, 10, 0.11) == int(h2 * 0.11**2 / 0.02**2) + 1
    for bad in ({"k": 1, "alpha": 0.1, "n0": 10}, {"k": 3, "alpha": 0.9, "n0": 10}, {"k": 3, "alpha": 0.1, "n0": 1}):
        with pytest.raises(ValueError):
            constants(**bad)


def test_least_favourable_configuration_keeps_its_guarantee():
    """Best ahead by exactly delta, the rest tied: P(correct selection) >= 1 - alpha = 0.90. 400 runs:
    the Monte Carlo standard error at 0.90 is 0.015, so the bound checked is 0.90 - 2 se = 0.87 (a
    procedure truly at 0.85 passes this with probability < 0.1%)."""
    rng = np.random.default_rng(7)
    delta, hits, spent = 0.5, 0, []
    for _ in range(400):
        e = eliminate(world([delta, 0, 0, 0], 400, rng), delta=delta, alpha=0.1, n0=10)
        assert e.stopped
        hits += e.selected == "arm0"
        spent.append(e.seeds)
    assert hits / 400 >= 0.87
    assert np.median(spent) < e.max_seeds  # it stops well before its worst case


def test_a_clear_best_is_found_at_the_first_stage_and_the_stage_count_is_exact():
    vals = {"a": {s: 1.0 + 0.01 * (s % 3) for s in range(10)}, "b": {s: 0.0 + 0.01 * (s % 2) for s in range(10)}}
    e = eliminate(vals, delta=0.1, alpha=0.05, n0=5)
    assert e.stopped and e.selected == "a" and e.eliminated == {"b": ("a", 5)} and e.seeds == 5


def test_too_few_shared_seeds_start_nothing():
    vals = {"a": {0: 1.0, 1: 1.0, 2: 2.0}, "b": {0: 0.0, 1: 0.0, 3: 0.0}}
    e = eliminate(vals, delta=0.1, alpha=0.05, n0=3)
    assert not e.stopped and e.live == ("a", "b") and e.seeds == 0 and not e.eliminated


def test_ties_never_mean_certainty():
    """Exact duplicates never eliminate each other: KN alone runs them to the end of the table, the equivalence
    stop ends the race at the first stage with all three equivalent; a pair whose first-stage differences are
    all equal (rewards on a grid) reads the floor, not a variance of zero."""
    rng = np.random.default_rng(3)
    base = {s: float(v) for s, v in enumerate(np.round(rng.normal(0.5, 0.1, 60) * 128) / 128)}
    dup = eliminate({"a": base, "b": dict(base), "c": dict(base)}, delta=0.02, alpha=0.05, n0=10, equivalence=False)
    assert not dup.stopped and dup.live == ("a", "b", "c") and dup.seeds == 60
    same = eliminate({"a": base, "b": dict(base), "c": dict(base)}, delta=0.02, alpha=0.05, n0=10, cap=60)
    assert same.stopped and same.equivalent and same.live == ("a", "b", "c") and same.seeds == 10
    assert same.selected is None and not same.eliminated
    other = {s: float(v) for s, v in enumerate(np.round(rng.normal(0.5, 0.1, 60) * 128) / 128)}
    shifted = {s: v - 1 / 128 for s, v in base.items()}  # one grid step behind on every seed
    e = eliminate({"a": base, "b": shifted, "c": other}, delta=0.02, alpha=0.05, n0=10)
    assert e.variances[("a", "b")] > 0
    assert "b" not in e.eliminated or e.eliminated["b"][1] > 10  # not at the first stage on a zero variance


def test_all_equal_means_pick_every_arm_about_equally():
    """Under all-equal means any pick is correct; the procedure must not favour an arm by its name or
    position (each of 4 arms kept ~25% of 400 runs; 3 se = 0.065)."""
    rng = np.random.default_rng(11)
    kept = {f"arm{j}": 0 for j in range(4)}
    for _ in range(400):
        e = eliminate(world([0, 0, 0, 0], 400, rng, grid=0.25), delta=0.5, alpha=0.1, n0=10)
        if e.stopped:
            kept[str(e.selected)] += 1
    total = sum(kept.values())
    assert total >= 390
    assert all(abs(c / total - 0.25) < 0.065 for c in kept.values())


def test_order_independent_and_replays_its_earlier_stages():
    rng = np.random.default_rng(5)
    vals = world([0.5, 0.2, 0, 0], 200, rng)
    e = eliminate(vals, delta=0.5, alpha=0.1, n0=10)
    names = list(vals)
    random.Random(1).shuffle(names)
    shuffled = {a: dict(sorted(vals[a].items(), key=lambda kv: -kv[0])) for a in names}
    assert eliminate(shuffled, delta=0.5, alpha=0.1, n0=10) == e
    # the table cut at an earlier stage gives the same eliminations up to that stage
    cut = max(r for _, r in e.eliminated.values()) - 1
    part = {a: {s: v for s, v in vals[a].items() if s < cut} for a in vals}
    early = eliminate(part, delta=0.5, alpha=0.1, n0=10)
    assert early.eliminated == {a: x for a, x in e.eliminated.items() if x[1] <= cut}
    # a seed order given by the study: the first stage is its first n0 seeds
    rev = eliminate(vals, delta=0.5, alpha=0.1, n0=10, order=list(range(199, -1, -1)))
    assert rev.variances != e.variances


def test_minimize_flips_the_direction():
    vals = {"low": {s: 0.0 + 0.01 * (s % 3) for s in range(10)}, "high": {s: 1.0 + 0.01 * (s % 2) for s in range(10)}}
    assert eliminate(vals, delta=0.1, alpha=0.05, n0=5, maximize=False).selected == "low"
