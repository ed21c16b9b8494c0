"""Published recipes as they are: an Open R1-style and a `trl grpo`-style recipe plan unedited, with notes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers import ROOT, cli_inprocess
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.config.recipes import RecipeNote

OPENR1 = ROOT / "studies/recipes/openr1-style-study.yaml"
TRLCLI = ROOT / "studies/recipes/trl-cli-style-study.yaml"

OPEN_R1_ACCURACY = "grpo_ablate.trainer.rewards:open_r1_accuracy_reward"  # scores as Open R1's (test_openr1_rewards)


def _line(recipe: Path, key: str) -> int:
    return next(i for i, text in enumerate(recipe.read_text().splitlines(), 1) if text.startswith(f"{key}:"))


def test_openr1_recipe_plans_unedited_and_prints_the_notes():
    res = cli_inprocess("plan", str(OPENR1))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    recipe = ROOT / "studies/recipes/openr1-style-every-key.yaml"
    name = recipe.name
    for key, says in [("max_prompt_length", "data.max_prompt_tokens"), ("warmup_ratio", "warmup_steps"),
                      ("overwrite_output_dir", "dropped"), ("vllm_device", "dropped"),
                      ("max_steps", "budget decides"), ("num_train_epochs", "budget decides"),
                      ("push_to_hub", "hub"), ("save_strategy", "saving"), ("report_to", "stays on in every trial"),
                      ("eval_strategy", "evaluation"), ("num_processes", "hardware section")]:
        note = f"{name}:{_line(recipe, key)}: {key}"  # a "note:", or "differs:" when it changes what trains
        assert f"note: {note}" in out or f"differs: {note}" in out, f"missing {note!r}"
        assert says in out.split(note, 1)[1].splitlines()[0]
    (ignored,) = [line for line in out.splitlines() if "ignored" in line]
    for key in ("callbacks", "benchmarks", "wandb_entity", "wandb_project", "hub_model_revision", "code_language",
                "code_eval_test_batch_size", "dataset_test_split"):
        assert f"{key} (line {_line(recipe, key)})" in ignored
    assert "7 training process(es) = hardware.gpus 8 - vllm.server_gpus 1" in out
    assert "overrides num_processes: 8 in zero2-8gpu.yaml" in out
    assert "steps/gen: micro-steps" in out
    assert "at most 91,750,400 generated tokens" in out  # 50 steps x 7 x 16 x 16 completions x 1024 tokens


def test_openr1_recipe_keys_land_in_the_study_sections():
    study = load_study(OPENR1)
    assert study.model.name_or_path == "Qwen/Qwen2.5-1.5B-Instruct" and study.model.dtype == "bfloat16"
    # the recipe's flash_attention_2 becomes auto (flash attention where flash_attn imports, else sdpa: issue 19)
    assert study.model.attn_implementation == "auto" and study.model.revision == "main"
    assert any("attn_implementation flash_attention_2 -> auto" in w for w in study.warnings)
    data = study.data
    assert (data.dataset, data.config_name, data.split, data.prompt_column) == (
        "AI-MO/NuminaMath-TIR", "default", "train", "problem")
    assert data.max_prompt_tokens == 512 and data.system_prompt.startswith("You are")
    assert isinstance(data.chat_template, str) and "add_generation_prompt" in data.chat_template
    assert [(r.name, r.weight) for r in study.rewards] == [(OPEN_R1_ACCURACY, 1.0), ("format", 1.0), ("tag_count", 0.5)]
    t = study.trainer
    assert t["warmup_steps"] == pytest.approx(0.1) and "warmup_ratio" not in t
    for gone in ("max_steps", "num_train_epochs", "output_dir", "push_to_hub", "save_strategy",
                 "callbacks", "vllm_device", "num_generations", "temperature", "do_eval", "eval_strategy"):
        assert gone not in t
    assert t["report_to"] == ["wandb"]  # the recipe's tracker stays on (study.trackers: [] turns it off)
    assert t["gradient_accumulation_steps"] == 16 and t["log_completions"] is True
    assert study.world_size == 7 and study.budget.max_steps == 50
    # besides the recipe's notes, only what validate could not check here: the hub dataset's columns
    # (and, on a machine without a GPU, what a CPU run changes in the recipe's ZeRO/bf16 settings)
    others = [w for w in study.warnings if not isinstance(w, RecipeNote) and not str(w).startswith("no GPU here")
              and not str(w).startswith("trainer.report_to: wandb is not installed")]  # where it is not, it is said
    assert len(others) == 1 and "AI-MO/NuminaMath-TIR' is a hub dataset" in others[0] and "cannot be checked here" in others[0]


def test_trl_cli_recipe_plans_unedited_and_prints_the_notes():
    res = cli_inprocess("plan", str(TRLCLI))
    assert res.returncode == 0, res.stderr
    assert "reward 'think_format_reward' resolves to trl.rewards:think_format_reward" in res.stdout
    assert "warmup_ratio removed in transformers 5" in res.stdout
    study = load_study(TRLCLI)
    assert [r.name for r in study.rewards] == ["trl.rewards:think_format_reward", "trl.rewards:accuracy_reward"]
    assert study.model.dtype == "bfloat16" and study.data.dataset == "trl-lib/DeepMath-103K"
    assert study.trainer["warmup_steps"] == pytest.approx(0.05) and study.trainer["beta"] == 0.0


def _study(tmp_path: Path, recipe: str, trainer: str = "") -> Path:
    (tmp_path / "recipe.yaml").write_text(textwrap.dedent(recipe))
    study = tmp_path / "study.yaml"
    study.write_text(textwrap.dedent("""\
        study: {name: t}
        trainer_from: recipe.yaml
        search: {num_generations: [2, 4]}
        budget: {max_steps: 3}
        """) + trainer)
    return study


def test_the_study_trainer_section_stays_strict_and_recipe_errors_name_file_and_line(tmp_path):
    path = _study(tmp_path, """\
        model_name_or_path: Qwen/Qwen2-0.5B
        dataset_name: some/data
        per_device_train_batch_sise: 4
        """, trainer="trainer:\n  learning_rat: 1.0e-5\n  max_prompt_length: 10\n")
    with pytest.raises(StudyError) as e:
        load_study(path)
    text = str(e.value)
    assert f"trainer_from {tmp_path / 'recipe.yaml'}:3: per_device_train_batch_sise: not a GRPOConfig field" in text
    assert "did you mean 'per_device_train_batch_size'" in text
    assert "trainer.learning_rat: not a GRPOConfig field" in text
    assert "trainer.max_prompt_length" in text  # the study's own section is not translated


def test_budget_wins_over_recipe_run_length(tmp_path):
    path = _study(tmp_path, "model_name_or_path: Qwen/Qwen2-0.5B\ndataset_name: some/data\nmax_steps: 500\n")
    study = load_study(path)
    assert study.budget.max_steps == 3 and "max_steps" not in study.trainer
    assert any("max_steps: 500 overridden" in w for w in study.warnings)


def test_open_r1_reward_without_its_package_still_plans_and_says_it_was_not_checked(tmp_path):
    # a study for a cluster is planned on a laptop without open_r1: a note, not an error
    path = _study(tmp_path, "model_name_or_path: Qwen/Qwen2-0.5B\ndataset_name: some/data\n"
                            "reward_funcs: [accuracy, code]\n")
    study = load_study(path)
    assert [r.name for r in study.rewards] == [OPEN_R1_ACCURACY, "open_r1.rewards:code_reward"]
    text = "\n".join(str(w) for w in study.warnings)
    assert ("recipe.yaml:3: reward 'code' is Open R1's open_r1.rewards:code_reward(num_parallel=2, provider_type='e2b', "
            "enforce_same_language=False)") in text
    assert f"{OPEN_R1_ACCURACY!r} stands in for Open R1's open_r1.rewards:accuracy_reward" in text
    assert "open_r1 is not installed here, so it cannot be checked on this machine" in text
    assert "needs the open-r1 package" in text


def test_open_r1_reward_resolves_by_name_when_its_package_is_importable(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "open_r1"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rewards.py").write_text("def code_reward(completions, **kwargs):\n    return [0.0 for _ in completions]\n"
                                    "def accuracy_reward(completions, solution, **kwargs):\n    return [0.0 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    path = _study(tmp_path, "model_name_or_path: Qwen/Qwen2-0.5B\ndataset_name: some/data\n"
                            "reward_funcs: [accuracy, code]\nreward_weights: [1.0, 2.0]\n")
    study = load_study(path)
    assert [(r.name, r.weight) for r in study.rewards] == [("open_r1.rewards:accuracy_reward", 1.0),
                                                           ("open_r1.rewards:code_reward", 2.0)]
    assert any("reward 'accuracy' is Open R1's own open_r1.rewards:accuracy_reward" in w for w in study.warnings)


def test_peft_on_is_refused_with_file_and_line(tmp_path):
    path = _study(tmp_path, "model_name_or_path: Qwen/Qwen2-0.5B\ndataset_name: some/data\nuse_peft: true\n")
    with pytest.raises(StudyError) as e:
        load_study(path)
    assert "recipe.yaml:3: use_peft: True is not supported" in str(e.value)
