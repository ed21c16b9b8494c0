"""The parts of a command trial and of the dry run that need no second environment (the tier: tests/stack_tier).

- metrics from `trainer_state.json` of two TRL releases, real files written by real runs
  (tests/fixtures/trainer_state/, how each was made: README.md there);
- the script's command line: the trial's values as TrlParser overrides, the environment's interpreter;
- `plan --commands`: the environment it prints is the one the launcher sets; an 8-GPU server-mode study shows
  the GPU split and the checkpoint cadence and learning-rate schedule the trial really uses.
"""

from __future__ import annotations

import json
import sys

import pytest

from helpers import ROOT, cli_inprocess
from grpo_ablate.config import load_study
from grpo_ablate.launch import ProcessLauncher
from grpo_ablate.launch.launch_env import VOLATILE, launch_environment
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.contract.command import KEEP_EVERY_CHECKPOINT, command_line, eval_steps, save_every
from grpo_ablate.trainer.log_history import TIMING_INTERPOLATED, read_log_history, rows_from_log_history
from grpo_ablate.contract.metrics import summarize
from grpo_ablate.core.vocab import Arm, Cell

FIXTURES = ROOT / "tests/fixtures/trainer_state"


@pytest.mark.parametrize("release", ["0.18.0", "1.16.0"])
def test_rows_from_the_trainer_state_of_two_trl_releases(release):
    history = read_log_history(FIXTURES / f"trl-{release}.json")
    rows = rows_from_log_history(history, generated_per_step=16, completions_trained=16, num_generations=8)
    steps = [e["step"] for e in history if "loss" in e]
    assert [r["step"] for r in rows] == steps and len(rows) >= 6
    for row in rows:  # the recorder's names, the plan's completions, seconds spread over train_runtime
        assert row["completions"] == 16 and row["completion_tokens"] == pytest.approx(row["completions_mean_length"] * 16)
        assert row["timing"] == TIMING_INTERPOLATED and row["train_seconds"] > 0
        assert {"reward", "reward_std", "frac_reward_zero_std", "num_tokens", "rewards/exact_answer/mean"} <= set(row)
    assert ("entropy" in rows[0]) == (release == "1.16.0")  # TRL 0.18 does not log the policy's entropy
    summary = summarize(rows)
    assert summary["steps"] == steps[-1] and summary["frac_reward_zero_std"] is not None
    assert summary["tokens_per_second"] and summary["samples_per_second"]


def test_older_trl_names_are_read_as_the_recorders():
    """TRL 0.14-0.16 logged `completion_length` and `rewards/<f>` (no /mean): same columns as today's."""
    history = [{"loss": 0.1, "reward": 0.5, "reward_std": 0.2, "kl": 0.0, "completion_length": 4.0,
                "rewards/exact": 0.5, "step": 1}, {"train_runtime": 2.0, "step": 1}]
    (row,) = rows_from_log_history(history, generated_per_step=8, completions_trained=8, num_generations=4)
    assert row["completions_mean_length"] == 4.0 and row["rewards/exact/mean"] == 0.5 and row["train_seconds"] == 2.0


def _command_spec(tmp_path, *sets):
    rows = "".join(json.dumps({"prompt": f"What is {i}+1?", "answer": str(i + 1)}) + "\n" for i in range(40))
    (tmp_path / "d.jsonl").write_text(rows)
    (tmp_path / "h.jsonl").write_text(rows)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"model_name_or_path: /models/m\ndataset_name: {tmp_path / 'd.jsonl'}\nreward_funcs: [my_reward]\n"
                      "per_device_train_batch_size: 16\nnum_generations: 8\nmax_prompt_length: 64\nsave_total_limit: 1\n")
    (tmp_path / "venv/bin").mkdir(parents=True, exist_ok=True)
    (tmp_path / "venv/bin/accelerate").write_text("")
    study = tmp_path / "study.yaml"
    study.write_text("study: {name: c, sampler: ablation, seeds: [3], output_dir: out, checkpoint_steps: 5}\n"
                     "trainer_from: recipe.yaml\n"
                     "script: {command: 'accelerate launch --num_processes 1 grpo.py --config {recipe}', python: venv/bin/python}\n"
                     "rewards: [format]\ntrainer: {learning_rate: 1.0e-5}\nsearch: {num_generations: [4, 8]}\n"
                     "budget: {max_steps: 20}\nevaluation: {dataset: h.jsonl, points: 3}\n")
    loaded = load_study(study, list(sets))
    return build_spec(loaded, Cell(Arm(4, 16, 0.7), 3, "grid"), tmp_path / "trial")


