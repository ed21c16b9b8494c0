"""The trainer section the built-in model learns the built-in task with on a CPU.

It is `studies/tiny-cpu.yaml`'s trainer section, as data for tests and benchmarks (the study
file is what users read and change); tests/test_builtin_registries.py checks them key by key.
With it, `grpo-ablate run studies/tiny-cpu.yaml` takes the reward from ~0.2 to
~0.8 in 50 steps in every arm (docs/benchmarks.md, "Speed, memory and overhead").
"""

from __future__ import annotations

from typing import Any

__all__ = ["TINY_CPU_TRAINER"]

TINY_CPU_TRAINER: dict[str, Any] = {
    "learning_rate": 2.0e-4,
    "per_device_train_batch_size": 32,  # 32 completions per step: G=2 -> 16 prompts, G=8 -> 4
    "gradient_accumulation_steps": 1,
    "max_completion_length": 6,  # answers are <= 3 digits + <eos>
    "beta": 0.0,
    "lr_scheduler_type": "constant",
    "warmup_steps": 0,
}
