"""groups.jsonl through TRL's public reward interface: a reward of weight 0 that records the round.

The recorder (trainer/rewards.py GroupsRecorder) replaced the read of GRPOTrainer._logs. Two
things must hold: it changes nothing TRL trains on (one real step with and without it: the same
loss, advantages and logged rewards), and it records what TRL's own log of the round holds (the
same prompts, completions and per-reward scores, so groups.jsonl's rows are unchanged).
"""

from __future__ import annotations

import json
import math

import pytest

from grpo_ablate.trainer import build
from grpo_ablate.trainer.rewards import GROUPS_RECORDER, GenerationRound, GroupsRecorder, record_groups
from grpo_ablate.core.vocab import GROUPS_FILE, METRICS_FILE
from helpers import tiny_spec

# Half the completions scored by no reward (TRL leaves them out of the baseline: a recorder that scored 0 would
# move every advantage), and an async reward, which TRL calls after the sync ones (it notes after the recorder).
REWARDS = [{"name": "helpers_rewards:half_none", "weight": 0.5}, {"name": "helpers_rewards:async_all_none"}]
NAMES = ("half_none", "async_all_none")


def test_the_recorder_keeps_the_last_generation_batch_with_every_rewards_scores():
    recorder = GroupsRecorder(["a", "b"], keep=4)
    first, second = ["x1", "x2", "x3", "x4"], ["y1", "y2", "y3", "y4"]
    for prompts, completions in ((["p"] * 4, first), (["q"] * 4, second)):
        recorder.note(completions, "a", [1.0, 0.0, None, 0.1])
        assert recorder(prompts=prompts, completions=completions) == [None] * 4  # weight 0 and no score
    recorder.note(second, "b", [0.5, 0.5, 0.5, 0.5])  # an async reward notes after the recorder's call
    recorder.note(["held-out"], "a", [1.0])  # a batch TRL never scored as a round (evaluation): not recorded
    batch = recorder.latest()
    assert batch == GenerationRound(["q"] * 4, second, {"a": [1.0, 0.0, None, pytest.approx(0.1)], "b": [0.5] * 4})
    assert batch.rewards["a"][3] != 0.1 and batch.rewards["a"][3] == pytest.approx(0.1, abs=1e-8)  # float32, as TRL
    assert GroupsRecorder(["a"], keep=4).latest() is None  # before the first round


def test_the_recorder_joins_the_rewards_with_weight_zero_and_a_name_of_its_own():
    def r(completions, **_):
        return [1.0] * len(completions)

    funcs, weights, recorder = record_groups([r], ["r"], [0.5], generation_batch_size=2)
    assert weights == [0.5, 0.0] and funcs[-1] is recorder and funcs[-1].__name__ == GROUPS_RECORDER
    assert funcs[0].__name__ == "r" and funcs[0](prompts=["p", "p"], completions=["a", "b"]) == [1.0, 1.0]
    with pytest.raises(ValueError, match="grpo_ablate_groups"):
        record_groups([r], [GROUPS_RECORDER], [1.0], generation_batch_size=2)


def _one_step(folder, monkeypatch, *, recorder: bool):
    """One real optimizer step of the tiny model; (metrics row, the round's advantages, the trainer's round log)."""
    if not recorder:  # the study's rewards alone, as TRL ran them before the recorder existed
        monkeypatch.setattr(build, "record_groups", lambda funcs, names, weights, gbs: (
            list(funcs), list(weights), GroupsRecorder(names, gbs)))
    built = build.build_trial(tiny_spec(folder, steps=1, num_prompts=64, rewards=REWARDS), log=lambda _: None, echo=False)
    trainer, advantages = built.trainer, []
    score = trainer._generate_and_score_completions  # the test watches TRL's output; the package never does

    def watched(inputs):
        out = score(inputs)
        advantages.append(out["advantages"].tolist())
        return out

    trainer._generate_and_score_completions = watched
    trainer.train()
    built.recorder.close()
    (row,) = [json.loads(x) for x in (folder / METRICS_FILE).read_text().splitlines()]
    groups = [json.loads(x) for x in (folder / GROUPS_FILE).read_text().splitlines()]
    return row, advantages, groups, trainer, built


def _nan_none(values):
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]


@pytest.mark.slow
def test_one_step_trains_the_same_with_the_recorder_and_its_rows_are_trls_own(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    row, adv, groups, trainer, built = _one_step(tmp_path / "with", monkeypatch, recorder=True)
    assert trainer.args.reward_weights == [0.5, 1.0, 0.0]  # GRPOConfig: the study's weights, the recorder's 0
    assert groups and all(g["num_generations"] == row["num_generations"] for g in groups)
    assert not any(GROUPS_RECORDER in k for k in row)

    # the recorder holds exactly what TRL logged of the round (the old source of groups.jsonl)
    logs = trainer._logs  # the test compares with TRL's private log; the package no longer reads it
    batch = built.recorder.groups.latest()
    assert batch.prompts == list(logs["prompt"]) and batch.completions == list(logs["completion"])
    for name in NAMES:
        assert batch.rewards[name] == _nan_none(list(logs["rewards"][name])), name
    assert any(v is None for v in batch.rewards["half_none"]) and set(batch.rewards["async_all_none"]) == {None}

    with monkeypatch.context() as m:
        plain_row, plain_adv, plain_groups, _, _ = _one_step(tmp_path / "without", m, recorder=False)
    assert plain_groups == []  # without the recorder nothing records the round
    assert adv == plain_adv and len(adv[0]) == trainer.args.generation_batch_size
    for key in ("loss", "reward", "reward_std", "frac_reward_zero_std", "rewards/half_none/mean", "grad_norm"):
        assert row[key] == plain_row[key], key
