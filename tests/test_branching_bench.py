"""benchmarks/branching.py's scoring: designs read from the tables, truth disjoint from each replay, rates that can fail."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import branching as bench  # noqa: E402

ARMS = ["a", "b", "c"]


def _table(values: dict[str, dict[int, float]], at20: dict[str, dict[int, float]], full: int = 60) -> dict:
    """A full-run table in sequential_table.py's shape: final rewards, and each arm's curve with a point at step 20."""
    rows = [{"task": "t", "arm": a, "label": f"G={a}, batch 32, T=1", "role": "baseline" if a == "a" else a, "seed": s,
             "outcome": "completed", "objective": v,
             "curve": [[0, 0.0], [20 * bench.PER_STEP, at20[a][s]], [full * bench.PER_STEP, v]], "seconds": 10.0}
            for a in ARMS for s, v in values[a].items()]
    return {"settings": {"steps": full}, "rows": rows}


def _branches(values: dict[str, dict[int, float]], end: int) -> list[dict]:
    return [{"kind": "branch", "arm": a, "seed": s, "outcome": "completed", "curve": [[20, 0.1], [end, v]]}
            for a in ARMS for s, v in values[a].items()]


def _flat(means: dict[str, float], seeds: int, noise: float = 0.01) -> dict[str, dict[int, float]]:
    """Each arm at its mean, moved by a seed effect every arm shares plus its own noise (fixed draws)."""
    rng = np.random.default_rng(7)
    common = rng.normal(0, 0.03, seeds)
    return {a: {s: float(m + common[s] + rng.normal(0, noise)) for s in range(seeds)} for a, m in means.items()}


def test_designs_read_the_step_they_name_and_price_the_prefix_once():
    full = _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 6)
    at20 = _flat({"a": 0.2, "b": 0.1, "c": 0.3}, 6)
    table = _table(full, at20)
    assert bench.scratch_design(table, 60).values == full
    assert bench.scratch_design(table, 20).values == at20
    assert bench.scratch_design(table, 40).values == {}  # no point at step 40 in this table: nothing invented
    assert bench.scratch_design(table, 60, arms=3).steps_per_seed == 180
    rows = _branches(full, 40) + [{"kind": "prefix", "arm": "a", "seed": 0, "outcome": "completed", "curve": [[20, 0.9]]}]
    d = bench.branched_design(rows, 20, 20, arms=3)
    assert d.values == full and d.steps_per_seed == 20 + 3 * 20  # one prefix, then every arm's own steps
    assert bench.branched_design(rows, 20, 10, arms=3).values == {}


def test_a_design_that_ranks_the_arms_backwards_is_never_within_and_pays_the_gap():
    truth = bench.Design("truth", _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 20), 180)
    backwards = bench.Design("backwards", _flat({"a": 0.5, "b": 0.4, "c": 0.6}, 20), 60)
    r = bench.replay(backwards, truth, 6, 0.02, replays=20)
    assert r["within"] == 0.0 and r["regret"] == pytest.approx(0.2, abs=0.01)  # it answers c; the run's best is b
    assert r["own_within"] == 1.0 and r["own_regret"] < 0.01  # by its own measure it looks right: why both are shown
    assert r["steps"] == 6 * 60 and r["wrong"] == 1.0  # c is 0.2 behind b on all the truth's seeds
    same = bench.replay(truth, truth, 6, 0.02, replays=20)
    assert same["within"] == 1.0 and same["regret"] < 0.01 and same["wrong"] == 0.0


def test_every_replay_is_scored_on_seeds_it_did_not_see_and_designs_share_the_draws():
    truth = bench.Design("truth", _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 15), 180)
    other = bench.Design("other", _flat({"a": 0.5, "b": 0.58, "c": 0.45}, 15), 60)
    r1, r2 = (bench.replay(d, truth, 5, 0.05, replays=10) for d in (truth, other))
    assert [a["seen"] for a in r1["answers"]] == [a["seen"] for a in r2["answers"]]  # common random numbers
    assert all(len(set(a["seen"])) == 5 for a in r1["answers"])
    diff = bench.paired_difference(r2["answers"], r1["answers"], 0.05)
    assert diff["difference"] == pytest.approx(r2["within"] - r1["within"])
    with pytest.raises(ValueError, match="same seeds"):
        bench.paired_difference(r2["answers"][1:], r1["answers"][:-1], 0.05)
    with pytest.raises(ValueError, match="seeds the replay did not see"):
        bench.replay(other, truth, 15, 0.05, replays=1)  # no held-out seed would be left for the truth


def test_best_g_shows_a_changed_winner_with_its_uncertainty():
    clear = bench.best_g(bench.Design("clear", _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 20), 60), 0.02)
    assert clear["best"] == "b" and clear["arms"]["b"]["p_best"] > 0.99 and clear["eps_best"] == ["b"]
    values = _flat({"a": 0.5, "c": 0.3}, 20, noise=0.03)
    mean = statistics.fmean(values["a"].values())
    values["b"] = {s: values["a"][19 - s] for s in range(20)}  # a's mean exactly, its seeds' values in another order
    assert statistics.fmean(values["b"].values()) == pytest.approx(mean)  # a's mean exactly, its seeds' noise in another order
    tied = bench.best_g(bench.Design("tied", values, 60), 0.02)
    assert 0.05 < tied["arms"]["a"]["p_best"] < 0.95 and set(tied["eps_best"]) == {"a", "b"}  # no winner claimed
    assert tied["arms"]["c"]["p_best"] == 0.0 and tied["arms"]["a"]["ci95"] > 0


def test_figures_pair_every_branched_design_with_every_scratch_one_on_the_seeds_all_of_them_have():
    full = _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 12)
    table = _table(full, _flat({"a": 0.2, "b": 0.1, "c": 0.3}, 12))
    for r in table["rows"]:
        r["curve"].insert(2, [40 * bench.PER_STEP, r["objective"] - 0.1])
    rows = [{"kind": "branch", "arm": a, "seed": s, "outcome": "completed", "seconds": 5.0,
             "curve": [[20, 0.1], [30, v - 0.2], [40, v - 0.1], [60, v]]}
            for a in ARMS for s, v in full[a].items() if s < 10]  # two seeds short: the pool is the 10 all designs have
    fig = bench.figures(table, {"rows": rows}, k=4, replays=5)
    assert fig["pool"] == 10 and len(fig["rows"]) == (1 + 6) * len(bench.MIN_EFFECTS)  # the no-study control too
    assert len(fig["paired"]) == 3 * 3 * len(bench.MIN_EFFECTS)
    by = {(r["design"], r["min_effect"]): r for r in fig["rows"]}
    assert by[("branched at 20, +40 steps", 0.02)]["within"] == 1.0  # it measures what the full run gets
    assert by[("scratch, 20 steps", 0.02)]["within"] == 0.0  # at step 20 this table ranks c first
    control = by[("no study: keep the baseline (G=a)", 0.02)]
    assert control["within"] == 0.0 and control["regret"] == pytest.approx(0.1, abs=0.01) and control["steps"] == 0
    assert control["wrong"] == 1.0
    assert fig["truth_error"]["arms"] == ["b", "a"] and fig["truth_error"]["held"] == 12 - 4
    assert by[("branched at 20, +20 steps", 0.02)]["share_of_full"] == pytest.approx((20 + 5 * 20) / (5 * 60))


def test_a_change_in_one_arms_effect_is_measured_paired_over_seeds():
    scratch = bench.Design("scratch", _flat({"a": 0.5, "b": 0.5, "c": 0.4}, 20), 300)
    values = {arm: dict(v) for arm, v in scratch.values.items()}
    values["b"] = {s: v - 0.07 for s, v in values["b"].items()}  # b loses 0.07 when it branches; c does not
    change = bench.effect_change(bench.Design("branched", values, 220), scratch, "a")
    assert change["b"]["change"] == pytest.approx(-0.07) and change["b"]["ci95"] < 0.01
    assert change["c"]["change"] == pytest.approx(0.0, abs=1e-12)
    assert change["b"]["effect_b"] == pytest.approx(change["b"]["effect_a"] + 0.07) and set(change) == {"b", "c"}


def _warmup_rows(full: dict[str, dict[int, float]], branched: dict[str, dict[int, float]], w: int = 15, n: int = 60) -> list[dict]:
    """The warmup table's rows: per seed every arm's full run (scored at quarters), the baseline's prefix, every branch.

    A full run scores `v - 0.1 * (quarters left)` along the way and 0 inside the warmup; the baseline's branch
    reproduces its full run at the end exactly (seed 0's prefix does not: one broken reproduction)."""
    rows = []
    for a in ARMS:
        for s, v in full[a].items():
            rows.append({"kind": "full", "arm": a, "label": f"G={a}, batch 32, T=1", "seed": s, "outcome": "completed",
                         "seconds": 4.0, "curve": [[0, 0.0], [w, 0.0], [30, v - 0.2], [45, v - 0.1], [n, v]]})
            end = v if a == "a" else branched[a][s]
            rows.append({"kind": "branch", "arm": a, "label": f"G={a}, batch 32, T=1", "seed": s, "outcome": "completed",
                         "seconds": 3.0, "curve": [[w, 0.0], [30, end - 0.2], [45, end - 0.1], [n, end]]})
    for s in full["a"]:
        rows.append({"kind": "prefix", "arm": "a", "label": "G=a, batch 32, T=1", "seed": s, "outcome": "completed",
                     "seconds": 1.0, "curve": [[0, 0.0], [w, 0.01 if s == 0 else 0.0]]})
    return rows


def test_warmup_designs_read_the_full_run_at_each_length_and_price_the_prefix_once():
    full = _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 6)
    rows = _warmup_rows(full, _flat({"a": 0.5, "b": 0.4, "c": 0.6}, 6))
    ds = {d.name: d for d in bench.warmup_designs(rows, 15, 60)}
    assert list(ds) == ["scratch, 60 steps", "scratch, 45 steps", "scratch, 30 steps", "scratch, 15 steps",
                        "branched at 15, +45 steps", "branched at 15, +30 steps", "branched at 15, +15 steps"]
    assert ds["scratch, 60 steps"].values == full
    assert ds["scratch, 30 steps"].values["b"] == {s: v - 0.2 for s, v in full["b"].items()}
    assert ds["scratch, 15 steps"].values["c"] == {s: 0.0 for s in range(6)}  # inside the warmup nothing has moved
    assert ds["scratch, 45 steps"].steps_per_seed == len(bench.GENERATIONS) * 45
    assert ds["branched at 15, +15 steps"].steps_per_seed == 15 + len(bench.GENERATIONS) * 15
    assert bench.full_run_design(rows, 50).values == {}  # no point at step 50: nothing invented


