"""The built-in registries: the code for exactly the vocabulary's names, and the CPU recipe = the study file."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from grpo_ablate.core import vocab
from grpo_ablate.trainer.builtin.model import WARM_STARTED, builtin_model_path
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.trainer.builtin.tasks import TASKS, task_problems
from grpo_ablate.trainer.rewards import REWARD_FACTORIES, RewardContext, build_reward, describe
from helpers import ROOT



def test_code_registries_hold_exactly_the_vocabulary_names():
    assert sorted(TASKS) == sorted(vocab.BUILTIN_TASKS)
    assert sorted(REWARD_FACTORIES) == sorted(vocab.BUILTIN_REWARDS)
    assert sorted(WARM_STARTED) == sorted(vocab.BUILTIN_MODELS)
    assert all(name.startswith(vocab.BUILTIN_MODEL_PREFIX) for name in WARM_STARTED)


@pytest.mark.parametrize("name", sorted(vocab.BUILTIN_TASKS))
def test_every_task_name_builds_as_a_reward_and_scores_its_answers(name):
    logged, func = build_reward(name, RewardContext(task=None))
    assert logged == name
    (prompt, answer), = task_problems(name, 1)
    assert func(prompts=[prompt] * 2, completions=[answer, answer + "0"], answer=[answer] * 2) == [1.0, 0.0]


@pytest.mark.parametrize("name", vocab.reward_names())
def test_every_vocabulary_reward_name_builds(name):
    task = sorted(vocab.BUILTIN_TASKS)[0]
    logged, func = build_reward(name, RewardContext(task=task, max_completion_length=8))
    assert callable(func) and logged in (name, task)


def test_descriptions_come_from_the_vocabulary():
    text = describe()
    for name, doc in {**vocab.BUILTIN_REWARDS, **vocab.BUILTIN_TASKS}.items():
        assert name in text and doc in text
    for name, task in TASKS.items():
        assert task.description == vocab.BUILTIN_TASKS[name]


def test_unknown_builtin_model_names_the_choices():
    with pytest.raises(ValueError, match="builtin:tiny-untrained"):
        builtin_model_path("builtin:huge", "addition")


def test_cpu_recipe_is_the_tiny_cpu_study_trainer_section_key_by_key():
    study = yaml.safe_load((ROOT / "studies" / "tiny-cpu.yaml").read_text())["trainer"]
    assert sorted(TINY_CPU_TRAINER) == sorted(study)
    for key, value in study.items():
        assert TINY_CPU_TRAINER[key] == value and type(TINY_CPU_TRAINER[key]) is type(value), key


def test_task_module_does_not_import_the_reward_registry():
    """One way only: rewards -> builtin.tasks; the task module never needs the registry."""
    code = ("import sys, grpo_ablate.trainer.builtin.tasks, grpo_ablate.trainer.builtin.model; "
            "print('grpo_ablate.trainer.rewards' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
