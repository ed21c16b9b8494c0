"""A study that is to decide: the design's arithmetic (plan/design.py), and the refusals that keep a study from
deciding by accident on too little: trials inside the warmup of the run they stand for, races of under 3 seeds."""

from __future__ import annotations

import math

import pytest

from helpers import ROOT, cli_inprocess, write_study
from grpo_ablate.stats.selection import bechhofer_pcs, bechhofer_seeds
from grpo_ablate.plan.design import (MIN_SEEDS, RACE_CONFIDENCE, SEED_SD_SHARE, Shape, effect_for_seeds, fit,
                                      resolution, seeds_to_decide, trial_bounds)

CODE = ROOT / "tests/fixtures/open-r1/current-qwen2.5-1.5b-instruct-grpo-config_demo_code.yaml"  # 500 steps, warmup 0.03


def test_seeds_and_the_effect_they_resolve_are_bechhofers():
    for k in (2, 3, 4):
        for span, effect in ((1.0, 0.05), (2.0, 0.1), (1.1, 0.0861)):
            assert seeds_to_decide(k, span, effect) == max(MIN_SEEDS, bechhofer_seeds(k, effect, SEED_SD_SHARE * span))
        for n in (3, 4, 9):
            e = effect_for_seeds(k, n, 2.0)  # rounded up to three digits: enough, and 1% less is not
            assert bechhofer_pcs(k, n, e, 0.1) >= RACE_CONFIDENCE > bechhofer_pcs(k, n, e * 0.99, 0.1)
    assert seeds_to_decide(2, 1.0, 0.5) == MIN_SEEDS  # a huge effect still gets the 3 seeds anything is tested from
    words = resolution(3, 4, 2.0).words("0.5x")
    assert words.startswith("at 0.5x your run this study tells apart differences of 0.136 or more in held-out reward "
                            "(6.8% of the range 2)")
    assert resolution(3, 2, 1.0) is None and resolution(1, 5, 1.0) is None  # tests nothing: no resolution stated


def test_fit_buys_seeds_first_then_steps_and_falls_back_to_branching_then_to_the_screen_alone():
    # a toy price: a 0.01x screen, per seed a 0.1x prefix when branched, 3 arms x seeds x steps of a 1000-step run
    def price(s: Shape) -> float:
        if not s.confirm:
            return 0.01
        return 0.01 + s.seeds * ((0.1 if s.start == "branch" else 0.0) + 3 * s.steps / 1000)

    assert trial_bounds("scratch", 1000, 100) == (110, 110) and trial_bounds("branch", 1000, 100) == (10, 100)
    assert trial_bounds("branch", 1000, 0) is None  # no warmup: nothing to branch at
    scratch_only = fit(arms=3, span=1.0, min_effect=None, budget=0.5, full_steps=1000, warmup=100,
                       starts=("scratch",), price=price)
    assert not scratch_only.shape.confirm and scratch_only.wanted == (Shape(3, 110, "scratch"), pytest.approx(1.0))
    auto = fit(arms=3, span=1.0, min_effect=None, budget=0.5, full_steps=1000, warmup=100,
               starts=("scratch", "branch"), price=price)
    assert auto.shape.start == "branch" and auto.shape.seeds == 3 and auto.price <= 0.5 < price(
        Shape(4, 10, "branch"))  # 4 seeds would not fit: the steps take the rest
    assert auto.shape.steps == math.floor((0.49 / 3 - 0.1) * 1000 / 3) and auto.resolved
    assert auto.min_effect == effect_for_seeds(3, 3)  # what 3 seeds resolve, above the default 0.05
    # a min_effect given must be resolved: fewer seeds than it needs never fit, whatever else the budget buys
    strict = fit(arms=3, span=1.0, min_effect=0.05, budget=0.5, full_steps=1000, warmup=100,
                 starts=("scratch", "branch"), price=price)
    assert not strict.shape.confirm and strict.wanted[0].seeds == seeds_to_decide(3, 1.0, 0.05)


def _study(tmp_path, *, steps: int, extra: str = "", seeds: str = "[0, 1, 2]", racing: str = ""):
    return write_study(tmp_path, f"""\
        study: {{name: w, sampler: ablation, output_dir: {tmp_path / 'w'}, seeds: {seeds}{racing}}}
        trainer_from: {CODE}
        hardware: {{gpus: 8, vllm: {{mode: server}}}}
        search: {{num_generations: [7, 14]}}
        budget: {{max_steps: {steps}{extra}}}
        """)


def test_trials_that_end_inside_the_runs_warmup_are_refused_unless_meant(tmp_path):
    res = cli_inprocess("validate", str(_study(tmp_path, steps=15)))  # the 500-step run warms up for 15 steps
    assert res.returncode == 2 and "budget.max_steps: a trial ends at step 15, inside the 15-step learning-rate warmup" in res.stderr
    assert "budget.max_steps 16 or more" in res.stderr and "budget.allow_inside_warmup: true" in res.stderr
    assert cli_inprocess("plan", str(_study(tmp_path, steps=15))).returncode == 2  # every command that loads it
    assert cli_inprocess("validate", str(_study(tmp_path, steps=16))).returncode == 0
    assert cli_inprocess("validate", str(_study(tmp_path, steps=15, extra=", allow_inside_warmup: true"))).returncode == 0
    # branched past the warmup, a trial of any length ends past it
    assert cli_inprocess("validate", str(_study(tmp_path, steps=10, extra=", branch_from: warmup"))).returncode == 0
    # compressed into the trial, the warmup is the trial's own: 3% of 15 steps ends at step 1
    assert cli_inprocess("validate", str(_study(tmp_path, steps=15, extra=", lr_schedule: compressed"))).returncode == 0


def test_a_race_of_fewer_than_three_seeds_is_refused(tmp_path):
    race = ", racing: {design: elimination, first_round_seeds: 2}, min_effect: 0.05"
    res = cli_inprocess("validate", str(_study(tmp_path, steps=20, seeds="[0, 1]", racing=race)))
    assert res.returncode == 2 and "study.seeds" in res.stderr and "fewer than 3 seeds" in res.stderr
    assert cli_inprocess("validate", str(_study(tmp_path, steps=20, seeds="[0, 1, 2]", racing=race))).returncode == 0
    assert cli_inprocess("validate", str(_study(tmp_path, steps=20, seeds="[0, 1]"))).returncode == 0  # measures only


def test_the_arms_span_g_values_that_matter_never_neighbours():
    from grpo_ablate.plan.design import second_temperature, spanning_generations

    seven = [2, 4, 7, 8, 14, 16, 28, 32, 56, 64]  # 448 completions a step over 7 processes
    assert spanning_generations(16, seven) == [16, 8, 32] and spanning_generations(14, seven) == [14, 7, 28]
    assert spanning_generations(2, [2, 4, 8, 16]) == [2, 4, 8]  # nothing below: the next value out above
    assert spanning_generations(8, [2, 4, 8]) == [8, 2, 4]
    assert spanning_generations(16, [14, 16]) == [16]  # 14 is a neighbour: no arm of its own
    assert second_temperature(1.0) == 0.7 and second_temperature(0.7) == 1.0
