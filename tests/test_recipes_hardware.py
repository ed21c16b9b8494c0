"""Hardware as launchers do it: vLLM server mode trains on gpus - server_gpus, and TRL agrees at 7 processes."""

from __future__ import annotations

import pytest

from helpers import ROOT
from grpo_ablate.config import load_study
from grpo_ablate.config.hardware import world_size_reason

OPENR1 = ROOT / "studies/recipes/openr1-style-study.yaml"


def test_server_mode_overrides_the_accelerate_file():
    study = load_study(OPENR1, ["search.num_generations=[5, 6, 7, 8, 14, 16]"])
    assert study.world_size == 7
    assert "overrides num_processes: 8" in world_size_reason(study.file)
    pinned = load_study(OPENR1, ["hardware.num_processes=6"])
    assert pinned.world_size == 6 and "hardware.num_processes" in world_size_reason(pinned.file)
    colocate = load_study(OPENR1, ["hardware.vllm.mode=colocate"])
    assert colocate.world_size == 8  # the accelerate file's 8: no GPU is set aside


def test_feasible_space_at_seven_processes_agrees_with_grpo_config(tmp_path, monkeypatch):
    trl = pytest.importorskip("trl")
    gens = [2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 16, 28, 32, 49, 56]
    study = load_study(OPENR1, [f"search.num_generations={gens}"])
    ours = {p.num_generations for p in study.space.feasible}
    monkeypatch.setattr(trl.GRPOConfig, "world_size", property(lambda self: study.world_size))
    theirs = set()
    for g in gens:
        try:
            trl.GRPOConfig(output_dir=str(tmp_path), num_generations=g, use_cpu=True, bf16=False, report_to="none",
                           per_device_train_batch_size=study.trainer["per_device_train_batch_size"],
                           gradient_accumulation_steps=study.trainer["gradient_accumulation_steps"])
            theirs.add(g)
        except ValueError:
            pass
    assert study.world_size == 7
    assert ours == theirs and {7, 8, 14, 16} <= ours and not {5, 6, 9} & ours


def test_init_writes_the_recipes_own_deepspeed_config_not_plain_ddp(tmp_path):
    """Open R1 trains under DeepSpeed (ZeRO-3 for its 7B recipes): init for an 8-GPU node writes that config,
    and the study's own process count, so plan no longer says the trials launch as plain DDP."""
    import yaml

    from grpo_ablate.commands.init import write_study
    from grpo_ablate.plan.draft import InitAnswers

    fixtures = ROOT / "tests/fixtures/open-r1"
    for recipe, stage in (("qwen2.5-1.5b-instruct-grpo-config_demo.yaml", "zero2.yaml"),
                          ("qwen2.5-coder-7b-instruct-grpo-config_codeforces.yaml", "zero3.yaml")):
        out = write_study(InitAnswers(recipe=fixtures / recipe, gpus=8, vllm="server", unpriced=True), tmp_path / recipe)
        hw = yaml.safe_load(out.read_text())["hardware"]
        assert hw["accelerate_config"].endswith(stage) and hw["num_processes"] == 7
        study = load_study(out)
        assert study.world_size == 7 and not any("plain DDP" in str(w) for w in study.warnings)
    cpu = write_study(InitAnswers(recipe=fixtures / "qwen2.5-1.5b-instruct-grpo-config_demo.yaml", unpriced=True),
                      tmp_path / "cpu.yaml")
    assert "accelerate_config" not in cpu.read_text()
