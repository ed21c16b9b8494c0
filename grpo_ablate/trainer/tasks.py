"""Old import path of the built-in pieces, kept only for the modules that still use it.

The code is in grpo_ablate/trainer/builtin/ (tokenizer, model, tasks, recipe). Delete this
module once tasks_catalog.py, tests/test_trainer_units.py, tests/test_trainer_e2e.py and
benchmarks/gpu_smoke.py import from there.
"""

from __future__ import annotations

from .builtin.model import builtin_model_path
from .builtin.recipe import TINY_CPU_TRAINER
from .builtin.tasks import TASKS
from .builtin.tokenizer import build_tokenizer

__all__ = ["TASKS", "TINY_CPU_TRAINER", "build_tokenizer", "builtin_model_path"]
