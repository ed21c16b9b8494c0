"""`validate` fails on the laptop what would fail at a trial's start: the dataset's columns and the rewards.

    pytest tests/test_config_inputs.py
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers import ROOT, run_cli
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.trainer.rewards import RewardContext, build_reward

REWARDS = '''\
from typing import Any


def boxed_answer(prompts, completions, completion_ids=None, *, answer, **kwargs: Any):
    return [float(str(a) in c) for c, a in zip(completions, answer)]


def needs_solution(prompts, completions, solution, **kwargs):
    return [0.0 for _ in completions]


def no_kwargs(prompts, completions, completion_ids):
    return [0.0 for _ in completions]
'''


def _study(folder: Path, rewards: str, prompt_column: str = "prompt", dataset: str = "data.jsonl") -> Path:
    path = folder / "study.yaml"
    path.write_text(textwrap.dedent(f"""\
        study: {{name: inputs, output_dir: {folder / 'run'}}}
        model: {{name_or_path: Qwen/Qwen2-0.5B}}
        data: {{dataset: {dataset}, prompt_column: {prompt_column}}}
        rewards: {rewards}
        search: {{num_generations: [2, 4]}}
        trainer: {{per_device_train_batch_size: 8}}
        budget: {{max_steps: 5}}
        """))
    return path


@pytest.fixture
def project(tmp_path):
    """A study folder with its dataset and its reward module beside the study file."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "data.jsonl").write_text("".join(json.dumps({"question": f"{i}*3=", "answer": str(3 * i)}) + "\n"
                                               for i in range(20)))
    (folder / "my_rewards.py").write_text(REWARDS)
    return folder


def test_missing_prompt_column_and_typod_reward_fail_validate(project):
    path = _study(project, "[{name: 'my_rewards:boxed_answr'}]")  # prompt column left at its default
    res = run_cli("validate", str(path), cwd=ROOT, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "data.prompt_column: column 'prompt' is not in" in res.stderr and "['question', 'answer']" in res.stderr
    assert "rewards.0: module 'my_rewards'" in res.stderr and "has no function 'boxed_answr'" in res.stderr
    assert "did you mean 'boxed_answer'" in res.stderr


def test_rewards_are_bound_to_the_call_trl_makes_with_the_datasets_columns(project):
    assert load_study(_study(project, "[{name: 'my_rewards:boxed_answer'}]", prompt_column="question"))
    with pytest.raises(StudyError) as e:
        load_study(_study(project, "['my_rewards:needs_solution', 'my_rewards:no_kwargs', accuracy]",
                          prompt_column="question"))
    text = str(e.value)
    assert "rewards.0: needs_solution" in text and "missing a required argument: 'solution'" in text
    assert "rewards.1: no_kwargs" in text and "got an unexpected keyword argument" in text
    assert "rewards.2" not in text  # the built-in accuracy reads `answer`, which is there
    (project / "other.jsonl").write_text(json.dumps({"question": "1+1=", "gold": "2"}) + "\n")
    with pytest.raises(StudyError) as e:
        load_study(_study(project, "[accuracy]", prompt_column="question", dataset="other.jsonl"))
    assert "rewards.0: the built-in reward 'accuracy' reads the column 'solution' or 'answer'" in str(e.value)


def test_reward_module_resolves_from_the_study_files_folder(project, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # a module of the same name where the command runs: the one beside the study file wins
    (elsewhere / "my_rewards.py").write_text("def boxed_answer(**kw):\n    raise RuntimeError('wrong module')\n")
    monkeypatch.chdir(elsewhere)
    study = load_study(_study(project, "[{name: 'my_rewards:boxed_answer'}]", prompt_column="question"))
    (spec,) = study.rewards
    assert spec.name == f"{project.resolve()}/my_rewards:boxed_answer"
    # the trial side imports it from there too, and logs it under the function's name
    name, func = build_reward(spec.name, RewardContext())
    assert name == "boxed_answer"
    assert func(prompts=["2*3="], completions=["6"], completion_ids=[[1]], answer=["6"], trainer_state=None) == [1.0]


def test_what_cannot_be_checked_here_is_said_plainly_and_the_study_still_plans(tmp_path):
    recipe = tmp_path / "config_demo.yaml"
    recipe.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\ndataset_name: open-r1/verifiable-coding\n"
                      "reward_funcs: [code]\n")
    study = tmp_path / "study.yaml"
    study.write_text(f"study: {{name: r1, output_dir: {tmp_path / 'run'}}}\ntrainer_from: {recipe.name}\n"
                     "search: {num_generations: [2, 4]}\nbudget: {max_steps: 5}\n")
    res = run_cli("plan", str(study), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "open_r1 is not installed here, so it cannot be checked on this machine" in res.stdout + res.stderr
    assert "'open-r1/verifiable-coding' is a hub dataset" in res.stdout + res.stderr
    assert "cannot be checked here" in res.stdout + res.stderr
