"""G schedules as values of num_generations: syntax, identity, feasibility per phase, validate and plan.

Fast: no training. The real runs are in tests/test_schedule_e2e.py.
"""

from __future__ import annotations


import json

import pytest

from grpo_ablate.config import StudyError, load_study
from grpo_ablate.config.hardware import read_generations
from grpo_ablate.plan.cells import study_plan
from grpo_ablate.study.ledger import cell_params
from grpo_ablate.core.space import BatchShape, Rounds, check_pair, feasible_space
from grpo_ablate.core.schedule import generations_data, parse_generations
from grpo_ablate.core.vocab import Arm, Cell, Schedule
from helpers import ROOT

TINY = str(ROOT / "studies/tiny-cpu.yaml")


def test_syntax_label_and_round_trip():
    s = parse_generations("4->8@40%")
    assert isinstance(s, Schedule) and s.phases == (4, 8) and s.label == "4→8@40%" and str(s) == "4→8@40%"
    assert parse_generations("4 → 8 @ 40%") == s == parse_generations(s.label)
    sig = parse_generations("2->8@zero_std<0.3")
    assert sig.switches[0].kind == "signal" and sig.switches[0].window == 5 and sig.label == "2→8@zero_std<0.3"
    assert parse_generations("2->8@zero_std<0.3[3]").label == "2→8@zero_std<0.3[3]"
    three = parse_generations("2->4@30%->8@60%")
    assert three.phases == (2, 4, 8) and three.label == "2→4@30%→8@60%"
    assert parse_generations("8") == 8 and type(parse_generations(8.0)) is int


@pytest.mark.parametrize("text, words", [
    ("4->8", "needs a condition"), ("4->8@140%", "increase within"), ("2->4@60%->8@30%", "increase within"),
    ("2->8@loss<1", "unknown condition"), ("x->8@40%", "first phase"), ("2->8@zero_std<1.5", "threshold"),
])
def test_bad_schedules_say_why(text, words):
    with pytest.raises(ValueError, match=words):
        parse_generations(text)


def test_plain_int_arms_keep_their_keys_and_schedules_get_their_own():
    plain = Arm(8, 64, 0.9)
    assert plain.key == "G8xB64|T0.9" and plain.label == "G=8, batch 64, T=0.9"  # stored studies still match
    assert Cell(plain, 3).slug == "G8-B64-T0.9-s3" and plain.as_dict()["num_generations"] == 8
    arm = Arm(parse_generations("4->8@40%"), 64, 0.9)
    assert arm.key == "G4→8@40%xB64|T0.9" and arm.label == "G=4→8@40%, batch 64, T=0.9"
    assert Arm.from_mapping(arm.as_dict()) == arm
    assert arm.as_dict()["num_generations"] == generations_data(arm.num_generations)  # JSON-safe numbers, no label to parse
    assert arm.as_dict()["num_generations"]["phases"] == [4, 8]
    assert Cell(arm, 1).slug == "G4to8at40pct-B64-T0.9-s1"
    assert Cell.from_attrs(Cell(arm, 1, "x").as_attrs()) == Cell(arm, 1, "x")
    assert arm != Arm(8, 64, 0.9) and hash(arm) != hash(Arm(8, 64, 0.9))
    # sorted after the fixed G of its first phase, before the next G
    assert sorted([Arm(8, 64, 0.9), arm, Arm(4, 64, 0.9)]) == [Arm(4, 64, 0.9), arm, Arm(8, 64, 0.9)]


def test_every_phase_is_checked_with_the_arms_batch():
    shape = BatchShape(world_size=1, per_device_train_batch_size=8)
    assert check_pair(shape, parse_generations("2->8@40%")) is None
    reason = check_pair(shape, parse_generations("2->3@40%"))
    assert reason is not None and reason.startswith("phase 2 of 2→3@40% (G=3)") and "not divisible by num_generations 3" in reason
    gens, unreadable = read_generations([2, "2->8@40%", "2->3@40%", "2->8@nope"])  # the loader reads the labels
    space = feasible_space(shape, gens, unreadable=unreadable)
    assert [str(p.num_generations) for p in space.feasible] == ["2", "2→8@40%"]
    rejected = {str(r.num_generations): r.reason for r in space.rejected}
    assert "phase 2" in rejected["2→3@40%"] and "unknown condition" in rejected["2->8@nope"]


def test_validate_rejects_an_infeasible_phase_with_the_reason():
    with pytest.raises(StudyError) as err:
        load_study(TINY, ['num_generations=[2, 8, "2->8@40%", "2->6@50%"]'])
    text = str(err.value)
    assert "search.num_generations.3" in text and "schedule 2→6@50% is not feasible" in text
    assert "phase 2 of 2→6@50% (G=6)" in text and "32 is not divisible by num_generations 6" in text
    assert "2→8@40%" not in text.replace("2→6", "")


def test_progress_schedule_needs_a_step_budget():
    with pytest.raises(StudyError, match="switches by progress, which needs a step budget"):
        load_study(TINY, ['num_generations=[2, 8, "2->8@40%"]', "budget={tokens: 100000}"])
    load_study(TINY, ['num_generations=[2, 8, "2->8@zero_std<0.3"]', "budget={tokens: 100000}"])  # a signal needs none


