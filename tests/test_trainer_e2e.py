"""Real GRPO trials of the trainer core, run as the study runs them: a one-process CPU trial in the
warm session (tests/fixtures_warm.py), the rest (failures, timeouts, stops, torchrun) through
run_trial -> a worker process of their own (a torchrun trial: tests/test_g_policy_e2e.py).

No mocks: the tiny built-in model (warm-started once, cached under ~/.cache/grpo-ablate or
$GRPO_ABLATE_CACHE) trains with TRL's GRPOTrainer on the CPU. About 2 minutes on 2 cores,
plus ~30-60 s the first time the warm start is built.
"""

from __future__ import annotations

import json
import threading

import pytest

from grpo_ablate.contract.metrics import read_rows
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.launch import run_trial
from grpo_ablate.core.vocab import Outcome
from helpers import TRIAL_ENV, environment_kept, tiny_spec

pytestmark = pytest.mark.slow


def _margin(rows: list[dict]) -> tuple[float, float]:
    rewards = [r["reward"] for r in rows if r.get("reward") is not None]
    k = max(1, len(rewards) // 10)
    return sum(rewards[:k]) / k, sum(rewards[-k:]) / k


def test_builtin_task_learns_and_group_size_shows(tmp_path, warm_session):
    """The product demo: within its 50 optimizer steps the reward rises by a clear margin; G=2 and G=8 differ."""
    results = {}
    for g in (8, 2):
        result = warm_session.run(tiny_spec(tmp_path / f"g{g}", steps=50, num_generations=g))
        assert result.outcome is Outcome.COMPLETED, result.reason + "\n" + result.log_tail
        rows = read_rows(tmp_path / f"g{g}" / "metrics.jsonl")
        first, last = _margin(rows)
        assert last >= first + 0.15, f"G={g}: reward {first:.3f} -> {last:.3f}, expected a gain of at least 0.15"
        # the time the rates divide by is this trial's own training clock, advancing with every step
        # (how many seconds that is depends on the machine's load, so no bound on it is asserted)
        assert result.metrics["train_seconds"] == pytest.approx(rows[-1]["train_seconds"])
        assert all(b["train_seconds"] > a["train_seconds"] > 0 for a, b in zip(rows, rows[1:]))
        assert result.metrics["reward_gain"] == pytest.approx(last - first)
        results[g] = result
        # every optimizer step is a row with the documented keys; the groups file holds whole groups
        assert [r["step"] for r in rows] == list(range(1, 51))
        for key in ("train_seconds", "reward", "reward_std", "frac_reward_zero_std", "rewards/addition/mean",
                    "completions_mean_length", "completions_clipped_ratio", "entropy", "num_tokens", "step_time",
                    "completions", "peak_memory_mb", "loss", "grad_norm", "learning_rate", "generation_seconds"):
            assert key in rows[0], key
        assert rows[0]["completions"] == TINY_CPU_TRAINER["per_device_train_batch_size"]
        groups = [json.loads(line) for line in (tmp_path / f"g{g}" / "groups.jsonl").read_text().splitlines()]
        assert groups and all(x["num_generations"] == g and 0 < x["distinct_frac"] <= 1 for x in groups)
        assert {x["step"] for x in groups} == set(range(1, 51))
        assert all(len(x["rewards"]) == g and x["prompt"].endswith("=") for x in groups)
        for key in ("load_seconds", "build_seconds", "train_seconds"):  # (startup_seconds: a fresh process's)
            assert result.timings[key] > 0, key
    # Two groups of a weak policy agree far more often than eight: the zero-spread share differs.
    assert results[2].metrics["frac_reward_zero_std"] > results[8].metrics["frac_reward_zero_std"] + 0.15
    assert results[2].metrics["stability_variance"] != results[8].metrics["stability_variance"]


def test_reward_that_raises_fails_with_its_name(tmp_path):
    result = run_trial(tiny_spec(tmp_path / "raises", rewards=["helpers_rewards:always_raises"]))
    assert result.outcome is Outcome.FAILED
    assert "always_raises" in result.reason and "ValueError" in result.reason
    assert result.exception_type == "RewardFunctionError"
    assert "always_raises" in result.log_tail
    saved = json.loads((tmp_path / "raises" / "result.json").read_text())
    assert saved["outcome"] == "failed" and "always_raises" in saved["reason"] and "traceback" in saved


def test_reward_with_wrong_length_fails_with_its_name(tmp_path):
    result = run_trial(tiny_spec(tmp_path / "len", rewards=[{"name": "task"}, {"name": "helpers_rewards:wrong_length", "weight": 0.5}]))
    assert result.outcome is Outcome.FAILED
    n = TINY_CPU_TRAINER["per_device_train_batch_size"]
    assert f"'wrong_length' returned {n + 1} values for {n} completions" in result.reason


def test_memory_error_is_oom(tmp_path):
    result = run_trial(tiny_spec(tmp_path / "oom", rewards=["helpers_rewards:oom_for_large_groups"], num_generations=8))
    assert result.outcome is Outcome.OOM, result.reason
    assert "MemoryError" in result.reason


def test_beta_with_builtin_model_uses_a_reference(tmp_path, warm_session):
    result = warm_session.run(tiny_spec(tmp_path / "beta", steps=3, beta=0.04))
    assert result.outcome is Outcome.COMPLETED, f"{result.reason}\n{result.log_tail}"
    rows = read_rows(tmp_path / "beta" / "metrics.jsonl")
    assert len(rows) == 3 and all("kl" in r for r in rows)


def test_timeout_interrupts_with_reason(tmp_path):
    """A timeout is the machine's slowness, not the cell's fault: interrupted, so a study queues it again (issue 41.4)."""
    result = run_trial(tiny_spec(tmp_path / "slow", steps=1000, timeout_s=4))
    assert result.outcome is Outcome.INTERRUPTED
    assert "timeout" in result.reason and "4" in result.reason
    assert json.loads((tmp_path / "slow" / "result.json").read_text())["outcome"] == "interrupted"


def test_stop_request_prunes_and_keeps_partial_metrics(tmp_path):
    stop = threading.Event()
    seen: list[dict] = []

    def on_progress(row: dict) -> None:
        seen.append(row)
        if len(seen) >= 3:
            stop.set()

    result = run_trial(tiny_spec(tmp_path / "stop", steps=500), on_progress=on_progress, stop_event=stop)
    assert result.outcome is Outcome.PRUNED, f"{result.reason}\n{result.log_tail}"
    rows = read_rows(tmp_path / "stop" / "metrics.jsonl")
    assert 3 <= len(rows) < 500 and [r["step"] for r in seen] == [r["step"] for r in rows]
    assert result.metrics["steps"] == len(rows) and result.metrics["reward_gain"] is not None
    assert (tmp_path / "stop" / "STOP").read_text().strip() == "pruned"


def test_seconds_budget_stops_training_as_completed(tmp_path, warm_session):
    result = warm_session.run(tiny_spec(tmp_path / "secs", budget={"max_steps": 2000, "seconds": 1.5}))
    assert result.outcome is Outcome.COMPLETED, result.reason
    assert result.reason and result.reason.startswith("budget")
    assert 1 <= result.metrics["steps"] < 2000


def test_run_one_cli_prints_the_table_and_writes_the_trial_files(study_here, tmp_path):
    folder = tmp_path / "one"
    res = study_here("run-one", "studies/tiny-cpu.yaml", "--set", "num_generations=4", "--set", "temperature=0.9",
                     "--set", "budget.max_steps=4", "--trial-dir", str(folder))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reward_per_hour" in res.stdout and "stability_variance" in res.stdout and "completed" in res.stdout
    for name in ("spec.json", "metrics.jsonl", "groups.jsonl", "log.txt", "result.json", "resolved_config.json"):
        assert (folder / name).exists(), name
    resolved = json.loads((folder / "resolved_config.json").read_text())
    assert resolved["num_generations"] == 4 and resolved["temperature"] == 0.9 and resolved["max_steps"] == 4
    assert len(read_rows(folder / "metrics.jsonl")) == 4


def test_user_dataset_local_model_path_chat_template_and_reward_registry(tmp_path, warm_session):
    """The real-model path, offline: a local model folder, a jsonl with its own prompt column,
    a system prompt and chat template, the Open R1 rewards by name and one by module:function."""
    pytest.importorskip("math_verify")
    from grpo_ablate.trainer.builtin.model import builtin_model_path

    with environment_kept():  # a first build sets TORCHINDUCTOR_CACHE_DIR here: the trial keeps the warm session's key
        model_dir = builtin_model_path("builtin:tiny-untrained", None)  # a plain saved model folder
    data = tmp_path / "math.jsonl"
    data.write_text("\n".join(json.dumps({"problem": f"what is {i} plus {i}?", "solution": f"${2 * i}$"}) for i in range(16)))
    template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                "{% if add_generation_prompt %}assistant: {% endif %}")
    spec = spec_from_sections(
        tmp_path / "user",
        model={"name_or_path": str(model_dir), "dtype": "float32"},
        data={"dataset": str(data), "prompt_column": "problem", "system_prompt": "answer in tags", "chat_template": template},
        rewards=[{"name": "accuracy"}, {"name": "format"}, {"name": "tag_count", "weight": 0.5},
                 {"name": "length_penalty", "weight": 0.1}, {"name": "helpers_rewards:solution_length"}],
        trainer={"num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 12,
                 "learning_rate": 1e-4, "seed": 0},
        budget={"completions": 16},  # 16 completions / 8 per step = 2 optimizer steps
        env=dict(TRIAL_ENV),  # tiny_spec's: the same warm session as the other trials here
    )
    result = warm_session.run(spec)
    assert result.outcome is Outcome.COMPLETED, f"{result.reason}\n{result.log_tail}"
    rows = read_rows(tmp_path / "user" / "metrics.jsonl")
    assert len(rows) == 2
    for name in ("accuracy", "format", "tag_count", "length_penalty", "solution_length"):
        assert f"rewards/{name}/mean" in rows[0], name
    resolved = json.loads((tmp_path / "user" / "resolved_config.json").read_text())
    # the study's weights, then groups.jsonl's recorder at weight 0 (trainer/rewards.py record_groups)
    assert resolved["reward_weights"] == [1.0, 1.0, 0.5, 0.1, 1.0, 0.0] and resolved["max_steps"] == 2
    assert all("grpo_ablate_groups" not in k for k in rows[0])  # the recorder is no reward of the study
    group = json.loads((tmp_path / "user" / "groups.jsonl").read_text().splitlines()[0])
    assert group["prompt"].startswith("what is") and group["num_generations"] == 4


