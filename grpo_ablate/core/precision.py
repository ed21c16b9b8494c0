"""A trial's mixed precision, decided once for both the trainer and accelerate/DeepSpeed.

Three things speak about it: the study's trainer.bf16 / trainer.fp16 (TrainingArguments), the
accelerate config's `mixed_precision` (which `accelerate launch` exports as
ACCELERATE_MIXED_PRECISION, and from which accelerate builds DeepSpeed's bf16/fp16 sections), and
whether the trial's machine has CUDA. When the trainer and DeepSpeed disagree, transformers
refuses the run ("ds bf16.enabled=True vs hf bf16|bf16_full_eval=False"): the shipped
sweeps/accelerate/zero*.yaml (bf16) failed that way on a CPU. The rule, in `trial_precision`:

- no CUDA: no mixed precision (fp32), whatever the study says: bf16 autocast on a CPU is slow and
  fp16 unsupported, and a CPU run is a check of the plumbing;
- CUDA: the study's trainer.bf16/fp16 when it set one, else the accelerate config's
  mixed_precision, else TRL's default (bf16).

The trial applies the answer to both sides (trainer/build.py: the GRPOConfig flags and
ACCELERATE_MIXED_PRECISION, read by TrainingArguments and accelerate's DeepSpeed plugin);
`validate` and `plan` print `cpu_changes`, what a run on a CPU changes of the study's settings
(config/cpu_run.py reads the study's accelerate file for them). Only the standard library: the
rule is decided where the trial runs (CUDA there, the launcher's environment), so the child reads
it from here and the orchestrator imports no torch.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Mapping

__all__ = ["CPU_CHANGES_LEAD", "MIXED_PRECISION_ENV", "cpu_changes", "no_gpu_here", "trainer_flags", "trial_precision"]

MIXED_PRECISION_ENV = "ACCELERATE_MIXED_PRECISION"
CPU_CHANGES_LEAD = "no GPU here, so each trial runs on the CPU and changes: "
_MODES = ("no", "fp16", "bf16", "fp8")


def trial_precision(trainer: Mapping[str, Any], launcher: str | None, *, cuda: bool, default: str = "bf16") -> str:
    """"no", "fp16", "bf16" or "fp8" for a trial: see the module docstring for the order.

    `launcher` is the accelerate config's mixed_precision (ACCELERATE_MIXED_PRECISION in the trial's
    environment), None when the trial was not started by accelerate; `default` is TRL's (bf16).
    """
    if not cuda:
        return "no"
    if trainer.get("fp16"):
        return "fp16"
    if trainer.get("bf16") is not None:
        return "bf16" if trainer["bf16"] else "no"
    if launcher and launcher.lower() in _MODES:
        return launcher.lower()
    return default


def trainer_flags(precision: str) -> dict[str, bool]:
    """TrainingArguments' bf16/fp16 for a precision (fp8 trains under bf16 autocast, as accelerate does)."""
    return {"bf16": precision in ("bf16", "fp8"), "fp16": precision == "fp16"}


def no_gpu_here(gpus: int | None) -> bool:
    """Whether this machine's trials run on the CPU: hardware.gpus is 0, CUDA_VISIBLE_DEVICES hides
    every GPU, or there is no NVIDIA driver (no nvidia-smi)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hidden = visible is not None and not [g for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    return gpus == 0 or hidden or shutil.which("nvidia-smi") is None


def cpu_changes(trainer: Mapping[str, Any], accelerate: Mapping[str, Any]) -> list[str]:
    """What a trial on a CPU changes of the study's trainer and accelerate/DeepSpeed settings, in words."""
    out: list[str] = []
    mixed = str(accelerate.get("mixed_precision") or "no").lower()
    deepspeed = str(accelerate.get("distributed_type") or "").upper() == "DEEPSPEED"
    if mixed != "no":
        out.append(f"mixed_precision {mixed} -> no (fp32)" + (f"; DeepSpeed's {mixed} section off" if deepspeed else ""))
    for key in ("bf16", "fp16"):
        if trainer.get(key):
            out.append(f"trainer.{key} true -> false")
    if accelerate:
        out.append("use_cpu -> true: torch.distributed over gloo, not NCCL"
                   + ("; DeepSpeed runs on its CPU accelerator" if deepspeed else ""))
    if deepspeed:
        stage = (accelerate.get("deepspeed_config") or {}).get("zero_stage")
        out.append(f"kept: ZeRO stage {stage}, its offload and partitioning settings")
    return out
