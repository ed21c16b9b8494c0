"""The race's fidelity check (study/search/early_rank.py): computed from the committed 40-seed table, and able to fail."""

from __future__ import annotations

import json

import pytest

from helpers import ROOT
from grpo_ablate.study.search.early_rank import EVIDENCE, PointRank, point_ranks, race_decides_at, shown_points

TABLE = ROOT / "benchmarks/data/sequential_table.json"


def test_the_stated_evidence_is_what_the_40_seed_table_gives():
    table = json.loads(TABLE.read_text())
    ranks = [r for task in table["settings"]["tasks"] for r in point_ranks(table["rows"], task)]
    assert len(ranks) == len(EVIDENCE) == 8
    for got, stated in zip(ranks, EVIDENCE):
        assert (got.task, got.arms, got.seeds) == (stated.task, stated.arms, stated.seeds)
        for f in ("share", "tau", "low", "high"):
            assert getattr(got, f) == pytest.approx(getattr(stated, f), abs=0.006), (got, f)
    assert shown_points(ranks) == [] and "final evaluation point only" in race_decides_at(ranks)


def _rows(flip_at: int | None, seeds: int = 30):
    """Five arms, reward rising 0.1 apart at the end; at point `flip_at` their order is reversed."""
    rows = []
    for a in range(5):
        for s in range(seeds):
            noise = 0.002 * ((s * 7 + a * 3) % 5 - 2)
            curve = [[0, 0.0]]
            for j in range(1, 6):
                level = (4 - a if j == flip_at else a) * 0.1 * j / 5
                curve.append([100 * j, level + noise])
            rows.append({"task": "t", "arm": f"A{a}", "seed": s, "outcome": "completed", "curve": curve})
    return rows


def test_a_point_that_keeps_the_order_is_shown_and_one_that_reverses_it_is_not():
    ranks = point_ranks(_rows(flip_at=2), "t", boot=300)
    assert [r.share for r in ranks] == [0.2, 0.4, 0.6, 0.8]
    assert [r.shown for r in ranks] == [True, False, True, True] and ranks[1].tau == pytest.approx(-1.0)
    assert shown_points(ranks) == [0.2, 0.6, 0.8]
    assert "0.2" not in race_decides_at(ranks) and "20%, 60%, 80%" in race_decides_at(ranks)
    # a point must hold on every task to count
    other = PointRank("u", 0.2, 0.1, -0.5, 0.6, 5, 30)
    assert shown_points([*ranks, other]) == [0.6, 0.8]
    assert point_ranks(_rows(None)[:10], "t") == []  # fewer than three arms: nothing to rank
