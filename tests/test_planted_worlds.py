"""The answer's statistics on planted worlds: exact means, the committed tables' real residuals drawn i.i.d.

    pytest tests/test_planted_worlds.py

Each world of issue 51 (benchmarks/worlds.py) as a planted-means test with seeds drawn with replacement: the
calls' family-wise error in Holm's least-favourable null, with unequal spreads and with ties on the reward
grid; the design's guarantee at the least-favourable configuration; the elimination race's guarantee and its
equivalence stop; the page's one family across the effects table; the answer not depending on arm names; an
interval of a bounded mean that keeps its coverage inside the bounds. Small, fixed-seed versions of
benchmarks/calibration.py: every bound is the claimed rate plus two Monte Carlo standard errors (stated in
each test), and where a weaker rule would pass by luck the test shows that rule failing the same bound.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from worlds import DOMINATED, HOLM_NULL, LFC, TIES, UNEQUAL, draw, paired_sd, tables  # noqa: E402

import grpo_ablate.stats.model as model  # noqa: E402
from grpo_ablate.stats.bounded import bounded_interval  # noqa: E402
from grpo_ablate.stats.calls import calls, page_calls  # noqa: E402
from grpo_ablate.stats.elimination import race_cost, simulate  # noqa: E402
from grpo_ablate.stats.selection import design_pcs, eps_best, recommend, select  # noqa: E402

ME = 0.05


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def rare():
    """addition_rare (G = 2, 4, 8, 16, 32): the table where the arms' spreads differ most (sd 0.068-0.089)."""
    task = next(t for t in tables() if t.name.startswith("addition_rare"))
    return task, {task.labels[a].split(",")[0]: i for i, a in enumerate(task.arms)}


def _false_calls(world, reps_calls) -> bool:
    base = world.truth[world.baseline]
    return any(c.call in ("better", "worse") for a, c in reps_calls.items() if world.truth[a] == base)


def _holm_fwer(task, idx, reps: int, seed: int, spreads=None) -> float:
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(reps):
        w = draw(task, HOLM_NULL, ME, 12, rng, holm_arm=idx["G=32"], baseline=idx["G=2"], spreads=spreads)
        wrong += _false_calls(w, calls(w.values, w.baseline, min_effect=ME))
    return wrong / reps


def test_holms_least_favourable_null_keeps_five_percent_where_one_pooled_variance_did_not(rare, monkeypatch):
    """Baseline G=2 (the widest spread), G=32 far ahead, G=4, 8, 16 equal to the baseline, 12 i.i.d. seeds: any
    better/worse call on an equal arm is an error. 400 studies each: se at 0.05 is 0.011, the bound 0.05 + 2 se.
    As measured, and with the baseline's spread widened (x1.5, the rest x0.8: an unequal-spread null), where the
    same studies read with one pooled variance for every contrast (the model before issue 51) err at about 0.1."""
    task, idx = rare
    reps, bound = 400, 0.05 + 2 * se(0.05, 400)
    wide = [1.5 if j == idx["G=2"] else 0.8 for j in range(len(task.arms))]
    assert _holm_fwer(task, idx, reps, 3) <= bound
    own = _holm_fwer(task, idx, reps, 1, wide)
    assert own <= bound, own
    monkeypatch.setattr(model, "_moderate", lambda own_v, own_df, pooled, pooled_df: (pooled, pooled_df))
    pooled = _holm_fwer(task, idx, reps, 1, wide)
    assert pooled > bound and pooled > own + 0.03, (pooled, own)


@pytest.mark.parametrize("world", [UNEQUAL, TIES])
def test_nulls_with_unequal_spreads_or_ties_on_the_grid_keep_the_calls_and_exclusions_at_five_percent(rare, world):
    """All arms equal; residual columns scaled 0.6-1.5x (sd ratio 2.5), or every value on the 1/128 grid (repeated
    paired differences): any better/worse call or any exclusion from the as-good set is false. 8 seeds, 300
    studies: se at 0.05 is 0.0126, the bound 0.05 + 2 se."""
    task, _ = rare
    rng = np.random.default_rng(5)
    wrong = 0
    for _ in range(300):
        w = draw(task, world, ME, 8, rng)
        c = calls(w.values, w.baseline, min_effect=ME)
        wrong += _false_calls(w, c) or bool(eps_best(w.values, ME)[1])
    assert wrong / 300 <= 0.05 + 2 * se(0.05, 300), (world, wrong / 300)


