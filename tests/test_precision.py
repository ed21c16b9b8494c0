"""A trial's mixed precision is decided in one place (grpo_ablate/core/precision.py) for the trainer and for
accelerate/DeepSpeed; validate and plan say what a CPU run changes. The DeepSpeed trials through the
shipped accelerate configs run in the vLLM tier (tests/vllm_tier/test_deepspeed.py)."""

from __future__ import annotations

import pytest

from grpo_ablate.core.precision import cpu_changes, trainer_flags, trial_precision
from helpers import ROOT, cli_inprocess, write_study

ZERO3 = ROOT / "sweeps" / "accelerate" / "zero3.yaml"


@pytest.mark.parametrize("trainer, launcher, cuda, want", [
    ({}, "bf16", False, "no"),                  # a CPU: fp32 whatever the accelerate config says
    ({"bf16": True}, None, False, "no"),
    ({}, None, True, "bf16"),                   # TRL's default
    ({}, "no", True, "no"),                     # the accelerate config over TRL's default
    ({}, "fp16", True, "fp16"),
    ({"bf16": False}, "bf16", True, "no"),      # the study's own trainer flag over the config
    ({"fp16": True}, "bf16", True, "fp16"),
])
def test_one_rule_for_the_trainer_and_accelerate(trainer, launcher, cuda, want):
    assert trial_precision(trainer, launcher, cuda=cuda) == want


def test_trainer_flags_follow_the_precision():
    assert trainer_flags("no") == {"bf16": False, "fp16": False}
    assert trainer_flags("bf16") == {"bf16": True, "fp16": False} == trainer_flags("fp8")
    assert trainer_flags("fp16") == {"bf16": False, "fp16": True}


def test_cpu_changes_of_the_shipped_zero3_config():
    import yaml

    changes = cpu_changes({"bf16": True}, yaml.safe_load(ZERO3.read_text()))
    assert changes[0] == "mixed_precision bf16 -> no (fp32); DeepSpeed's bf16 section off"
    assert "trainer.bf16 true -> false" in changes
    assert any("gloo" in c and "CPU accelerator" in c for c in changes)
    assert changes[-1].startswith("kept: ZeRO stage 3")
    assert cpu_changes({}, {}) == []  # no accelerate config, no precision asked: nothing to say


def test_validate_and_plan_say_what_a_cpu_run_changes(tmp_path):
    study = write_study(tmp_path, f"""
        study: {{name: ds, sampler: tpe, n_trials: 1, output_dir: {tmp_path / 'out'}}}
        model: {{name_or_path: builtin:tiny}}
        data: {{task: addition, num_prompts: 64}}
        trainer: {{per_device_train_batch_size: 8, max_completion_length: 4}}
        hardware: {{accelerate_config: {ZERO3}, num_processes: 2, gpus: 0}}
        search: {{num_generations: [4]}}
        budget: {{max_steps: 2}}
        """)
    code, out, err = cli_inprocess("validate", str(study))
    assert code == 0, err
    assert "warning: no GPU here, so each trial runs on the CPU and changes: mixed_precision bf16 -> no" in err
    code, out, err = cli_inprocess("plan", str(study))
    assert code == 0 and "On this machine: no GPU here" in out and "kept: ZeRO stage 3" in out, out + err


def test_server_mode_on_a_cpu_needs_no_second_gpu(tmp_path):
    text = f"""
        study: {{name: srv, sampler: tpe, n_trials: 1, output_dir: {tmp_path / 'out'}}}
        model: {{name_or_path: {tmp_path}}}
        data: {{task: addition, num_prompts: 64}}
        trainer: {{per_device_train_batch_size: 8, max_completion_length: 4}}
        hardware: {{gpus: GPUS, vllm: {{mode: server}}}}
        search: {{num_generations: [4]}}
        budget: {{max_steps: 2}}
        """
    code, _, err = cli_inprocess("validate", str(write_study(tmp_path, text.replace("GPUS", "0"), "cpu.yaml")))
    assert code == 0, err
    code, _, err = cli_inprocess("validate", str(write_study(tmp_path, text.replace("GPUS", "1"), "one.yaml")))
    assert code != 0 and "1 vLLM server GPU(s) do not fit in 1 GPU(s)" in err
