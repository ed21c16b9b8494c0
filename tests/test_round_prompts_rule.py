"""One count of the prompts a generation round draws (schedule.prompts_per_round), for everyone who needs it.

The feasible space reports it per pair (`prompts_per_generation`, printed by `plan`), the probe and the
trial refuse a training set that cannot fill a round with it (preflight/probe.py, trainer/build.py),
the G-per-round sampler draws rounds of that size (trainer/scheduled.py), and the screen and advise count
the prompts with reward spread per step from it (preflight/screen_rule.py signal_per_step). They computed it four
times; the probe divided by a schedule's final G where the trial divides by its smallest, so a probe
of `2->8` at a batch of 32 asked the training set for 4 prompts a round where the trial needs 16.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_ablate.config import load_study
from grpo_ablate.preflight.screen_rule import signal_per_step
from grpo_ablate.core.schedule import Dynamic, PerPrompt, Schedule, Switch, prompts_per_round
from grpo_ablate.core.space import BatchShape, Rounds, feasible_space
from helpers import ROOT

TINY = str(ROOT / "studies/tiny-cpu.yaml")

plain = st.integers(min_value=2, max_value=32)
schedules = st.lists(st.sampled_from([2, 3, 4, 6, 8, 12, 16]), min_size=2, max_size=3).map(
    lambda gs: Schedule(tuple(gs), tuple(Switch("progress", 100.0 * (i + 1) / len(gs)) for i in range(len(gs) - 1))))
dynamic = st.builds(Dynamic, st.integers(min_value=2, max_value=32), st.integers(min_value=0, max_value=3))
per_prompt = st.integers(min_value=2, max_value=16).flatmap(
    lambda g: st.builds(PerPrompt, st.just(g), st.integers(min_value=2, max_value=g), st.integers(min_value=g, max_value=32)))
generations = st.one_of(plain, schedules, dynamic, per_prompt)


def test_a_schedule_counts_its_smallest_phase():
    two_to_eight = Schedule((2, 8), (Switch("progress", 50.0),))
    assert prompts_per_round(32, two_to_eight) == 16 and int(two_to_eight) == 8  # not 32 // 8
    assert prompts_per_round(32, 8) == 4 and prompts_per_round(32, Dynamic(8)) == 4
    assert prompts_per_round(32, PerPrompt(8, 2, 16)) == 4  # the round's prompts share its 32 completions


@settings(max_examples=150, deadline=None)
@given(g=generations, world=st.sampled_from([1, 2, 4]), per_device=st.sampled_from([2, 4, 8, 16, 32]),
       accumulation=st.sampled_from([1, 2, 4]))
def test_the_feasible_space_reports_the_rule_for_every_pair(g, world, per_device, accumulation):
    shape = BatchShape(world_size=world, per_device_train_batch_size=per_device, gradient_accumulation_steps=accumulation)
    for pair in feasible_space(shape, [g], "auto").feasible:
        assert pair.prompts_per_generation == prompts_per_round(pair.generation_batch_size, pair.num_generations)
        # the screen's and advise's learning signal per step count the same prompts (none without spread lost)
        assert signal_per_step(pair.generation_batch_size, pair.num_generations, 0.0) == pair.prompts_per_generation


@settings(max_examples=60, deadline=None)
@given(g=schedules, rounds_of=st.integers(min_value=1, max_value=4))
def test_the_samplers_rounds_are_the_rule_at_each_phase_and_at_most_the_rule_for_the_schedule(g, rounds_of):
    from grpo_ablate.trainer.scheduled import ScheduledRepeatSampler, ScheduleState

    batch = math.lcm(*g.phases) * rounds_of  # whole groups of every phase
    state = ScheduleState(g, max_steps=8, rounds=Rounds(1, 1))
    stream = list(ScheduledRepeatSampler(list(range(512)), state, generation_batch_size=batch, repeat_count=1,
                                         seed=0, shuffle=False))
    at, sizes = 0, []
    for phase, _, _ in state.queue:  # each drawn round: batch completions, each prompt repeated G times
        drawn = stream[at:at + batch]
        at += batch
        sizes.append(len(set(drawn)))
        assert sizes[-1] == prompts_per_round(batch, g.phases[phase])
    assert max(sizes) <= prompts_per_round(batch, g)
    assert min(g.phases) not in [g.phases[p] for p, _, _ in state.queue] or max(sizes) == prompts_per_round(batch, g)


@pytest.mark.parametrize("g", [4, Schedule((2, 8), (Switch("progress", 50.0),)), Dynamic(4), PerPrompt(4, 2, 8)])
def test_the_probe_refuses_a_training_set_one_prompt_short_of_a_round_by_the_rule(tmp_path, g):
    """The probe turns the point down before starting a trial, naming the count the trial would need."""
    from grpo_ablate.preflight.probe import measure_point

    needed = prompts_per_round(32, g)
    study = load_study(TINY, [f"data.num_prompts={needed - 1}"])
    point = measure_point(study, g, 32, tmp_path / "point", steps=1)
    assert not point.fits and point.reason == (
        f"the training set has {needed - 1} prompt(s); a generation round at this batch needs {needed}")
    assert not (tmp_path / "point").exists()  # refused before anything started
