"""The child side of validate's trial-start checks: what a trial builds before its first step, built here.

    python -m grpo_ablate.trainer.trial_check < specs.json     # preflight/trial_start.py runs it

Reads a JSON object {"specs": [TrialSpec as a dict, ...], "gpu": bool} on stdin and prints one
JSON object: {"cuda_devices": n, "results": [{"problems": [...]}, ...]}, one result per spec. For
each spec, what trainer/build.py builds before it loads the model, with the trial's own code:
the GRPOConfig keyword arguments (trainer/dry_run.config_kwargs, as on a machine with or without
CUDA: `gpu`), GRPOConfig itself (TRL's __post_init__: batch and group divisibility, enum values,
types TRL casts; a trial of several processes is checked in this one process with the plan's
generation batch of all of them), the plan's generation rounds against TRL's (one process), one
reward weight per reward; then
what the trainer creates at its first step: the optimizer's class (a missing package such as
bitsandbytes) and the learning-rate scheduler with the study's kwargs (cosine_with_min_lr without
min_lr fails only there). A machine without CUDA checks a GPU study's config with its mixed
precision off (a CPU cannot say whether bf16 runs on the node). Imports torch and TRL: run it in
a child, never in the orchestrator.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from typing import Any

from grpo_ablate.trl_facts.fields import trl_default
from .dry_run import config_kwargs
from grpo_ablate.core.space import Rounds
from grpo_ablate.contract.spec import TrialSpec

__all__ = ["check_spec", "main"]

def check_spec(spec: TrialSpec, *, gpu: bool, cuda_here: bool) -> list[str]:
    """What stops this trial before its first step, each in one line; empty when nothing does."""
    # heavy: torch, transformers and TRL load in the check's own process only (validate and plan --commands start it)
    from transformers import Trainer
    from transformers.optimization import get_scheduler
    from trl import GRPOConfig
    import torch

    problems: list[str] = []
    weights = [r.weight for r in spec.rewards]
    kwargs = config_kwargs(spec, spec.num_processes, gpu)
    if gpu and not cuda_here:  # what differs between the node and this CPU machine: off here
        kwargs.update(bf16=False, fp16=False, use_cpu=True)
        kwargs.pop("tf32", None)
    if spec.num_processes > 1:  # this process is one: give TRL the plan's generation batch of all processes
        per_device = int(kwargs.get("per_device_train_batch_size") or trl_default("per_device_train_batch_size"))
        kwargs.pop("steps_per_generation", None)
        kwargs["generation_batch_size"] = (kwargs.get("generation_batch_size")
                                           or per_device * spec.num_processes * spec.rounds.steps_per_generation)
    with tempfile.TemporaryDirectory() as out:
        kwargs["output_dir"] = out  # nothing is written, but TrainingArguments may create it
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = GRPOConfig(**kwargs)
        except Exception as e:  # noqa: BLE001 - every refusal of the config is the answer
            return [f"TRL's GRPOConfig refuses the trainer keys: {type(e).__name__}: {e}"]
    built = Rounds(int(config.steps_per_generation), int(config.gradient_accumulation_steps),
                   int(config.num_iterations or 1))
    if spec.num_processes == 1 and built != spec.rounds:
        problems.append(f"the trial plan's generation rounds {spec.rounds} differ from TRL's {built}")
    if config.reward_weights is not None and len(config.reward_weights) != len(weights):
        problems.append(f"trainer.reward_weights has {len(config.reward_weights)} values for {len(weights)} reward(s)")
    try:
        Trainer.get_optimizer_cls_and_kwargs(config)
    except Exception as e:  # noqa: BLE001
        problems.append(f"the optimizer trainer.optim={config.optim!r} cannot be created: {type(e).__name__}: {e}")
    steps = int(spec.max_steps or config.max_steps or 0) if (spec.max_steps or config.max_steps or 0) > 0 else 100
    try:
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=float(config.learning_rate))
        get_scheduler(config.lr_scheduler_type, optimizer, num_warmup_steps=config.get_warmup_steps(steps),
                      num_training_steps=steps, scheduler_specific_kwargs=config.lr_scheduler_kwargs or {})
    except Exception as e:  # noqa: BLE001
        name = getattr(config.lr_scheduler_type, "value", config.lr_scheduler_type)
        problems.append(f"the learning-rate scheduler trainer.lr_scheduler_type={name} cannot be "
                        f"created at the first step: {type(e).__name__}: {e}")
    return problems


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    request: dict[str, Any] = json.loads(sys.stdin.read())
    import torch  # heavy: after HF_HUB_OFFLINE is set, in the check's own process

    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    results = []
    for raw in request["specs"]:
        spec = TrialSpec.from_json(json.dumps(raw))
        try:
            results.append({"problems": check_spec(spec, gpu=bool(request.get("gpu")), cuda_here=cuda > 0)})
        except Exception as e:  # noqa: BLE001 - a check that cannot run says so, per spec
            results.append({"problems": [f"could not check the trial's config: {type(e).__name__}: {e}"]})
    print(json.dumps({"cuda_devices": cuda, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