def test_ablation_plan_has_the_schedule_as_one_arm_with_its_label():
    study = load_study(TINY, ['num_generations=[2, 8, "2->8@40%", "2->8@zero_std<0.3"]', "study.seeds=[0]", "temperature=1.0"])
    cells = study_plan(study)
    roles = [c.role for c in cells]
    assert roles == ["baseline", "num_generations=2", "num_generations=2→8@40%", "num_generations=2→8@zero_std<0.3"]
    sched = cells[2]
    assert cell_params(study, sched.arm)[0] == {"num_generations": "2→8@40%"}
    assert sched.arm.generation_batch_size == cells[0].arm.generation_batch_size  # same batch: equal completions
    assert cells[0].arm.num_generations == 8  # the baseline stays a fixed G


def test_build_spec_hands_the_schedule_object_to_the_trainer(tmp_path):
    """G travels as a value: the plan holds the schedule object, spec.json its numbers, never a label to parse."""
    from grpo_ablate.study.trial_spec import build_spec
    from grpo_ablate.trainer.build import build_config_kwargs
    from grpo_ablate.contract.spec import TrialSpec

    study = load_study(TINY, ['num_generations=[2, 8, "2->8@40%"]', "study.seeds=[0]"])
    cell = study_plan(study)[2]
    spec = build_spec(study, cell, tmp_path)
    assert isinstance(spec.num_generations, Schedule) and spec.num_generations == cell.arm.num_generations
    assert "num_generations" not in spec.trainer and spec.params["num_generations"]["label"] == "2→8@40%"  # the record's data
    again = TrialSpec.load(spec.save())
    assert again == spec and again.num_generations.phases == (2, 8)
    saved = json.loads((tmp_path / "spec.json").read_text())["num_generations"]
    assert saved["phases"] == [2, 8] and saved["switches"][0]["kind"] == "progress"
    assert build_config_kwargs(spec, world_size=1, reward_weights=[1.0])["num_generations"] == 2  # the first phase


def test_sampler_with_one_g_is_trls_repeat_sampler():
    """Same seed, same G in every phase: the very index stream of the fixed-G run."""
    from trl.trainer.utils import RepeatSampler

    from grpo_ablate.trainer.scheduled import ScheduledRepeatSampler, ScheduleState

    data = list(range(50))
    state = ScheduleState(parse_generations("4->4@50%"), max_steps=10, rounds=Rounds(2, 1))
    ours = list(ScheduledRepeatSampler(data, state, generation_batch_size=16, repeat_count=2, seed=7))
    theirs = list(RepeatSampler(data, mini_repeat_count=4, batch_size=4, repeat_count=2, seed=7))
    assert ours == theirs
    assert [p for p, _, _ in state.queue] == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1][:len(state.queue)]


def test_progress_switch_lands_on_the_round_that_starts_after_the_boundary():
    from grpo_ablate.trainer.scheduled import ScheduledRepeatSampler, ScheduleState

    state = ScheduleState(parse_generations("2->8@40%"), max_steps=10, rounds=Rounds(1, 1))
    stream = list(ScheduledRepeatSampler(list(range(200)), state, generation_batch_size=8, repeat_count=1, seed=0))
    firsts = [(first, phase) for phase, first, _ in state.queue]
    assert firsts[:6] == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 1), (6, 1)]  # 40% of 10 = steps 1-4 at G=2
    # G=2 rounds hold 4 prompts twice each, G=8 rounds one prompt eight times
    assert stream[:8][::2] == stream[:8][1::2] and len(set(stream[32:40])) == 1


def test_a_round_spanning_several_steps_switches_at_the_first_round_after_the_boundary():
    """steps_per_generation 4, accumulation 2: a round trains two optimizer steps, so 50% of 10 lands on step 7."""
    from grpo_ablate.trainer.scheduled import ScheduleState

    state = ScheduleState(parse_generations("2->8@50%"), max_steps=10, rounds=Rounds(4, 2))
    drawn = [state.draw() for _ in range(5)]
    assert drawn == [2, 2, 2, 8, 8]
    assert [first for _, first, _ in state.queue] == [1, 3, 5, 7, 9]


def test_phase_changes_are_read_from_the_groups_sizes():
    """The report marks a schedule's phase changes where its groups' size changed."""
    from types import SimpleNamespace

    import pandas as pd

    from grpo_ablate.report.curves import _phase_changes

    groups = pd.DataFrame([{"trial": t, "step": s, "group_size": 2 if s < 4 else 8} for t in (0, 1) for s in range(1, 7)
                           for _ in range(2)])
    xs = pd.Series([100.0 * s for s in range(1, 7)], index=range(1, 7))
    assert _phase_changes(SimpleNamespace(groups=groups), 1, xs) == [(4, 400.0, 8)]
    assert _phase_changes(SimpleNamespace(groups=groups[groups["step"] < 4]), 1, xs) == []
    assert _phase_changes(SimpleNamespace(groups=pd.DataFrame()), 1, xs) == []
