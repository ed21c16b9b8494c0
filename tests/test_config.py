"""Study-file validation: every problem at once, each with its key path; clear one-liners for bad files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_ablate.config import StudyError, load_study
from helpers import ROOT, cli_inprocess
from helpers import write_study as write  # the one study writer, under this file's short name

MINIMAL = """
study:
  name: t
model:
  name_or_path: builtin:tiny
data:
  task: {task}
search:
  num_generations: [2, 4]
budget:
  max_steps: 5
"""


@pytest.fixture
def task_name() -> str:
    from grpo_ablate.core.vocab import BUILTIN_TASKS

    return sorted(BUILTIN_TASKS)[0]


def problems_of(path: Path, overrides=None) -> list[str]:
    with pytest.raises(StudyError) as e:
        load_study(path, overrides)
    return [str(p) for p in e.value.problems]


def test_minimal_study_is_valid(tmp_path, task_name):
    study = load_study(write(tmp_path, MINIMAL.format(task=task_name)))
    assert [p.num_generations for p in study.space.feasible] == [2, 4]
    assert study.directions == ["maximize"]
    assert study.output_dir == Path("runs/t")
    assert str(study.storage_url).endswith("study.journal")


@pytest.mark.parametrize("text,expected", [
    (None, "not found"),
    ("", "is empty"),
    ("study: [unclosed\n", "malformed YAML at line"),
    ("- a\n- b\n", "expected a mapping"),
])
def test_bad_files_give_one_clear_line(tmp_path, text, expected):
    path = tmp_path / "s.yaml"
    if text is not None:
        path.write_text(text)
    msgs = problems_of(path)
    assert len(msgs) == 1 and expected in msgs[0]


def test_all_problems_reported_at_once(tmp_path, task_name):
    text = f"""
    study:
      name: t
      samplr: tpe
      objectives:
        - metric: reward_per_huor
    data:
      task: {task_name}
    trainer:
      learning_rat: 1.0e-5
      max_prompt_length: 256
      per_device_train_batch_size: 0
    search:
      num_generations: [2]
      temperature: [0.0, 1.0]
    budget:
      max_steps: 5
    """
    msgs = problems_of(write(tmp_path, text))
    joined = "\n".join(msgs)
    assert "study.samplr: unknown key (did you mean 'sampler'?)" in joined
    assert "trainer.learning_rat" in joined and "learning_rate" in joined
    assert "trainer.max_prompt_length" in joined and "removed from TRL" in joined
    assert "trainer.per_device_train_batch_size: must be a positive integer" in joined


def test_meaning_problems_reported_together(tmp_path, task_name):
    text = f"""
    study:
      name: t
      objectives:
        - metric: reward_per_huor
    data:
      task: {task_name}
    search:
      num_generations: [2]
      temperature: [0.0, 1.0]
    budget:
      max_steps: 5
    """
    joined = "\n".join(problems_of(write(tmp_path, text)))
    assert "search.temperature: must be > 0" in joined
    assert "study.objectives.0.metric: unknown metric 'reward_per_huor' (did you mean 'reward_per_hour'?)" in joined


def test_infeasible_space_names_nearest_values(tmp_path, task_name):
    text = f"""
    study: {{name: t}}
    data: {{task: {task_name}}}
    trainer: {{per_device_train_batch_size: 3, gradient_accumulation_steps: 2}}
    hardware: {{num_processes: 2}}
    search: {{num_generations: [5]}}
    budget: {{max_steps: 5}}
    """
    (msg,) = problems_of(write(tmp_path, text))
    assert msg.startswith("search.num_generations: no (num_generations, generation_batch_size) pair is feasible")
    assert "multiple of 30" in msg and "[4, 6]" in msg


def test_searched_key_in_trainer_conflicts(tmp_path, task_name):
    text = MINIMAL.format(task=task_name) + "trainer:\n  num_generations: 8\n"
    joined = "\n".join(problems_of(write(tmp_path, text)))
    assert "trainer.num_generations: is searched" in joined


def test_pruner_needs_single_objective(tmp_path, task_name):
    text = MINIMAL.format(task=task_name).replace("  name: t\n", "  name: t\n  pruner: median\n  objectives:\n"
                                                  "    - metric: reward_per_hour\n    - metric: stability_variance\n")
    joined = "\n".join(problems_of(write(tmp_path, text)))
    assert "study.pruner: Optuna cannot prune multi-objective studies" in joined


def test_overrides_and_their_errors(tmp_path, task_name):
    path = write(tmp_path, MINIMAL.format(task=task_name))
    study = load_study(path, ["num_generations=[4]", "temperature=0.7", "study.n_trials=3", "learning_rate=1e-4"])
    assert study.generations() == [4] and study.fixed_temperature() == 0.7 and study.study.n_trials == 3
    assert study.trainer["learning_rate"] == 1e-4
    assert "--set: expected key=value" in problems_of(path, ["oops"])[0]


def test_recipe_merges_and_study_keys_win(tmp_path, task_name):
    (tmp_path / "recipe.yaml").write_text("learning_rate: 3.0e-6\nper_device_train_batch_size: 4\nnum_generations: 7\n"
                                          "model_revision: main\nreward_funcs: [format]\n")
    text = MINIMAL.format(task=task_name) + "trainer_from: recipe.yaml\ntrainer:\n  per_device_train_batch_size: 2\n"
    study = load_study(write(tmp_path, text))
    assert study.trainer["learning_rate"] == 3e-6 and study.trainer["per_device_train_batch_size"] == 2
    assert "num_generations" not in study.trainer  # searched: the search decides
    assert study.model.revision == "main" and [r.name for r in study.rewards] == ["format"]


def test_old_recipe_with_max_prompt_length(tmp_path, task_name):
    (tmp_path / "old.yaml").write_text("max_prompt_length: 512\nlearning_rate: 1.0e-6\n")
    text = MINIMAL.format(task=task_name) + "trainer_from: old.yaml\n"
    study = load_study(write(tmp_path, text))  # a published recipe runs unedited (issue 11)
    assert study.data.max_prompt_tokens == 512
    assert any("old.yaml:1: max_prompt_length" in w for w in study.warnings)


# ------------------------------------------------------------------ the CLI


def test_validate_ok_and_invalid(tmp_path):
    ok = cli_inprocess("validate", "studies/tiny-cpu.yaml")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("OK: studies/tiny-cpu.yaml")
    bad = write(tmp_path, "study: {name: t}\ndata: {task: nope}\nbudget: {max_steps: 0}\n")
    res = cli_inprocess("validate", str(bad))
    assert res.returncode == 2
    assert "data.task: unknown built-in task 'nope'" in res.stderr or "budget.max_steps" in res.stderr
    assert not list(tmp_path.glob("runs"))  # nothing written


def test_plan_json_is_one_object_with_feasible_and_rejected(tmp_path):
    res = cli_inprocess("plan", "studies/openr1-1.5b-numina-8gpu.yaml", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert {f["num_generations"] for f in out["feasible"]} == {7, 8, 14, 16}
    g7 = next(f for f in out["feasible"] if f["num_generations"] == 7)
    assert g7 == {"num_generations": 7, "generation_batch_size": 1792, "steps_per_generation": 16,
                  "prompts_per_generation": 256}
    assert {r["num_generations"] for r in out["rejected"]} == {5, 6}
    assert all(set(r) == {"num_generations", "generation_batch_size", "reason"} for r in out["rejected"])


def test_plan_text_explains_hardware():
    res = cli_inprocess("plan", "studies/openr1-1.5b-numina-8gpu.yaml")
    assert res.returncode == 0, res.stderr
    assert "7 training process(es) x 16 per device = 112" in res.stdout
    assert "Rejected (2)" in res.stdout and "Trial plan" in res.stdout


def test_processes_and_vllm_server_must_fit_the_gpus(tmp_path, task_name):
    text = MINIMAL.format(task=task_name) + "hardware:\n  gpus: 8\n  num_processes: 8\n  vllm: {mode: server, server_gpus: 1}\n"
    joined = "\n".join(problems_of(write(tmp_path, text)))
    assert "hardware.gpus: 8 training process(es) + 1 vLLM server GPU(s) do not fit in 8 GPU(s)" in joined


def test_validation_and_orchestrator_never_import_torch_or_trl():
    """The study process stays small: GRPOConfig's fields come from a cached child process."""
    code = ("import sys; from grpo_ablate.config import load_study; load_study('studies/tiny-cpu.yaml'); "
            "import grpo_ablate.study, grpo_ablate.study.lifecycle, grpo_ablate.launch; "
            "print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ disagreements the vocabulary ended


def test_task_names_are_rewards_from_the_cli():
    res = cli_inprocess("validate", "studies/tiny-cpu.yaml", "--set", "rewards=[addition]")
    assert res.returncode == 0, res.stderr


def test_every_builtin_model_is_accepted(tmp_path, task_name):
    from grpo_ablate.core.vocab import BUILTIN_MODELS

    for name in BUILTIN_MODELS:
        study = load_study(write(tmp_path, MINIMAL.format(task=task_name)), [f"model.name_or_path={name}"])
        assert study.model.name_or_path == name
    res = cli_inprocess("validate", "studies/tiny-cpu.yaml", "--set", "model.name_or_path=builtin:tiny-untrained")
    assert res.returncode == 0, res.stderr
    msgs = problems_of(write(tmp_path, MINIMAL.format(task=task_name)), ["model.name_or_path=builtin:tiniest"])
    assert any("unknown built-in model 'builtin:tiniest'" in m for m in msgs), msgs


def test_builtin_names_come_from_the_vocabulary(tmp_path, task_name):
    from grpo_ablate.core.vocab import reward_names

    path = write(tmp_path, MINIMAL.format(task=task_name))
    load_study(path, [f"rewards={reward_names()}"])
    (msg,) = problems_of(path, ["rewards=[acurracy]"])
    assert "unknown reward 'acurracy' (did you mean 'accuracy'?)" in msg


def test_objectives_need_a_metric_with_a_direction(tmp_path, task_name):
    from grpo_ablate.core.vocab import METRICS

    path = write(tmp_path, MINIMAL.format(task=task_name))
    assert METRICS["steps"].direction is None
    (msg,) = problems_of(path, ["study.objectives=[{metric: steps}]"])
    assert msg.startswith("study.objectives.0.metric: 'steps' has no direction")
    study = load_study(path, ["study.objectives=[{metric: peak_memory_mb}]"])
    assert study.directions == ["minimize"]


@pytest.mark.parametrize("study_file", ["studies/tiny-cpu.yaml", "studies/qwen2.5-0.5b-gsm8k.yaml"])
def test_plan_json_trial_count_matches_the_text(study_file):
    import re

    text = cli_inprocess("plan", study_file)
    js = cli_inprocess("plan", study_file, "--json")
    assert text.returncode == js.returncode == 0, text.stderr + js.stderr
    m = re.search(r"Trial plan \((\d+) trials|Trials: (\d+) proposed", text.stdout)
    assert m, text.stdout
    assert json.loads(js.stdout)["n_trials"] == int(m.group(1) or m.group(2))
