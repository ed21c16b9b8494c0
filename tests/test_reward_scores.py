"""Rewards that give no usable score (issue 23, item 9): the trial fails naming the reward and the
value it returned, at the first batch, instead of "could not be computed" after training."""

from __future__ import annotations

import asyncio

import pytest

from grpo_ablate.contract.spec import RewardEntry
from grpo_ablate.trainer.rewards import RewardContext, RewardFunctionError, build_reward, build_rewards

CTX = RewardContext(task="addition", max_completion_length=10)
COMPLETIONS = ["1", "2", "3", "4"]


def _call_all(funcs, completions=COMPLETIONS):
    """As TRL calls a study's rewards on one batch: the same completions list to each, in order."""
    prompts = ["p"] * len(completions)
    out = []
    for f in funcs:
        values = f(prompts=prompts, completions=completions)
        out.append(asyncio.run(values) if asyncio.iscoroutine(values) else values)
    return out


@pytest.mark.parametrize("name, value", [("all_none", "None"), ("all_nan", "nan"), ("async_all_none", "None")])
def test_a_lone_reward_that_scores_nothing_fails_naming_itself_and_the_value(name, value):
    _, func = build_reward(f"helpers_rewards:{name}", CTX)
    with pytest.raises(RewardFunctionError) as e:
        _call_all([func])
    assert f"'{name}' returned {value} for all 4 completions" in str(e.value)


def test_an_infinite_reward_fails_naming_the_value_and_position():
    _, func = build_reward("helpers_rewards:one_inf", CTX)
    with pytest.raises(RewardFunctionError, match=r"'one_inf' returned inf at position 3; a reward must be a finite"):
        _call_all([func])


def test_abstaining_beside_a_reward_that_scores_is_fine():
    funcs, names, _ = build_rewards([RewardEntry("helpers_rewards:all_none"), RewardEntry("format")], CTX)
    for _ in range(3):  # batch after batch: each one is settled once both rewards have seen it
        none, scores = _call_all(funcs, list(COMPLETIONS))
        assert none == [None] * 4 and all(isinstance(s, float) for s in scores)


def test_a_batch_no_reward_scores_names_every_reward():
    funcs, names, _ = build_rewards([RewardEntry("helpers_rewards:all_none"), RewardEntry("helpers_rewards:all_nan")], CTX)
    with pytest.raises(RewardFunctionError) as e:
        _call_all(funcs)
    message = str(e.value)
    assert "'all_none' returned None for all 4 completions" in message and "'all_nan' returned nan" in message


def test_a_single_unscored_completion_is_left_to_trl():
    """TRL scores a completion no reward scored as 0 with a warning; only a batch with no score at all is broken."""
    funcs, _, _ = build_rewards([RewardEntry("helpers_rewards:all_nan"), RewardEntry("format")], CTX)
    assert _call_all(funcs)[1] == [0.0] * 4
