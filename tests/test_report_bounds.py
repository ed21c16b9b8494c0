"""Intervals stay inside the range a quantity can take (vocab.Metric.low/high): no negative memory."""

from __future__ import annotations

import pytest

from grpo_ablate.report.arms import summarize_arms
from grpo_ablate.report.figure import yerr as _yerr
from grpo_ablate.report.records import TrialRecord
from grpo_ablate.stats.seeds import stat
from grpo_ablate.report.text import fmt, fmt_stat, fmt_stat_short
from grpo_ablate.core.vocab import Arm, metric


def _rec(n: int, seed: int, metrics: dict[str, float]) -> TrialRecord:
    return TrialRecord(n, "COMPLETE", "completed", None, "baseline", Arm(8, 16, 1.0), seed, {}, metrics, None, None)


def test_stat_cuts_the_interval_at_the_bounds_and_keeps_the_mean():
    free = stat([10.0, 10.0, 400.0])
    assert free.ci95 is not None and free.ci95[0] < 0  # the plain t interval claims negative values
    s = stat([10.0, 10.0, 400.0], low=0.0)
    assert s.mean == 140.0 and s.ci95 == (0.0, free.ci95[1])
    assert s.errors == (140.0, pytest.approx(free.ci95[1] - 140.0))
    assert s.half_width == pytest.approx(free.half_width)  # the t half-width itself is unchanged
    share = stat([0.9, 1.0, 1.0], low=0.0, high=1.0)
    assert share.ci95 is not None and share.ci95[1] == 1.0 and share.ci95[0] > 0


def test_arms_use_the_registry_bounds():
    memory = metric("peak_memory_mb")
    assert memory.low == 0.0
    recs = [_rec(i, i, {"peak_memory_mb": v, "reward_gain": g})
            for i, (v, g) in enumerate([(10.0, -1.0), (10.0, 0.0), (400.0, 4.0)])]
    (arm,) = summarize_arms(recs, ["peak_memory_mb", "reward_gain"])
    assert arm.metrics["peak_memory_mb"].ci95[0] == 0.0
    assert arm.metrics["reward_gain"].ci95[0] < 0  # a reward can fall: no bound, no cut
    below, above = _yerr([arm.metrics["peak_memory_mb"]])
    assert below == [140.0] and above[0] > 140.0  # the error bar stops at zero


def test_cut_intervals_are_written_asymmetric():
    s = stat([10.0, 10.0, 400.0], low=0.0)
    assert fmt_stat_short(s).startswith("140 +") and fmt_stat_short(s).endswith("/−140")
    assert fmt_stat(s).endswith("(3 seeds)")
    assert fmt_stat_short(stat([1.0, 2.0, 3.0])) == "2.00 ± 2.5"


def test_the_one_formatter():
    assert [fmt(None), fmt(float("nan")), fmt(0.0), fmt(1234.5), fmt(0.0123), fmt(2e-5), fmt(3e6)] == \
        ["–", "–", "0", "1,234", "0.0123", "2.00e-05", "3.00e+06"]
    assert [fmt(96), fmt(1_500_000), fmt(True), fmt("n/a")] == ["96", "1,500,000", "True", "n/a"]
