"""The GRPOConfig keyword arguments each trial would pass, computed by the trial's own code, without training.

    grpo-ablate plan STUDY --commands        # runs this in a child: the parent never imports torch
    python -m grpo_ablate.trainer.dry_run < specs.json

The child side (trainer/): it imports the trial's own build; the parent (commands/plan.py) runs it as a process.

Reads a JSON list of {"spec": TrialSpec as a dict, "world_size": int, "gpu": bool, "full_run_steps": int|null}
on stdin and prints one JSON list of {"kwargs", "notes"}. `gpu` says the trial machine has CUDA (the study
names GPUs), so the arguments are those of that machine, not of the laptop planning it.

The keyword arguments are those the trial runs with, not placeholders: where the worker decides a
value itself during training (the checkpointer's cadence behind save_steps=1, the prefix learning-rate
schedule behind max_steps, a warmup fraction), the value shown is the one it decides (`effective`),
computed by the same functions (cadence.interval_steps, cost.full_run_steps, cost.warmup_steps: transformers'
warmup rule).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from grpo_ablate.core.cost import lr_schedule_of, warmup_steps
from grpo_ablate.core.schedule import Schedule
from . import build
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.contract.cadence import interval_steps

__all__ = ["config_kwargs", "effective"]


def config_kwargs(spec: TrialSpec, world_size: int, gpu: bool) -> dict:
    """build.build_config_kwargs as the trial calls it, on a machine with (gpu) or without CUDA: the trial machine's
    answer, not this one's."""
    weights = [r.weight for r in spec.rewards]
    return build.build_config_kwargs(spec, world_size=world_size, reward_weights=weights, cuda=gpu)


def effective(spec: TrialSpec, kwargs: dict[str, Any], full_run_steps: int | None) -> tuple[dict[str, Any], list[str]]:
    """(the keyword arguments with the values the trial really runs with, a note per value changed)."""
    out, notes = dict(kwargs), []
    every = spec.checkpoint.every if spec.checkpoint else None
    if kwargs.get("save_steps") == 1 and kwargs.get("save_total_limit") is None and spec.checkpoint is not None \
            and not isinstance(spec.num_generations, Schedule):
        steps = int(spec.max_steps or 0)
        interval = interval_steps(every, steps, spec.rounds.period_steps)
        out["save_steps"] = interval if interval is not None else steps
        out["save_total_limit"] = 1
        notes.append(f"save_steps {out['save_steps']}: the checkpointer's interval (study.checkpoint_steps {every!r}, "
                     f"whole generation rounds of {spec.rounds.period_steps} step(s))"
                     + (", once 300 s trained since the last" if every == "auto" else "")
                     + ("; none inside the trial, which is shorter than one" if interval is None else "")
                     + "; each is sealed and the older removed (save_total_limit 1)")
    steps = int(out.get("max_steps") or 0)
    scheduler_steps: int | None = steps
    warmup = out.get("warmup_steps")
    if lr_schedule_of(asdict(spec.budget)) == "prefix" and spec.budget.full_run and not full_run_steps and steps:
        scheduler_steps = None  # build._lr_schedule counts the full run from the prompts the trial loads
        out["lr_scheduler_steps"] = "the full run's (counted from the prompts when the trial starts)"
        if isinstance(warmup, float) and 0 < warmup < 1:
            out["warmup_steps"] = f"{warmup:.0%} of the full run's steps"
        notes.append("learning-rate schedule: built for the full run (budget.lr_schedule: prefix), whose length the "
                     "trial counts from its prompts at start; the trial runs its first "
                     f"{steps} steps" + (f", warmup {warmup} of the full run's steps" if warmup else ""))
    elif lr_schedule_of(asdict(spec.budget)) == "prefix" and full_run_steps and steps and full_run_steps > steps:
        scheduler_steps = full_run_steps
        notes.append(f"learning-rate schedule: built for the full run's {full_run_steps} steps; the trial runs the "
                     f"first {steps} (budget.lr_schedule: prefix)")
    if scheduler_steps:
        out["lr_scheduler_steps"] = scheduler_steps
    if isinstance(warmup, float) and 0 < warmup < 1 and scheduler_steps:
        out["warmup_steps"] = warmup_steps(out, scheduler_steps)
        notes.append(f"warmup_steps {out['warmup_steps']}: the fraction {warmup} of the scheduler's {scheduler_steps} steps")
    return out, notes


def main() -> int:
    out = []
    for item in json.loads(sys.stdin.read()):
        spec = TrialSpec.from_json(json.dumps(item["spec"]))
        kwargs, notes = effective(spec, config_kwargs(spec, int(item["world_size"]), bool(item["gpu"])),
                                  item.get("full_run_steps"))
        out.append({"kwargs": {k: v for k, v in kwargs.items() if _plain(v)}, "notes": notes})
    print(json.dumps(out))
    return 0


def _plain(v: object) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True

if __name__ == "__main__":
    sys.exit(main())
