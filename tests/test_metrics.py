"""The headline metrics' formulas, on rows whose answers are worked out by hand."""

from __future__ import annotations

import json
import math

import pytest

from grpo_ablate.core.vocab import HEADLINE_METRICS, METRICS
from grpo_ablate.contract.metrics import (
    EVAL_KEYS,
    STABILITY_WINDOW,
    read_rows,
    summarize,
    summarize_eval,
    summarize_file,
    summarize_trial,
    to_target,
)


def _rows(rewards, *, seconds_per_step=1.0, completions=8, length=4.0, tokens_per_step=100):
    return [
        {
            "step": i + 1,
            "train_seconds": (i + 1) * seconds_per_step,
            "reward": r,
            "frac_reward_zero_std": 0.5,
            "completions": completions,
            "completions_mean_length": length,
            "num_tokens": (i + 1) * tokens_per_step,
            "peak_memory_mb": 100.0 + i,
        }
        for i, r in enumerate(rewards)
    ]


def test_ten_rows_hand_computed():
    # 10 reward rows -> window k = 1: start = r1, final = r10.
    rewards = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    m = summarize(_rows(rewards, seconds_per_step=36.0))  # T = 360 s = 0.1 h
    assert m["start_reward"] == pytest.approx(0.0)
    assert m["final_reward"] == pytest.approx(0.9)
    assert m["reward_gain"] == pytest.approx(0.9)
    assert m["train_seconds"] == pytest.approx(360.0)
    assert m["reward_per_hour"] == pytest.approx(0.9 / 0.1)
    # 10 steps x 8 completions over 360 s
    assert m["samples_per_second"] == pytest.approx(80 / 360)
    # num_tokens of the last row (1000) over 360 s
    assert m["tokens_per_second"] == pytest.approx(1000 / 360)
    # generated tokens = 10 x 8 x 4 = 320 -> 0.9 / 320e-6
    assert m["reward_per_million_tokens"] == pytest.approx(0.9 / 320e-6)
    assert m["peak_memory_mb"] == pytest.approx(109.0)
    assert m["frac_reward_zero_std"] == pytest.approx(0.5)
    assert m["steps"] == 10


def test_linear_curve_is_perfectly_stable_inside_but_not_at_the_ends():
    # A straight line equals its centred moving average except where the window is truncated.
    rewards = [0.1 * i for i in range(10)]
    ma = []
    for i in range(10):
        lo, hi = max(0, i - 2), min(10, i + 3)
        ma.append(sum(rewards[lo:hi]) / (hi - lo))
    residuals = [r - m for r, m in zip(rewards, ma)]
    mean = sum(residuals) / len(residuals)
    expected = sum((x - mean) ** 2 for x in residuals) / len(residuals)
    assert STABILITY_WINDOW == 5
    assert summarize(_rows(rewards))["stability_variance"] == pytest.approx(expected)
    # by hand: residuals are -0.1, -0.05, 0 x6, +0.05, +0.1 (mean 0) -> (0.01+0.0025)*2/10
    assert expected == pytest.approx(0.0025)


def test_alternating_curve_is_unsteady():
    steady = summarize(_rows([0.5] * 12))["stability_variance"]
    jumpy = summarize(_rows([0.0, 1.0] * 6))["stability_variance"]
    assert steady == pytest.approx(0.0)
    assert jumpy > 0.1


def test_smoothing_window_is_ten_percent_rounded_up():
    # 25 reward rows -> k = 3
    rewards = [0.0] * 3 + [0.5] * 19 + [1.0] * 3
    m = summarize(_rows(rewards))
    assert m["start_reward"] == pytest.approx(0.0)
    assert m["final_reward"] == pytest.approx(1.0)


def test_steps_without_generation_are_tolerated():
    rows = _rows([0.2, 0.4, 0.6, 0.8])
    # Insert optimizer steps that generated nothing: no reward keys, no completions.
    full = []
    for r in rows:
        full.append(r)
        full.append({"step": r["step"] + 0.5, "train_seconds": r["train_seconds"] + 0.5, "loss": 0.1, "completions": 0})
    m = summarize(full)
    assert m["start_reward"] == pytest.approx(0.2) and m["final_reward"] == pytest.approx(0.8)
    assert m["samples_per_second"] == pytest.approx(32 / 4.5)


def test_too_few_rows_give_none_not_errors():
    empty = summarize([])
    assert all(empty[name] is None for name in HEADLINE_METRICS if name != "steps")
    one = summarize(_rows([0.3]))
    assert one["final_reward"] == pytest.approx(0.3)
    assert one["reward_gain"] is None and one["reward_per_hour"] is None and one["stability_variance"] is None
    two = summarize(_rows([0.3, 0.5]))
    assert two["reward_gain"] == pytest.approx(0.2) and two["stability_variance"] is None


def test_nan_and_none_values_are_skipped():
    rows = _rows([0.1, 0.2, 0.3])
    rows[1]["reward"] = None
    rows.append({"step": 4, "train_seconds": 4.0, "reward": float("nan")})
    m = summarize(rows)
    assert m["start_reward"] == pytest.approx(0.1) and m["final_reward"] == pytest.approx(0.3)


