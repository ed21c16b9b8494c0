"""The feasible space: cases from practice, and agreement with the installed TRL's GRPOConfig."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_ablate.core.space import BatchShape, auto_batches, check_pair, feasible_space


def _feasible_gens(shape: BatchShape, gens, batches=None):
    return {p.num_generations for p in feasible_space(shape, gens, batches).feasible}


def test_two_processes_four_per_device():
    shape = BatchShape(world_size=2, per_device_train_batch_size=4, gradient_accumulation_steps=1)
    assert shape.default_generation_batch_size == 8
    assert check_pair(shape, 8) is None
    reason = check_pair(shape, 6)
    assert reason is not None and "8" in reason and "6" in reason


def test_two_processes_three_per_device_two_accumulation():
    shape = BatchShape(world_size=2, per_device_train_batch_size=3, gradient_accumulation_steps=2)
    assert shape.default_generation_batch_size == 12
    assert _feasible_gens(shape, [4, 5, 6]) == {4, 6}
    space = feasible_space(shape, [4, 5, 6])
    (rej,) = space.rejected
    assert rej.num_generations == 5 and rej.generation_batch_size == 12
    assert "not divisible by num_generations 5" in rej.reason


def test_open_r1_seven_training_gpus():
    shape = BatchShape(world_size=7, per_device_train_batch_size=16, gradient_accumulation_steps=16)
    assert shape.default_generation_batch_size == 1792
    assert _feasible_gens(shape, [5, 6, 7, 8, 14, 16]) == {7, 8, 14, 16}
    pair = feasible_space(shape, [7]).feasible[0]
    assert (pair.steps_per_generation, pair.prompts_per_generation) == (16, 256)


def test_group_of_one_is_rejected_with_reason():
    space = feasible_space(BatchShape(1, 8), [1, 2])
    assert [p.num_generations for p in space.feasible] == [2]
    assert "at least 2" in space.rejected[0].reason


def test_searched_batch_must_be_multiple_of_unit():
    shape = BatchShape(world_size=2, per_device_train_batch_size=3)
    assert "divisible by per_device_train_batch_size x processes = 3 x 2 = 6" in check_pair(shape, 2, 20)
    assert check_pair(shape, 2, 24) is None


def test_eval_batch_rule():
    shape = BatchShape(world_size=1, per_device_train_batch_size=8, eval_enabled=True, per_device_eval_batch_size=6)
    assert "evaluation is on" in check_pair(shape, 4)
    assert check_pair(shape, 2) is None
    shape_eval_g = BatchShape(world_size=1, per_device_train_batch_size=8, eval_enabled=True,
                              per_device_eval_batch_size=6, num_generations_eval=3)
    assert check_pair(shape_eval_g, 4) is None


def test_steps_per_generation_blocks_batch_search():
    shape = BatchShape(world_size=1, per_device_train_batch_size=4, steps_per_generation=2)
    assert shape.default_generation_batch_size == 8
    assert "cannot both be set" in check_pair(shape, 4, 16)


def test_auto_batches_hold_whole_groups():
    shape = BatchShape(world_size=2, per_device_train_batch_size=2)
    batches = auto_batches(shape, [3], limit=24)
    assert batches == [12, 24]  # multiples of lcm(2 x 2, 3)
    space = feasible_space(shape, [3, 4], "auto", 24)
    assert all(p.generation_batch_size % p.num_generations == 0 and p.generation_batch_size % 4 == 0
               for p in space.feasible)


def test_no_feasible_pair_gives_suggestions():
    space = feasible_space(BatchShape(2, 3, 2), [5])
    assert not space.feasible
    assert any("multiple of 30" in s for s in space.suggestions)
    assert any("[4, 6]" in s or "4" in s for s in space.suggestions)


# ------------------------------------------------------------ agreement with TRL itself


@pytest.fixture(scope="module")
def grpo_config_cls():
    trl = pytest.importorskip("trl")
    return trl.GRPOConfig


def _trl_accepts(cls, tmp_path, monkeypatch, world, per_device, accum, G, gbs, eval_on, eval_bs) -> str | None:
    # GRPOConfig reads the world size from the launch; emulate an N-process launch shape.
    monkeypatch.setattr(cls, "world_size", property(lambda self: world))
    kwargs = dict(output_dir=str(tmp_path), per_device_train_batch_size=per_device,
                  gradient_accumulation_steps=accum, num_generations=G, use_cpu=True, bf16=False,
                  report_to="none", per_device_eval_batch_size=eval_bs)
    if gbs is not None:
        kwargs["generation_batch_size"] = gbs
    if eval_on:
        kwargs["eval_strategy"] = "steps"
    try:
        cls(**kwargs)
    except ValueError as e:
        return str(e)
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    world=st.integers(1, 8),
    per_device=st.integers(1, 16),
    accum=st.integers(1, 8),
    G=st.integers(1, 33),
    gbs=st.one_of(st.none(), st.integers(1, 512)),
    eval_on=st.booleans(),
    eval_bs=st.integers(1, 16),
)
def test_agrees_with_trl(grpo_config_cls, tmp_path, world, per_device, accum, G, gbs, eval_on, eval_bs):
    shape = BatchShape(world_size=world, per_device_train_batch_size=per_device, gradient_accumulation_steps=accum,
                       eval_enabled=eval_on, per_device_eval_batch_size=eval_bs)
    ours = check_pair(shape, G, gbs)
    with pytest.MonkeyPatch.context() as mp:
        theirs = _trl_accepts(grpo_config_cls, tmp_path, mp, world, per_device, accum, G, gbs, eval_on, eval_bs)
    assert (ours is None) == (theirs is None), f"ours={ours!r} trl={theirs!r}"


@pytest.mark.parametrize("world,per_device,accum,G,ok", [
    (2, 4, 1, 8, True), (2, 4, 1, 6, False), (2, 3, 2, 5, False), (2, 3, 2, 4, True), (2, 3, 2, 6, True),
    (7, 16, 16, 7, True), (7, 16, 16, 16, True), (7, 16, 16, 5, False), (7, 16, 16, 6, False),
])
def test_practice_cases_agree_with_trl(grpo_config_cls, tmp_path, monkeypatch, world, per_device, accum, G, ok):
    theirs = _trl_accepts(grpo_config_cls, tmp_path, monkeypatch, world, per_device, accum, G, None, False, 8)
    assert (theirs is None) == ok
    assert (check_pair(BatchShape(world, per_device, accum), G) is None) == ok


# ------------------------------------------------------------------ the round rule against TRL's own cadence


@pytest.mark.parametrize("ga,spg,iters", [(2, 2, 2), (3, 2, 1), (1, 1, 3)])
def test_the_round_rule_is_trls_generation_cadence(tmp_path, ga, spg, iters):
    """space.Rounds says at which optimizer steps TRL generates; a real GRPOTrainer on the tiny model
    says it too (each `_generate_and_score_completions` call, at the steps completed then)."""
    pytest.importorskip("trl")
    from helpers import tiny_spec
    from grpo_ablate.trainer.build import build_trial

    steps = 4
    spec = tiny_spec(tmp_path, steps=steps, num_prompts=64, per_device_train_batch_size=2, num_generations=2,
                     gradient_accumulation_steps=ga, steps_per_generation=spg, num_iterations=iters)
    trainer = build_trial(spec, log=lambda _: None, echo=False).trainer
    seen: list[int] = []
    generate = trainer._generate_and_score_completions

    def counted(*args, **kwargs):
        seen.append(trainer.state.global_step)
        return generate(*args, **kwargs)

    trainer._generate_and_score_completions = counted
    trainer.train()
    rounds = BatchShape(1, 4, ga, spg, num_iterations=iters).rounds()
    expected = [rounds.round_start_step(k) for k in range(len(seen) + 1) if rounds.round_start_step(k) < steps]
    assert seen == expected
    assert len(set(seen)) == rounds.generating_steps(steps)
    assert all(s % rounds.period_steps == 0 or rounds.round_start_step(0) == 0 for s in seen)


def test_a_generation_batch_given_sets_the_rounds_as_trl_does():
    shape = BatchShape(world_size=2, per_device_train_batch_size=4, gradient_accumulation_steps=2, num_iterations=2)
    assert shape.rounds().micro_steps_per_round == 4 and shape.rounds(32).steps_per_generation == 4
    assert shape.rounds(32).micro_steps_per_round == 8 and shape.rounds(32).period_steps == 4
    assert shape.rounds(32).generating_steps(10) == 3  # rounds at micro-steps 0, 8, 16 of 20
    assert BatchShape(1, 4, 4, 1).rounds().generating_steps(7) == 7  # a round inside every step
