"""DeepSpeed ZeRO-2 and ZeRO-3 on 2 CPU processes through the SHIPPED accelerate configs
(sweeps/accelerate/zero2.yaml, zero3.yaml: bf16 there, fp32 on a CPU by grpo_ablate/core/precision.py), with
held-out evaluation over both ranks (15 prompts: an uneven split). Each one's per-step metrics and
greedy evaluation equal plain 2-process DDP's (torchrun). ZeRO-3 really partitions: builtin:tiny-vllm's
MLP matrices (64 x 1664 = 106,496 elements) pass DeepSpeed's default stage3_param_persistence_threshold
(100,000), so they are split across the ranks and every forward pass gathers them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from helpers import ROOT, run_cli, write_study
from tier import jsonl

STEPS = 3
ACCELERATE = ROOT / "sweeps" / "accelerate"


def _trial(tmp_path: Path, name: str, accelerate: str | None) -> Path:
    hardware = f"num_processes: 2, accelerate_config: {ACCELERATE / accelerate}" if accelerate else "num_processes: 2"
    study = write_study(tmp_path, f"""
        study: {{name: {name}, sampler: tpe, n_trials: 1, seeds: [0], output_dir: {tmp_path / name}}}
        model: {{name_or_path: builtin:tiny-vllm}}
        data: {{task: addition, num_prompts: 200}}
        trainer: {{learning_rate: 1.0e-3, per_device_train_batch_size: 8, max_completion_length: 6, beta: 0.0,
                  lr_scheduler_type: constant, warmup_steps: 0}}
        hardware: {{{hardware}}}
        search: {{num_generations: [4]}}
        budget: {{max_steps: {STEPS}}}
        evaluation: {{num_prompts: 15, temperature: 0, points: 1}}
        """, name=f"{name}.yaml")
    trial = tmp_path / f"{name}-trial"
    r = run_cli("run-one", str(study), "--trial-dir", str(trial), timeout=600)
    log = (trial / "log.txt").read_text() if (trial / "log.txt").exists() else ""
    assert r.returncode == 0, f"{name}: " + r.stdout[-2000:] + r.stderr[-2000:] + log[-4000:]
    return trial


@pytest.fixture(scope="module")
def ddp(tmp_path_factory, needs_deepspeed):
    return _trial(tmp_path_factory.mktemp("ddp"), "ddp", None)


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7))


@pytest.mark.parametrize("config, stage", [("zero2.yaml", 2), ("zero3.yaml", 3)])
def test_zero_through_the_shipped_config_matches_ddp(tmp_path, ddp, config, stage):
    trial = _trial(tmp_path, f"zero{stage}", config)
    log = (trial / "log.txt").read_text()
    seen = re.search(r"evaluation on 2 ranks \(ZeRO stage (\d), FSDP \w+; (\d+) of (\d+) parameter tensors", log)
    assert seen and int(seen.group(1)) == stage, log[-3000:]
    split = int(seen.group(2))
    assert (split >= 6) if stage == 3 else (split == 0)  # 3 MLP matrices x 2 layers partitioned under ZeRO-3

    mine, theirs = jsonl(trial / "metrics.jsonl"), jsonl(ddp / "metrics.jsonl")
    assert len(mine) == len(theirs) == STEPS
    for a, b in zip(mine, theirs):
        for key in ("reward", "reward_std", "loss", "num_tokens", "completions_mean_length", "grad_norm"):
            assert _same(a.get(key), b.get(key)), (stage, a.get("step"), key, a.get(key), b.get(key))
    evals, ddp_evals = jsonl(trial / "eval.jsonl"), jsonl(ddp / "eval.jsonl")
    assert [e["ranks"] for e in evals] == [2, 2, 2] and len(evals[0]["per_prompt"]) == 15
    assert [e["per_prompt"] for e in evals] == [e["per_prompt"] for e in ddp_evals]
