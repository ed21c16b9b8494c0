"""validate checks trainer values against GRPOConfig's field types as TRL's parser casts them, and refuses an
eval_* objective without an evaluation section (issue 41 item 5): both used to pass and fail every trial."""

from __future__ import annotations

import pytest

from grpo_ablate.config import StudyError, load_study
from grpo_ablate.config.trainer_fields import cast_like_trl, field_type
from helpers import write_study as write

STUDY = """
study: {{name: t, seeds: [0]{objectives}}}
model: {{name_or_path: builtin:tiny}}
data: {{task: addition}}
search: {{num_generations: [2, 4]}}
budget: {{max_steps: 5}}
{extra}
"""


def _problems(tmp_path, extra: str = "", objectives: str = "") -> list[str]:
    path = write(tmp_path, STUDY.format(extra=extra, objectives=objectives))
    with pytest.raises(StudyError) as e:
        load_study(path)
    return [str(p) for p in e.value.problems]


def test_a_yaml_11_exponent_is_refused_with_what_trl_would_read(tmp_path):
    problems = _problems(tmp_path, "trainer: {learning_rate: 2e-4, bf16: 'no', max_grad_norm: big}")
    lr = next(p for p in problems if "trainer.learning_rate" in p)
    assert "is the text '2e-4'" in lr and "learning_rate: float" in lr and "0.0002" in lr and "2.0e-4" in lr
    assert any("trainer.bf16" in p and "false" in p for p in problems)
    assert any("trainer.max_grad_norm" in p and "expected float, got the text 'big'" in p for p in problems)


def test_values_of_the_right_type_pass(tmp_path):
    path = write(tmp_path, STUDY.format(objectives="", extra="trainer: {learning_rate: 2.0e-4, max_grad_norm: 1, "
                                                              "bf16: false, lr_scheduler_type: cosine}"))
    assert load_study(path).trainer["learning_rate"] == 2.0e-4


def test_the_cast_is_argparses():
    assert cast_like_trl("learning_rate", "2e-4") == 0.0002 and cast_like_trl("bf16", "yes") is True
    assert cast_like_trl("num_iterations", "3") == 3 and cast_like_trl("learning_rate", 1) == 1
    with pytest.raises(ValueError):
        cast_like_trl("num_iterations", 1.5)
    assert field_type("learning_rate") == (float, False) and field_type("model_init_kwargs") is None


def test_a_recipe_value_is_read_as_trls_parser_reads_it(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("model_name_or_path: Qwen/Qwen2-0.5B\ndataset_name: some/data\nlearning_rate: 3e-6\n")
    study = tmp_path / "s.yaml"
    study.write_text(f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'o'}, seeds: [0]}}\n"
                     f"trainer_from: {recipe}\nsearch: {{num_generations: [8, 16]}}\nrecipe_trl: '0.18'\n")
    loaded = load_study(study)
    assert loaded.trainer["learning_rate"] == 3e-6
    assert any("learning_rate: '3e-6' read as 3e-06" in w for w in loaded.warnings)


def test_an_eval_objective_needs_an_evaluation_section(tmp_path):
    problems = _problems(tmp_path, objectives=", objectives: [{metric: eval_final_reward}]")
    assert any("study.objectives[0].metric" in p and "no evaluation section" in p for p in problems)
    ok = write(tmp_path, STUDY.format(objectives=", objectives: [{metric: eval_final_reward}]",
                                      extra="evaluation: {num_prompts: 16}"))
    assert load_study(ok).study.objectives[0].metric == "eval_final_reward"
