"""A study in which nothing learned says it cannot rank G, why, and what to do next.

Hand-built studies (tests/_report_fixtures.py): every arm's held-out reward is flat from the
first evaluation to the last, as on a task the model cannot learn in its budget.

    pytest tests/test_report_learned_nothing.py
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from _report_fixtures import SeedRun, make_custom_study
from grpo_ablate.report import write_outputs
from grpo_ablate.report.arms import summarize_arms
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.findings import find_warnings
from grpo_ablate.report.groups import success_rates_by_arm
from grpo_ablate.report.records import TrialRecord, load_trials
from grpo_ablate.core.vocab import Arm

BASE, G2 = Arm(8, 32, 1.0), Arm(2, 32, 1.0)
FLAT = (0.0769,) * 5  # the multiplication study: the same held-out reward at every point


def _study(tmp_path, curves, zero_spread=None, advice=None):
    arms = {"baseline": (BASE, {s: SeedRun(eval_curve=c) for s, c in curves["baseline"].items()}),
            "num_generations=2": (G2, {s: SeedRun(eval_curve=c) for s, c in curves["g2"].items()})}
    storage, _ = make_custom_study(tmp_path, arms, evaluation={"num_prompts": 4}, zero_spread=zero_spread)
    attrs, frozen = load_trials(storage, "custom")
    return build_report_data("custom", attrs, frozen, storage_url=storage, advice=advice)


def test_flat_held_out_reward_cannot_rank_g(tmp_path):
    advice = {"num_prompts": 64, "never_solved": ["p"] * 61, "always_solved": [], "predictions": [],
              "completions_file": "advise/completions.jsonl"}
    data = _study(tmp_path, {"baseline": {0: FLAT, 1: FLAT}, "g2": {0: FLAT, 1: FLAT}},
                  zero_spread={"baseline": 1.0, "num_generations=2": 1.0}, advice=advice)
    v = data.verdict
    assert v.kind == "cannot_rank" and v.reason == "learned_nothing" and v.recommended is None
    assert v.headline.startswith("This study cannot rank G")
    assert "Keep the baseline" not in v.words
    # why: every arm's gain with its interval, the zero-spread shares; what next: advise's count and the remedies
    assert "baseline 0 (95% interval 0 to 0, 2 seeds)" in v.words, v.words
    assert "baseline 100%" in v.words and "num_generations=2 100%" in v.words
    assert "advise found 61 of 64 prompts never solved" in v.words
    assert "easier prompts" in v.words and "longer budget" in v.words and "stronger starting model" in v.words
    assert "advise/completions.jsonl" in v.words
    # no warning tells the user to change G when G cannot be ranked
    zero = [w for w in data.warnings if w.kind == "zero_spread"]
    assert len(zero) == 2 and all("cannot rank G" in w.message and not w.suggests for w in zero)
    assert all("cost to watch" not in w.message for w in data.warnings)
    # the page and summary.json give the same answer
    paths = write_outputs(data, tmp_path / "report.html")
    assert "This study cannot rank G" in paths["html"].read_text()
    summary = json.loads(paths["summary_json"].read_text())["verdict"]
    assert summary["kind"] == "cannot_rank" and summary["recommended"] is None


def test_a_gain_seed_effects_hide_per_arm_still_counts_as_learning(tmp_path):
    # each arm's gain alone spans zero over two seeds, but every trial gained: the study learned
    data = _study(tmp_path, {"baseline": {0: (0.1, 0.3), 1: (0.1, 0.5)}, "g2": {0: (0.1, 0.35), 1: (0.1, 0.45)}})
    assert data.verdict.kind != "cannot_rank"


def test_one_arm_that_learned_is_enough_to_rank(tmp_path):
    data = _study(tmp_path, {"baseline": {0: FLAT, 1: FLAT}, "g2": {0: (0.1, 0.5), 1: (0.1, 0.52)}})
    assert data.verdict.kind != "cannot_rank"


def test_zero_spread_is_judged_against_each_arms_own_success_rate():
    def rec(n, arm, role):
        return TrialRecord(n, "COMPLETE", "completed", None, role, arm, 0, {}, {"frac_reward_zero_std": 0.9}, (0.0,), None)

    recs = [rec(0, BASE, "baseline"), rec(1, G2, "num_generations=2")]
    groups = pd.DataFrame([{"trial": 0, "reward_mean": 0.05}, {"trial": 0, "reward_mean": 0.15},
                           {"trial": 1, "reward_mean": 0.8}])
    rates = success_rates_by_arm(recs, groups, pd.DataFrame())
    assert rates == {BASE: pytest.approx(0.1), G2: pytest.approx(0.8)}
    arms = summarize_arms(recs, ["frac_reward_zero_std"], BASE)
    found = {f.arm: f.message for f in find_warnings(recs, arms, success_p=rates) if f.kind == "zero_spread"}
    # p^G + (1-p)^G with each arm's own p: 0.1 at G=8 -> 43%, 0.8 at G=2 -> 68%
    assert "success rate 0.10 predicts 43%" in found[BASE] and "success rate 0.80 predicts 68%" in found[G2]
