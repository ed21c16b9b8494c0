"""Held-out evaluation in real trials of the tiny built-in model, trained in this process (no mocks).

In-process (worker.run_spec, the trial process's own code path) to spare a Python start per
trial; three short trials, about 30 s on 2 cores.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from grpo_ablate.contract.metrics import read_jsonl, read_rows, summarize_trial, to_target
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.core.vocab import EVAL_FILE, GROUPS_FILE, METRICS_FILE, Outcome

from helpers import tiny_spec
from grpo_ablate.contract.spec import DataSpec, EvaluationSpec, ModelSpec

pytestmark = pytest.mark.slow

EVAL = {"num_prompts": 48, "temperature": 1.0, "samples_per_prompt": 2, "points": 2, "show_prompts": 3}
SLOW_EVAL_S = 5.0  # far above a tiny step even on a loaded machine (~0.3 s): the gaps below keep 3.5 s of margin


def _spec(tmp: Path, name: str, *, steps: int, evaluation: dict[str, Any], rewards=(), **trainer):
    return tiny_spec(tmp / name, steps=steps, num_prompts=200, evaluation=evaluation, rewards=rewards, **trainer)


def _run(spec) -> dict[str, Any]:
    from grpo_ablate.trainer.worker import run_spec

    outcome, payload = run_spec(spec)
    assert outcome is Outcome.COMPLETED, payload.get("traceback") or payload.get("reason")
    return payload


def _eval(trial: Path) -> list[dict[str, Any]]:
    return read_jsonl(trial / EVAL_FILE)[0]


@pytest.fixture(scope="module")
def two_arms(tmp_path_factory) -> dict[str, Path]:
    """G=8 at training temperature 1.0 and G=2 at 0.3, same seed, 6 steps of 32 completions."""
    tmp = tmp_path_factory.mktemp("arms")
    for name, g, t in (("g8", 8, 1.0), ("g2", 2, 0.3)):
        _run(_spec(tmp, name, steps=6, evaluation=EVAL, num_generations=g, temperature=t, seed=0))
    return {"g8": tmp / "g8", "g2": tmp / "g2"}


def test_evaluation_points_sit_at_equal_generated_compute_for_different_g(two_arms):
    a, b = _eval(two_arms["g8"]), _eval(two_arms["g2"])
    # 6 steps x 32 completions = 192; points=2 -> 64 and 128, plus the start and the end
    assert [r["completions"] for r in a] == [r["completions"] for r in b] == [0, 64, 128, 192]
    assert [r["point"] for r in a] == [0, 1, 2, 3] and [r["step"] for r in a] == [0, 2, 4, 6]
    for rows in (a, b):
        assert all(r["num_prompts"] == 48 and len(r["per_prompt"]) == 48 and r["samples_per_prompt"] == 2 for r in rows)
        assert all(r["temperature"] == 1.0 and r["max_completion_length"] == TINY_CPU_TRAINER["max_completion_length"] for r in rows)
        assert all(len(r["samples"]) == 3 and all(len(s["completions"]) == 2 for s in r["samples"]) for r in rows)
        assert rows[-1]["generated_tokens"] > 0 and rows[-1]["eval_seconds"] > 0
    # the trial's metrics carry the held-out summary
    m = summarize_trial(two_arms["g8"])
    assert m["eval_start_reward"] == a[0]["reward"] and m["eval_final_reward"] == a[-1]["reward"]


def test_evaluation_reward_does_not_depend_on_the_training_temperature(two_arms):
    """Same weights at point 0: arms trained at 1.0 and at 0.3 score identically (even sampling at 1.0)."""
    a, b = _eval(two_arms["g8"])[0], _eval(two_arms["g2"])[0]
    assert a["reward"] == b["reward"] and a["per_prompt"] == b["per_prompt"]
    assert a["samples"] == b["samples"]


def test_evaluation_prompts_never_appear_in_training(two_arms, tmp_path):
    from grpo_ablate.trainer.build import load_model_and_tokenizer
    from grpo_ablate.trainer.prompts import load_prompt_sets

    shown = {s["prompt"] for r in _eval(two_arms["g8"]) for s in r["samples"]}
    for trial in two_arms.values():
        trained = {json.loads(line)["prompt"] for line in (trial / GROUPS_FILE).read_text().splitlines()}
        assert trained and not trained & shown
    # the whole sets: the built-in task's own held-out draw, and a dataset's held-out tail
    _, tok, _ = load_model_and_tokenizer(ModelSpec("builtin:tiny"), DataSpec(task="addition"), log=lambda m: None)
    train, held = load_prompt_sets(DataSpec(task="addition", num_prompts=200), EvaluationSpec(**EVAL), tok, log=lambda m: None)
    assert len(held) == 48 and not set(train["prompt"]) & set(held["prompt"])
    rows = [{"prompt": f"{i % 50}+1=", "answer": str(i % 50 + 1)} for i in range(60)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    data = {"dataset": str(tmp_path / "d.jsonl"), "chat_template": False}
    train, held = load_prompt_sets(DataSpec(**data), EvaluationSpec(num_prompts=20), tok, log=lambda m: None)
    # the tail is held out, and a held-out prompt repeated in the head is dropped from evaluation
    assert len(train) == 40 and len(held) == 10 and not set(train["prompt"]) & set(held["prompt"])


def test_an_unreachable_target_is_censored_at_the_budget(two_arms):
    rows = _eval(two_arms["g8"])
    out = to_target(rows, 1.01)  # the task's reward is at most 1
    assert out["target_reached"] is False
    assert out["completions_to_target"] == 192 and out["tokens_to_target"] == rows[-1]["generated_tokens"]
    assert out["seconds_to_target"] == rows[-1]["train_seconds"]


def slow_eval_reward(completions, trainer_state=None, **_):
    """Zero everywhere; sleeps when it scores the 8 held-out completions before the last step."""
    if len(completions) == 8 and trainer_state is not None and trainer_state.global_step < 2:
        time.sleep(SLOW_EVAL_S)
    return [0.0] * len(completions)


def test_evaluation_time_is_never_training_time(tmp_path):
    """Evaluations that take SLOW_EVAL_S each leave no such gap in metrics.jsonl's train_seconds."""
    evaluation = {"num_prompts": 8, "points": 1}
    spec = _spec(tmp_path, "slow", steps=2, evaluation=evaluation, num_generations=8,
                 rewards=[{"name": "addition"}, {"name": "test_evaluation_e2e:slow_eval_reward"}])
    payload = _run(spec)
    rows = _eval(spec.path)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[0]["eval_seconds"] >= SLOW_EVAL_S and rows[1]["eval_seconds"] >= SLOW_EVAL_S
    steps = read_rows(spec.path / METRICS_FILE)
    # an evaluation before step 1 and one between steps 1 and 2: neither shows in the training clock
    assert steps[0]["train_seconds"] < SLOW_EVAL_S - 1.5
    assert steps[1]["train_seconds"] - steps[0]["train_seconds"] < SLOW_EVAL_S - 1.5
    assert payload["timings"]["eval_seconds"] >= 2 * SLOW_EVAL_S
    assert summarize_trial(spec.path)["eval_seconds"] >= 2 * SLOW_EVAL_S
