"""The reward registry: built-ins on hand-made completions, module:function, and the safety wrapper."""

from __future__ import annotations

import pytest

from grpo_ablate.contract.spec import RewardEntry
from grpo_ablate.trainer.builtin.tasks import TASKS, task_problems
from grpo_ablate.trainer.rewards import (
    REWARD_FACTORIES,
    RewardContext,
    RewardFunctionError,
    build_reward,
    build_rewards,
)

CTX = RewardContext(task="addition", max_completion_length=10)


def call(name: str, completions, ctx: RewardContext = CTX, **kwargs):
    _, func = build_reward(name, ctx)
    return func(prompts=["p"] * len(completions), completions=completions, **kwargs)


def test_format_and_tag_count():
    good = "<think>\n7+5 is 12\n</think>\n<answer>\n12\n</answer>"
    half = "<think>\nhmm\n</think>\n12"
    doubled = "<think>\na\n</think>\n<think>\nb\n</think>\n<answer>\n1\n</answer>"
    assert call("format", [good, half, doubled]) == [1.0, 0.0, 1.0]  # Open R1's lazy regex lets the second pair in
    assert call("tag_count", [good, half, doubled]) == [1.0, 0.5, 0.5]


def test_conversational_completions_are_read_as_text():
    msg = [{"role": "assistant", "content": "<think>\nx\n</think>\n<answer>\n4\n</answer>"}]
    assert call("format", [msg]) == [1.0]


def test_length_penalty_uses_token_ids_and_the_completion_budget():
    assert call("length_penalty", ["a", "b", "c"], completion_ids=[[1] * 5, [1] * 10, [1] * 20]) == [-0.5, -1.0, -1.0]


def test_task_reward_checks_the_exact_answer():
    assert call("task", ["55", " 55 ", "45", "555"], answer=["55"] * 4) == [1.0, 1.0, 0.0, 0.0]
    name, _ = build_reward("task", CTX)
    assert name == "addition"  # logged under the task's name: rewards/addition/mean
    assert call("addition", ["10"], answer=["10"]) == [1.0]


def test_task_reward_without_a_task_says_so():
    with pytest.raises(ValueError, match="built-in task"):
        build_reward("task", RewardContext(task=None))


def test_builtin_task_problems_are_carry_drills_with_right_answers():
    for prompt, answer in task_problems("addition", 200):
        a, b = (int(x) for x in prompt.rstrip("=").split("+"))
        assert a + b == int(answer) and (a % 10) + (b % 10) >= 10 and len(prompt) == 5
    assert task_problems("addition", 5) == task_problems("addition", 5)  # same on every call
    assert "addition" in TASKS


def test_accuracy_with_math_verify():
    pytest.importorskip("math_verify")
    completions = [
        "<think>so</think><answer>\\frac{1}{2}</answer>",
        "<answer>0.5</answer>",  # no LaTeX: Open R1's extraction finds no answer in it
        "<answer>$3$</answer>",
        "The answer is $\\boxed{\\frac{1}{2}}$",
    ]
    out = call("accuracy", completions, solution=["$\\frac{1}{2}$"] * 4)
    assert out == [1.0, 0.0, 0.0, 1.0]
    # an `answer` column works too, plain numbers included
    assert call("accuracy", ["<answer>42</answer>", "<answer>41</answer>"], answer=["42", "42"]) == [1.0, 0.0]


def test_accuracy_needs_a_gold_column():
    pytest.importorskip("math_verify")
    with pytest.raises(RewardFunctionError, match="'accuracy'.*solution"):
        call("accuracy", ["1"])


def test_module_function_rewards_and_their_names():
    name, func = build_reward("helpers_rewards:wrong_length", CTX)
    assert name == "wrong_length"
    with pytest.raises(RewardFunctionError, match=r"'wrong_length' returned 4 values for 3 completions"):
        func(prompts=["p"] * 3, completions=["a", "b", "c"])


def test_a_raising_reward_is_named_in_the_error():
    _, func = build_reward("helpers_rewards:always_raises", CTX)
    with pytest.raises(RewardFunctionError, match=r"reward function 'always_raises' raised ValueError: always_raises"):
        func(prompts=["p"], completions=["a"])


def test_memory_errors_pass_through_unwrapped():
    # Out of memory is the hardware's verdict on the trial (outcome oom), not a bug in the reward.
    _, func = build_reward("helpers_rewards:oom_for_large_groups", CTX)
    with pytest.raises(MemoryError):
        func(prompts=["p"] * 8, completions=["a"] * 8)


def test_non_numbers_are_rejected_and_nan_becomes_none(tmp_path, monkeypatch):
    mod = tmp_path / "odd_rewards.py"
    mod.write_text(
        "def strings(completions, **kw):\n    return ['1'] * len(completions)\n"
        "def nans(completions, **kw):\n    return [float('nan'), None, 1]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RewardFunctionError, match="'strings' returned str"):
        build_reward("odd_rewards:strings", CTX)[1](prompts=["p"], completions=["a"])
    assert build_reward("odd_rewards:nans", CTX)[1](prompts=["p"] * 3, completions=["a"] * 3) == [None, None, 1.0]


def test_unknown_names_list_the_choices():
    with pytest.raises(ValueError, match="unknown reward 'acuracy'.*accuracy"):
        build_reward("acuracy", CTX)
    with pytest.raises(ValueError, match="cannot import module"):
        build_reward("no_such_module_xyz:f", CTX)
    with pytest.raises(ValueError, match="has no attribute"):
        build_reward("helpers_rewards:nope", CTX)


def test_build_rewards_defaults_to_the_task_and_keeps_weights():
    funcs, names, weights = build_rewards([], CTX)
    assert names == ["addition"] and weights == [1.0] and funcs[0].__name__ == "addition"
    funcs, names, weights = build_rewards([RewardEntry("format", 0.5), RewardEntry("tag_count")], CTX)
    assert names == ["format", "tag_count"] and weights == [0.5, 1.0]
    with pytest.raises(ValueError, match="listed twice"):
        build_rewards([RewardEntry("format"), RewardEntry("format")], CTX)
    with pytest.raises(ValueError, match="no rewards given"):
        build_rewards([], RewardContext(task=None))


def test_registry_lists_the_documented_builtins():
    assert {"accuracy", "format", "tag_count", "length_penalty", "task"} <= set(REWARD_FACTORIES)


def test_async_rewards_stay_async_and_are_checked():
    import asyncio
    import inspect

    name, func = build_reward("helpers_rewards:async_exact", CTX)
    assert name == "async_exact" and inspect.iscoroutinefunction(func)
    assert asyncio.run(func(prompts=["p", "p"], completions=["5", "6"], answer=["5", "5"])) == [1.0, 0.0]
    _, short = build_reward("helpers_rewards:async_short", CTX)
    with pytest.raises(RewardFunctionError, match="'async_short' returned 1 values for 2 completions"):
        asyncio.run(short(prompts=["p", "p"], completions=["a", "b"]))