@pytest.mark.parametrize("n", [3, 12])
def test_the_design_guarantee_comes_true_at_the_least_favourable_configuration(rare, n):
    """One arm ahead by min_effect plus a hair, 3 or 12 i.i.d. seeds: the stated guarantee (Bechhofer's P(the best
    mean is the best arm) for this design, averaged over the spread's posterior) against how often the best mean
    was the best arm: within 0.03 plus two Monte Carlo standard errors of the rate (300 studies: se 0.029 near
    0.5). Read at the spread's point estimate it overstated by 0.04-0.07 at 3 seeds."""
    task, _ = rare
    rng = np.random.default_rng(9)
    stated, hit = [], []
    for _ in range(300):
        w = draw(task, LFC, ME, n, rng)
        stated.append(design_pcs(model.fit(w.values), ME))
        means = {a: float(np.mean(list(v.values()))) for a, v in w.values.items()}
        hit.append(w.truth[max(means, key=lambda a: means[a])] == w.best)
    realized = float(np.mean(hit))
    assert abs(float(np.mean(stated)) - realized) <= 0.03 + 2 * se(realized, 300), (np.mean(stated), realized)


def test_the_elimination_race_reaches_its_stated_probability_at_the_least_favourable_configuration(rare):
    """KN++ at confidence 0.9 (n0 5) on the least-favourable configuration of the rare table: it picks the best
    at least 0.9 - 0.03 - 2 se of the time (300 races, se 0.017), at fewer mean seeds per arm than Bechhofer's
    fixed design needs for the probability it reached (its paired sd, known variance)."""
    from grpo_ablate.stats.selection import bechhofer_seeds

    task, _ = rare
    rng = np.random.default_rng(11)
    worlds = [draw(task, LFC, ME, 200, rng) for _ in range(300)]
    x = np.array([[[w.values[a][i] for a in task.arms] for i in range(200)] for w in worlds])
    ran, kept = simulate([0.0] * len(task.arms), 1.0, delta=ME, alpha=0.1, n0=5, max_seeds=200, x=x)
    best = np.array([task.arms.index(max(w.truth, key=lambda a: w.truth[a])) for w in worlds])
    p = float(np.mean(kept == best))
    assert p >= 0.9 - 0.03 - 2 * se(0.9, 300), p
    assert ran.mean() < bechhofer_seeds(len(task.arms), ME, paired_sd(task), min(p, 0.99))


def test_the_equivalence_stop_ends_a_race_of_tied_arms_and_the_cheapest_is_recommended():
    """Three configurations that score the same on every seed (on the reward grid: their paired differences are
    0, the variance at the grid's floor) can never eliminate one another; the equivalence stop ends the race at
    its first seeds with all three equivalent, and the answer is the cheapest of them, on the race's guarantee.
    Without the stop the race runs to its cap. KN alone would also end a race of arms whose noise is far below
    min_effect, at its first stage, by the best mean; the stop is for what it cannot separate."""
    from grpo_ablate.stats.elimination import eliminate

    rng = np.random.default_rng(23)
    x = np.round(rng.normal(0.6, 0.07, 40) * 128) / 128
    table = {a: {s: float(v) for s, v in enumerate(x)} for a in ("g2", "g8", "g16")}
    e = eliminate(table, delta=ME, alpha=0.1, n0=3, cap=40)
    assert e.stopped and e.equivalent and e.seeds <= 5 and set(e.live) == {"g2", "g8", "g16"}
    assert not eliminate(table, delta=ME, alpha=0.1, n0=3, cap=40, equivalence=False).stopped
    seen = {a: {s: v for s, v in vals.items() if s < e.seeds} for a, vals in table.items()}
    sel = select(seen, ME, costs={"g2": 1.0, "g8": 4.0, "g16": 8.0}, chosen=list(e.live), draws=500)
    assert sel.recommended == "g2" and not sel.kept
    ran, kept = simulate([0.0, 0.0, 0.0], 0.01, delta=ME, alpha=0.1, n0=3, max_seeds=50, runs=100, seed=1,
                         x=np.repeat(np.round(rng.normal(0.6, 0.07, (100, 50, 1)) * 128) / 128, 3, axis=2))
    # the floor reads the first stage's grid (3 values per arm here), so a coarse draw can take a few more seeds
    assert (kept == -1).all() and ran.max() < 50 and ran.mean() < 8


def test_a_race_is_priced_on_its_mean_seeds_not_its_median():
    cost = race_cost(4, 0.05, 0.1, 0.9, 5, 60, runs=400)
    ran, _ = simulate([0.0] * 4, 0.1 / math.sqrt(2), delta=0.05, alpha=0.1, n0=5, max_seeds=60, runs=400, seed=2)
    assert cost.tied == pytest.approx(float(ran.mean())) and cost.planning >= cost.least_favourable
    assert float(np.median(ran.mean(axis=1))) != pytest.approx(cost.tied)  # the two differ: the mean is the one used