def test_steps_without_generation_log_no_reward_and_are_tolerated(tmp_path, warm_session):
    # generation_batch_size = 2 x the step's batch: one generation feeds two optimizer steps.
    # An async reward rides along: TRL runs it concurrently, through the same checked wrapper.
    rewards = [{"name": "task"}, {"name": "helpers_rewards:async_exact", "weight": 0.0}]
    result = warm_session.run(tiny_spec(tmp_path / "spg", steps=4, rewards=rewards, per_device_train_batch_size=32, generation_batch_size=64))
    assert result.outcome is Outcome.COMPLETED, f"{result.reason}\n{result.log_tail}"
    rows = read_rows(tmp_path / "spg" / "metrics.jsonl")
    assert [("reward" in r, r["completions"]) for r in rows] == [(True, 64), (False, 0), (True, 64), (False, 0)]
    assert all(r["completions_trained"] == 32 for r in rows)
    assert rows[0]["rewards/async_exact/mean"] == rows[0]["rewards/addition/mean"]  # same rule, async
    assert result.metrics["samples_per_second"] == pytest.approx(128 / result.metrics["train_seconds"])
    assert result.metrics["reward_gain"] is not None
    assert {json.loads(x)["step"] for x in (tmp_path / "spg" / "groups.jsonl").read_text().splitlines()} == {1, 3}