def test_partial_file_with_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps(r) for r in _rows([0.1, 0.2, 0.3, 0.4])]
    path.write_text("\n".join(lines) + '\n{"step": 5, "rew')
    assert len(read_rows(path)) == 4
    assert summarize_file(path)["steps"] == 4
    assert summarize_file(tmp_path / "missing.jsonl")["reward_per_hour"] is None


def test_summarize_trial_adds_load_and_build_seconds(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in _rows([0.0, 1.0])) + "\n")
    (tmp_path / "result.json").write_text(json.dumps({"timings": {"load_seconds": 1.5, "build_seconds": 0.25, "startup_seconds": 7.0}}))
    m = summarize_trial(tmp_path)
    assert m["load_seconds"] == 1.5 and m["build_seconds"] == 0.25 and m["startup_seconds"] == 7.0
    # loading is kept out of the rates: T is the training time only
    assert m["reward_per_hour"] == pytest.approx(1.0 / (2.0 / 3600))


def test_every_metric_has_a_direction_and_words():
    for name, info in METRICS.items():
        assert info.direction in ("maximize", "minimize") or name == "steps", name
        assert len(info.description) > 20, name
    assert METRICS["stability_variance"].direction == "minimize"
    assert METRICS["reward_per_hour"].direction == "maximize"
    assert not math.isnan(summarize(_rows([0.0, 0.5, 1.0]))["reward_per_hour"])


# ---------------------------------------------------------------- held-out evaluation (eval.jsonl)


def _eval_rows(rewards, *, completions_per_point=100, tokens_per_point=300.0, seconds_per_point=2.0, eval_seconds=0.5):
    return [
        {"point": j, "step": 10 * j, "completions": completions_per_point * j, "generated_tokens": tokens_per_point * j,
         "train_seconds": seconds_per_point * j, "eval_seconds": eval_seconds, "reward": r}
        for j, r in enumerate(rewards)
    ]


def test_summarize_eval_hand_computed():
    m = summarize_eval(_eval_rows([0.2, 0.6, 0.8]))
    assert m["eval_start_reward"] == 0.2 and m["eval_final_reward"] == 0.8
    assert m["eval_gain"] == pytest.approx(0.6)
    assert m["eval_gain_per_hour"] == pytest.approx(0.6 / (4.0 / 3600))  # T = 4 s of training, eval time not in it
    assert m["eval_gain_per_million_tokens"] == pytest.approx(0.6 / (600 / 1e6))
    # trapezoids over tokens: 300 x (0.2+0.6)/2 + 300 x (0.6+0.8)/2 = 330, over 600 tokens
    assert m["eval_auc"] == pytest.approx(330 / 600)
    assert m["eval_seconds"] == pytest.approx(1.5)
    assert set(m) == set(EVAL_KEYS)


def test_summarize_eval_rewards_an_early_learner_in_auc_only():
    early, late = summarize_eval(_eval_rows([0.0, 0.8, 0.8])), summarize_eval(_eval_rows([0.0, 0.0, 0.8]))
    assert early["eval_final_reward"] == late["eval_final_reward"]
    assert early["eval_auc"] > late["eval_auc"]


def test_summarize_eval_with_too_few_rows_gives_none():
    assert all(v is None for v in summarize_eval([]).values())
    only_start = summarize_eval(_eval_rows([0.3]))
    assert only_start["eval_start_reward"] == 0.3
    assert only_start["eval_final_reward"] is None and only_start["eval_gain"] is None and only_start["eval_auc"] is None
    # rows out of order and a row without a reward are tolerated
    rows = _eval_rows([0.1, None, 0.5])[::-1]
    assert summarize_eval(rows)["eval_gain"] == pytest.approx(0.4)


def test_to_target_first_point_at_or_above():
    rows = _eval_rows([0.2, 0.5, 0.7, 0.9])
    assert to_target(rows, 0.7) == {"target_reached": True, "completions_to_target": 200,
                                    "tokens_to_target": 600.0, "seconds_to_target": 4.0}
    assert to_target(rows, 0.1)["completions_to_target"] == 0  # already there before the first step


def test_to_target_censors_at_the_budget_when_never_reached():
    rows = _eval_rows([0.2, 0.3, 0.4])
    out = to_target(rows, 0.95)
    assert out["target_reached"] is False
    # censored at the budget: the last point's compute, never None, never a made-up crossing
    assert (out["completions_to_target"], out["tokens_to_target"], out["seconds_to_target"]) == (200, 600.0, 4.0)
    assert to_target([], 0.5) == {"target_reached": False, "completions_to_target": None,
                                  "tokens_to_target": None, "seconds_to_target": None}


def test_summarize_trial_includes_eval_when_the_file_exists(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in _rows([0.0, 1.0])) + "\n")
    assert "eval_final_reward" not in summarize_trial(tmp_path) or summarize_trial(tmp_path)["eval_final_reward"] is None
    (tmp_path / "eval.jsonl").write_text("\n".join(json.dumps(r) for r in _eval_rows([0.25, 0.75])) + "\n")
    m = summarize_trial(tmp_path)
    assert m["eval_start_reward"] == 0.25 and m["eval_final_reward"] == 0.75
    assert all(k in HEADLINE_METRICS for k in EVAL_KEYS)