def test_the_page_keeps_one_five_percent_over_the_calls_and_the_tables_other_metrics():
    """Five equal arms and ten null metrics in the effects table beside the answer's: any better/worse colour or
    call is false. Tested one metric at a time the page errs far above 5%; in the page's one family it does
    not. 300 studies, se at 0.05 is 0.0126, the bound 0.05 + 2 se."""
    rng = np.random.default_rng(13)
    reps, page, per_metric = 300, 0, 0
    for _ in range(reps):
        vals = {f"a{j}": {s: float(v) for s, v in enumerate(rng.normal(0.5, 0.05, 6))} for j in range(5)}
        others = []
        for _ in range(10):
            metric = {a: {s: float(v) for s, v in enumerate(rng.normal(0.5, 0.05, 6))} for a in vals}
            fit = model.fit(metric)
            others += [fit.contrast("a0", a).two_sided_p() for a in metric if a != "a0"]
        c, adj = page_calls(vals, "a0", min_effect=0.01, others=others)
        page += any(x.call in ("better", "worse") for x in c.values()) or any(p < 0.05 for p in adj)
        alone = calls(vals, "a0", min_effect=0.01)
        per_metric += any(x.call in ("better", "worse") for x in alone.values()) or any(
            min(1.0, 4 * p) < 0.05 for p in others)  # each metric its own Holm family of four
    assert page / reps <= 0.05 + 2 * se(0.05, reps), page / reps
    assert per_metric / reps > 0.2


def test_the_answer_does_not_depend_on_what_the_arms_are_called(rare):
    """Renaming the arms (and so their sorted order) changes nothing: the same recommendation, probabilities,
    set and exclusions, on 100 planted studies with ties on the grid (where a name could break a tie)."""
    task, _ = rare
    rng = np.random.default_rng(17)
    for _ in range(100):
        w = draw(task, TIES, ME, 5, rng)
        names = {a: f"z{9 - j}" for j, a in enumerate(task.arms)}
        one = select(w.values, ME, draws=500, reference=w.baseline)
        two = select({names[a]: v for a, v in w.values.items()}, ME, draws=500, reference=names[w.baseline])
        assert names[str(one.recommended)] == two.recommended and names[str(one.leader)] == two.leader
        assert {names[a]: p for a, p in one.p_within.items()} == two.p_within
        assert {names[a] for a in one.eps_best} == set(two.eps_best)


def test_a_dominated_baseline_the_page_excludes_is_never_kept():
    """One arm 4 x min_effect behind the rest, and that arm the baseline (addition_mixed, 6 seeds, 150 studies):
    where no arm reaches 0.95 the answer used to keep the baseline even when the page excluded it, recommending the
    dominated arm. Now an excluded baseline is never the answer, and the dominated arm is recommended in at most
    5% of studies (it is excluded in nearly all); the old rule on the same studies recommends it far more often."""
    task = next(t for t in tables() if t.name.startswith("addition_mixed"))
    rng = np.random.default_rng(23)
    reps, now, before = 150, 0, 0
    for _ in range(reps):
        w = draw(task, DOMINATED, ME, 6, rng)
        dominated = min(w.truth, key=lambda a: w.truth[a])
        sel = select(w.values, ME, draws=1000, reference=dominated)
        if dominated in sel.excluded:
            assert sel.recommended != dominated and not sel.kept and w.within(str(sel.recommended), ME)
            assert sel.reference_excluded == (None if sel.confident else dominated)
        now += sel.recommended == dominated
        before += recommend(sel.p_within, confidence=sel.confidence, reference=dominated)[0] == dominated
    assert now / reps <= 0.05 and before / reps >= 0.10, (now, before)  # 0 and 23 of 150 when written


def test_a_bounded_mean_interval_stays_inside_and_keeps_its_coverage():
    """Seeds of a reward in [0, 1] near its top (Beta(18, 1.5): mean 0.923) and in the middle: the betting
    interval covers the true mean at least 95% - 2 se of 300 studies of 4 and of 12 seeds, and never leaves
    [0, 1]; where Student's t runs past 1 it does not."""
    rng = np.random.default_rng(19)
    for a, b in ((18.0, 1.5), (5.0, 5.0)):
        truth = a / (a + b)
        for n in (4, 12):
            hits = 0
            for _ in range(300):
                lo, hi = bounded_interval(list(rng.beta(a, b, n)), 0.0, 1.0)
                assert 0.0 <= lo <= hi <= 1.0
                hits += lo <= truth <= hi
            assert hits / 300 >= 0.95 - 2 * se(0.95, 300), (a, b, n, hits)
    lo, hi = bounded_interval([0.965, 0.961, 0.953, 0.894], 0.0, 1.0)
    assert hi <= 1.0 and lo < 0.894