def test_the_script_gets_the_trial_as_its_own_overrides(tmp_path):
    spec = _command_spec(tmp_path)
    argv = command_line(spec)
    assert argv[:5] == [str(tmp_path / "venv/bin/accelerate"), "launch", "--num_processes", "1", "grpo.py"]
    assert argv[5:7] == ["--config", str(tmp_path / "recipe.yaml")]
    given = dict(zip(argv[7::2], argv[8::2]))
    assert given["--num_generations"] == "4" and given["--temperature"] == "0.7" and given["--seed"] == "3"
    assert given["--max_steps"] == "20" and given["--output_dir"] == str(tmp_path / "trial/trainer")
    assert given["--learning_rate"] == "1e-05"  # the study file's own key; the recipe's keys the script reads itself
    assert "--per_device_train_batch_size" not in given and "--max_prompt_length" not in given
    assert given["--save_steps"] == str(save_every(spec)) == "5" and given["--save_total_limit"] == str(KEEP_EVERY_CHECKPOINT)
    assert given["--push_to_hub"] == "false" and given["--logging_steps"] == "1" and given["--report_to"] == "none"
    assert eval_steps(spec) == [5, 10, 15]  # the checkpoints the held-out evaluation scores, at 1/4, 2/4, 3/4
    assert command_line(spec, resume_from="/r/checkpoint-5")[-2:] == ["--resume_from_checkpoint", "/r/checkpoint-5"]


def test_a_recipe_s_trackers_stay_on_and_study_trackers_turn_them_off(tmp_path):
    spec = _command_spec(tmp_path, "trainer.report_to=[tensorboard]")
    assert spec.trainer["report_to"] == ["tensorboard"]
    assert "--report_to" in (argv := command_line(spec)) and argv[argv.index("--report_to") + 1] == "tensorboard"
    old = command_line(spec, transformers="4.52.4")  # its TensorBoard callback reads logging_dir, not the environment
    assert old[old.index("--logging_dir") + 1] == spec.env["TENSORBOARD_LOGGING_DIR"]
    assert "--logging_dir" not in command_line(spec, transformers="5.25.0")
    spec = _command_spec(tmp_path, "trainer.report_to=[tensorboard]", "study.trackers=[]")
    assert spec.trainer["report_to"] == "none"


def test_the_dry_run_prints_the_environment_the_launcher_sets(tmp_path, monkeypatch):
    """Launched for real (a stand-in child that writes its environment down), the trial's process finds every
    variable the dry run printed, with that value, and no other set by the launcher."""
    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "process")
    study = load_study(ROOT / "studies/tiny-cpu.yaml", [f"study.output_dir={tmp_path / 'out'}",
                                                        "study.trackers=[tensorboard]"])
    spec = build_spec(study, Cell(Arm(4, 32, 1.0), 0, "grid"), tmp_path / "trial", {"CUDA_VISIBLE_DEVICES": ""})
    printed = launch_environment(spec)["training"]
    dump = tmp_path / "env.json"
    code = f"import json, os; json.dump(dict(os.environ), open({str(dump)!r}, 'w'))"
    ProcessLauncher(command=lambda s, p: [sys.executable, "-c", code]).run(spec)
    seen = json.loads(dump.read_text())
    import os

    set_by_launcher = {k: v for k, v in seen.items() if os.environ.get(k) != v}
    assert set(set_by_launcher) == set(printed)
    assert {k: v for k, v in set_by_launcher.items() if k not in VOLATILE} == \
        {k: v for k, v in printed.items() if k not in VOLATILE}
    assert printed["CUDA_VISIBLE_DEVICES"] == "" and "TENSORBOARD_LOGGING_DIR" in printed


def test_plan_commands_of_an_8_gpu_server_study_shows_the_split_and_the_real_settings():
    res = cli_inprocess("plan", str(ROOT / "studies/openr1-1.5b-numina-8gpu.yaml"), "--commands")
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "GPUs: vLLM server CUDA_VISIBLE_DEVICES='7', training CUDA_VISIBLE_DEVICES='0,1,2,3,4,5,6'" in out
    config = out.split("GRPOConfig (as the trial runs it):", 1)[1].split("\n\n", 1)[0]
    assert "save_steps: 1\n" not in config and "save_total_limit: None" not in config
    assert "save_steps: 10\n" in config and "note: save_steps 10: the checkpointer's interval" in config
    assert "warmup_steps: 0.1\n" not in config  # a fraction is shown as what the scheduler takes
    assert "warmup_steps: \"10% of the full run's steps\"" in config
    assert "environment (vLLM server), set by the launcher:\n    CUDA_VISIBLE_DEVICES=7" in out


def test_slurm_script_takes_its_time_limit_from_the_trial_timeout():
    """tiny-cpu's trial_timeout 600 s + the stop grace 60 s + the script's 300 s early SIGTERM = 16 minutes; the
    time a study names on the command line wins."""
    from grpo_ablate.commands.slurm_script import slurm_time

    out = cli_inprocess("slurm-script", str(ROOT / "studies/tiny-cpu.yaml"))
    assert out.returncode == 0 and "#SBATCH --time=00:16:00" in out.stdout.splitlines()
    assert "#SBATCH --time=1:00:00" in cli_inprocess("slurm-script", str(ROOT / "studies/tiny-cpu.yaml"),
                                                     "--time", "1:00:00").stdout.splitlines()
    assert slurm_time(164 * 3600 + 360) == "6-20:06:00"  # the 164 h trial: not 24:00:00


def test_a_script_study_refuses_what_needs_the_built_in_trainer(tmp_path):
    from grpo_ablate.config import StudyError

    with pytest.raises(StudyError, match=r"search.num_generations.1: '4->8@50%': a G that changes during the run"):
        _command_spec(tmp_path, "search.num_generations=[4, '4->8@50%']")
