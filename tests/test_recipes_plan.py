"""`plan` estimates each trial's generated tokens, and its wall time from trials already in the study's storage."""

from __future__ import annotations

from grpo_ablate.config import load_study
from grpo_ablate.planview import plan_json, plan_text, trial_cost
from grpo_ablate.study.setup import open_study


def test_tokens_and_wall_time_from_a_previous_study(tmp_path):
    sets = [f"study.output_dir={tmp_path / 'out'}", "budget.max_steps=10"]
    study = load_study("studies/tiny-cpu.yaml", sets)
    cost = trial_cost(study)
    assert cost["completions"] == 10 * 32 and cost["max_tokens"] == 10 * 32 * 6  # max_completion_length 6
    assert "no estimate yet" in plan_text(study)

    previous = load_study("studies/tiny-cpu.yaml", [*sets, "study.name=earlier"])
    ostudy, _ = open_study(previous)
    for rate in (20.0, 40.0, 80.0):  # completions per second of three finished trials
        trial = ostudy.ask()
        trial.set_user_attr("samples_per_second", rate)
        ostudy.tell(trial, 1.0)
    cost = trial_cost(study)
    assert cost["seconds_per_completion"] == 1 / 40.0 and cost["seconds"] == 320 / 40.0
    text = plan_text(study)
    assert "Wall time: about 8 s per trial" in text and "from 3 finished trial(s) of earlier in" in text
    assert plan_json(study)["trial_cost"]["seconds"] == 8.0
