"""The study file's `evaluation:` section: its checks, the default objective it brings, the study attr."""

from __future__ import annotations


import pytest

from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.records import trial_record as record
from helpers import ROOT

TINY = str(ROOT / "studies" / "tiny-cpu.yaml")


def test_evaluation_makes_the_held_out_reward_the_default_objective():
    study = load_study(TINY)
    assert study.file.evaluation is not None and study.metric_names == ["eval_final_reward"]
    assert study.directions == ["maximize"]
    # an explicit objective is kept as written
    kept = load_study(TINY, ["study.objectives=[{metric: reward_per_million_tokens}]"])
    assert kept.metric_names == ["reward_per_million_tokens"]
    # without evaluation the old default stays
    assert load_study(TINY, ["evaluation=null"]).metric_names == ["reward_per_hour"]


@pytest.mark.parametrize("override, path, words", [
    ("evaluation.samples_per_prompt=4", "evaluation.samples_per_prompt", "identical samples"),
    ("evaluation.split=test", "evaluation", "own held-out prompts"),
    ("evaluation.temperature=-1", "evaluation.temperature", "greater than or equal to 0"),
    ("evaluation.target_fraction=0", "evaluation.target_fraction", "greater than 0"),
])
def test_evaluation_problems_name_their_key(override, path, words):
    with pytest.raises(StudyError) as err:
        load_study(TINY, [override])
    text = str(err.value)
    assert path in text and words in text, text


def test_describe_study_stores_the_resolved_evaluation():
    import optuna

    from grpo_ablate.study.setup import describe_study

    study = load_study(TINY)
    ostudy = optuna.create_study(directions=study.directions)
    describe_study(ostudy, study, baseline_arm(study))
    ev = record.study_attrs(ostudy).evaluation
    assert ev["num_prompts"] == 256 and ev["temperature"] == 0 and ev["points"] == 4
    assert ev["max_completion_length"] == 6  # resolved from the trainer section
    assert ev["target"] is None and ev["target_fraction"] == 0.5
