"""Derive, don't copy: one completions figure, one default-arm rule, TRL's defaults from GRPOConfig."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grpo_ablate.config import load_study
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.plan.draft import InitAnswers, choose_generations
from grpo_ablate.plan.cells import baseline_arm, completions_per_trial, default_temperature, study_plan
from grpo_ablate.commands.plan_words import plan_json
from grpo_ablate.study.search.fidelity import CHECKPOINTS, quantum
from grpo_ablate.core.space import BatchShape, default_pair, feasible_space, generated_completions, nearest_generations, optimizer_steps

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "studies/tiny-cpu.yaml")


# ---------------------------------------------------------------- one completions figure

@pytest.mark.parametrize("budget", ["budget.max_steps=50", "budget={completions: 1600}"])
def test_num_iterations_two_gives_one_completions_figure_everywhere(budget, tmp_path):
    from grpo_ablate.study.trial_spec import build_spec

    study = load_study(TINY, ["trainer.num_iterations=2", budget])
    # 32 completions per micro-step, each trained on twice: an optimizer step generates 16 new ones
    assert study.space.shape.generated_per_step == 16
    expected = 800 if "max_steps" in budget else 1600
    assert completions_per_trial(study) == expected  # pruning's checkpoints divide this figure
    assert plan_json(study)["trial_cost"]["completions"] == expected
    assert quantum(32, completions_per_trial(study)) * CHECKPOINTS >= expected
    spec = build_spec(study, study_plan(study)[0], tmp_path)  # the trial plan's own figures
    assert spec.max_steps is not None and spec.max_steps * spec.generated_per_step == expected == spec.completions
    assert spec.eval_budget.total == expected and spec.rounds.num_iterations == 2


def test_a_completions_budget_alone_gives_checkpoints():
    study = load_study(TINY, ["budget={completions: 960}"])
    assert completions_per_trial(study) == 960  # it returned None before: pruning had no checkpoints
    assert quantum(32, 960) == 96


def test_steps_and_completions_round_trip_on_the_shape():
    shape = BatchShape(world_size=2, per_device_train_batch_size=8, gradient_accumulation_steps=4, num_iterations=3)
    assert optimizer_steps(shape, completions=1000) == 47  # ceil(1000 / (64 / 3))
    assert optimizer_steps(shape, max_steps=10, completions=1000) == 10
    assert generated_completions(shape, max_steps=3) == 64  # 3 x 64/3, no float dust
    assert optimizer_steps(shape) is None and generated_completions(shape) is None


# ---------------------------------------------------------------- one default arm

def test_default_temperature_ignores_the_written_order():
    study = load_study(TINY, ["study.baseline={}"])  # search.temperature: [1.0, 0.3]
    assert baseline_arm(study).temperature == 1.0
    reordered = load_study(TINY, ["study.baseline={}", "temperature=[0.3, 1.0]"])
    assert baseline_arm(reordered).temperature == 1.0
    assert default_temperature([0.8, 1.2], 1.0) == 0.8  # a tie goes to the lower
    assert default_temperature(None, 0.7) == 0.7


def test_default_temperature_in_a_range_is_the_anchor_clipped():
    from grpo_ablate.config import FloatRange

    assert default_temperature(FloatRange(low=0.2, high=0.6), 1.0) == 0.6
    assert default_temperature(FloatRange(low=0.5, high=1.5), 1.0) == 1.0


def test_nearest_g_is_by_ratio_ties_to_the_smaller():
    assert nearest_generations([2, 4, 16], 8) == 4  # 4 and 16 are equally far from 8 by ratio
    assert nearest_generations([2, 12], 8) == 12  # by ratio 12 is nearer than 2 (difference would say so too)
    assert nearest_generations([6, 12], 8) == 6  # 8/6 < 12/8
    assert nearest_generations([8, 16], 8) == 8


def test_default_batch_is_trls_default_else_nearest_ties_to_larger():
    shape = BatchShape(world_size=1, per_device_train_batch_size=16)  # TRL's default batch: 16
    space = feasible_space(shape, [4, 8], [16, 32, 64])
    assert default_pair(space, 8).generation_batch_size == 16
    assert default_pair(space, 8, 64).generation_batch_size == 64  # asked for and feasible
    odd = feasible_space(BatchShape(world_size=1, per_device_train_batch_size=4), [6], [12, 24])
    assert odd.shape.default_generation_batch_size == 4
    assert default_pair(odd, 6).generation_batch_size == 12  # nearest to 4 by ratio
    tie = feasible_space(BatchShape(world_size=1, per_device_train_batch_size=16), [8], [8, 32])
    assert default_pair(tie, 8).generation_batch_size == 32  # 8 and 32 are as far from 16: the larger


def test_run_one_plan_and_init_share_the_rule():
    from grpo_ablate.commands.run_one import _pick_params

    study = load_study(TINY, ["study.baseline={}", "num_generations=[2, 4, 16]"])
    base = baseline_arm(study)
    assert (base.num_generations, base.temperature) == (4, 1.0)
    assert study_plan(study)[0].arm == base
    assert _pick_params(study, {}).arm == base  # run-one took the first temperature and smallest G before
    assert _pick_params(study, {"temperature": 0.3}).arm.temperature == 0.3
    answers = InitAnswers(task="addition", recipe_values={"num_generations": 8, "per_device_train_batch_size": 16})
    base_g, _ = choose_generations(answers)
    assert base_g == nearest_generations(feasible_space(BatchShape(1, 16), [2, 4, 8, 16]).generations, 8) == 8


# ---------------------------------------------------------------- TRL's defaults

def test_trl_defaults_are_read_from_grpo_config():
    from trl import GRPOConfig

    fields = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for key in ("num_generations", "temperature", "per_device_train_batch_size", "gradient_accumulation_steps",
                "num_iterations", "max_completion_length", "per_device_eval_batch_size"):
        assert trl_default(key) == fields[key], key
    shape = BatchShape(world_size=1, per_device_train_batch_size=1)
    assert shape.per_device_eval_batch_size == fields["per_device_eval_batch_size"]  # the pure core's one default
    assert shape.num_iterations == fields["num_iterations"]


def test_no_trl_default_typed_as_a_literal_in_the_package():
    """The defaults' values next to their names, e.g. `get("num_generations", 8)`, are not in the package."""
    import re

    pattern = re.compile(r"""["'](num_generations|temperature|per_device_train_batch_size|gradient_accumulation_steps|"""
                         r"""num_iterations|max_completion_length)["']\)?\s*(,|or)\s*(8|1|1\.0|512)\b""")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "grpo_ablate").rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


def test_a_probe_point_is_the_cells_batch_for_exactly_its_steps(tmp_path):
    """The probe's trial comes from the one plan builder: its batch and steps, the rounds that follow from them."""
    from grpo_ablate.study.trial_spec import build_spec
    from grpo_ablate.core.vocab import Arm, Cell

    study = load_study(TINY, ["budget={completions: 1600}"])
    spec = build_spec(study, Cell(Arm(2, 64, 1.0), 0, "probe"), tmp_path, probe_steps=3)
    assert spec.trainer["generation_batch_size"] == 64 and "steps_per_generation" not in spec.trainer
    assert spec.max_steps == 3 and spec.budget.completions is None and spec.completions == 96
    assert spec.rounds.steps_per_generation == 2 and spec.rounds.generating_steps(3) == 2  # 64 / 32 per micro-step