def test_warmup_figures_score_against_the_full_run_and_count_the_reproductions():
    full = _flat({"a": 0.5, "b": 0.6, "c": 0.4}, 12)
    table = {"settings": bench.warmup_settings(15, 60), "rows": _warmup_rows(full, _flat({"a": 0.5, "b": 0.4, "c": 0.6}, 12))}
    fig = bench.warmup_figures(table, k=4, replays=5)
    by = {(r["design"], r["min_effect"]): r for r in fig["rows"]}
    assert by[("scratch, 60 steps", 0.02)]["within"] == 1.0 and by[("scratch, 60 steps", 0.02)]["share_of_full"] == 1.0
    assert by[("branched at 15, +45 steps", 0.02)]["within"] == 0.0  # its branches rank c first; the full run's best is b
    assert by[("branched at 15, +45 steps", 0.02)]["wrong"] == 1.0
    assert by[("branched at 15, +15 steps", 0.05)]["share_of_full"] == pytest.approx((15 + 5 * 15) / (5 * 60))  # priced at the benchmark's 5 arms
    assert fig["reproduced"] == {"prefix_equal": 11, "prefix_total": 12, "resume_equal": 12, "resume_total": 12}
    assert [(c["design"], c["against"]) for c in fig["changes"]] == [
        ("branched at 15, +45 steps", "scratch, 60 steps"), ("branched at 15, +30 steps", "scratch, 45 steps"),
        ("branched at 15, +15 steps", "scratch, 30 steps")]
    assert fig["changes"][0]["arms"]["b"]["change"] == pytest.approx(-0.2, abs=0.02)  # b loses its lead when it branches
    assert fig["seconds"] == {"full_per_seed": 12.0, "branched_per_seed": 10.0} and fig["truth_seeds"] == 12
    assert fig["branch"] == 15 and fig["full"] == 60


def test_the_warmup_build_refuses_a_branch_point_outside_the_run(tmp_path):
    with pytest.raises(ValueError, match="warmup"):
        bench.build_warmup(1, 60, 60, tmp_path / "t.json", tmp_path / "work")
