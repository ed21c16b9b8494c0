"""A command trial's command line: the user's own training script, with the trial as its own overrides.

    script: {command: "accelerate launch --num_processes 7 src/open_r1/grpo.py --config {recipe}",
             python: /opt/openr1-venv/bin/python}

A script written the way Open R1's `grpo.py` is (TRL's `TrlParser` over GRPOConfig, its script arguments
and ModelConfig) reads `--config FILE` first and lets every later `--key value` override it. So a trial is
the user's command plus its values in that syntax: the arm's searched knobs, its seed, its length
(max_steps), its output folder, its checkpoint cadence, per-step logging, its trackers, and the
GRPOConfig keys the study file itself sets (never the recipe's: the script reads the recipe itself, on
its own TRL, with that TRL's defaults). The hub push and the recipe's own evaluation are turned off:
a trial is not a release, and the study scores its checkpoints itself (trainer/checkpoint_eval.py).

Pure (no torch, no TRL): the dry run (`plan --commands`) and the command worker (trainer/command_worker.py)
call the same functions, so what the plan prints is what runs.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from pathlib import Path
from typing import Any

from grpo_ablate.core.schedule import Schedule

from .cadence import interval_steps
from .files import trainer_dir
from .spec import TrialSpec

__all__ = ["ENV_LAUNCHERS", "KEEP_EVERY_CHECKPOINT", "command_line", "eval_steps", "overrides",
           "save_every", "script_problem"]

# A leading word the script's environment provides: run from that environment's bin folder.
ENV_LAUNCHERS = ("accelerate", "torchrun", "trl", "deepspeed")
# save_total_limit for a trial: the worker seals each checkpoint out of the trainer's folder itself, and a
# recipe's small limit (Open R1's 1) would let the trainer delete one before it is sealed. TRL's parser
# takes no "None" for an int field, so "every one" is written as a number no run reaches.
KEEP_EVERY_CHECKPOINT = 1_000_000


def script_problem(spec: TrialSpec) -> str | None:
    """Why `spec` cannot run as a command trial; None when it can."""
    if spec.script is None:
        return "not a command trial (no script section)"
    if isinstance(spec.num_generations, Schedule):
        return (f"num_generations {spec.num_generations.label}: a G that changes during the run needs the built-in "
                "trainer (a script gets one --num_generations)")
    if spec.start_from is not None:
        return "branching (budget.branch_from) needs the built-in trainer"
    return None


def save_every(spec: TrialSpec) -> int | None:
    """Optimizer steps between the trainer's checkpoints: the study's checkpoint interval, and at least as
    often as the held-out evaluation points (each is scored on the checkpoint at its step); None: no saves."""
    steps = int(spec.max_steps or 0)
    if steps <= 0:
        return None
    rounds = max(1, spec.rounds.period_steps)
    every = spec.checkpoint.every if spec.checkpoint else None
    candidates = []
    interval = interval_steps(every, steps, rounds) if every is not None else None
    if interval:
        candidates.append(interval)
    points = spec.evaluation.points if spec.evaluation else 0
    if points > 0:
        spacing = max(rounds, math.ceil(steps / (points + 1) / rounds) * rounds)
        if spacing < steps:
            candidates.append(spacing)
    return min(candidates) if candidates else None


def eval_steps(spec: TrialSpec) -> list[int]:
    """The steps whose checkpoints the held-out evaluation scores between its start (the base model, step 0)
    and its end (the final model): the saved step nearest each k/(points+1) of the run, k = 1..points."""
    if not spec.evaluation or not spec.max_steps:
        return []
    steps, every = int(spec.max_steps), save_every(spec)
    points = spec.evaluation.points
    if not every or points <= 0:
        return []
    out: list[int] = []
    for k in range(1, points + 1):
        target = steps * k / (points + 1)
        step = max(every, int(round(target / every)) * every)
        if step < steps and step not in out:
            out.append(step)
    return out


def _text(value: Any) -> list[str]:
    """A value as HfArgumentParser reads it: booleans as true/false, lists as several words, dicts as JSON."""
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, (list, tuple)):
        return [w for v in value for w in _text(v)]
    if isinstance(value, dict):
        return [json.dumps(value)]
    return [str(value)]


def overrides(spec: TrialSpec, *, resume_from: str | None = None, transformers: str | None = None) -> dict[str, Any]:
    """The trial's values for the script, by GRPOConfig name (later keys win), in the order they are passed.

    `transformers`: the script environment's version, where known (the command worker asks it): before 5 the
    TensorBoard callback writes to `logging_dir`, not to TENSORBOARD_LOGGING_DIR, so the trial's folder goes there."""
    assert spec.script is not None
    values: dict[str, Any] = dict(spec.script.trainer or {})  # the study file's own trainer keys
    if spec.num_generations is not None:
        values["num_generations"] = int(spec.num_generations)  # type: ignore[arg-type]  # schedules refused
    for key in ("temperature", "generation_batch_size", "seed"):
        if spec.trainer.get(key) is not None:
            values[key] = spec.trainer[key]
    if spec.max_steps:
        values["max_steps"] = int(spec.max_steps)
    values["output_dir"] = os.fspath(trainer_dir(spec.trial_dir))
    values.update(logging_strategy="steps", logging_steps=1, disable_tqdm=True, push_to_hub=False, eval_strategy="no")
    every = save_every(spec)
    if every:
        values.update(save_strategy="steps", save_steps=every, save_total_limit=KEEP_EVERY_CHECKPOINT, save_only_model=False)
    else:
        values["save_strategy"] = "no"
    trackers = spec.trainer.get("report_to")
    values["report_to"] = list(trackers) if isinstance(trackers, (list, tuple)) and trackers else (trackers or "none")
    if spec.trainer.get("run_name"):
        values["run_name"] = spec.trainer["run_name"]
    board = spec.env.get("TENSORBOARD_LOGGING_DIR")
    major = transformers.split(".")[0] if transformers else ""
    if board and major.isdigit() and int(major) < 5 and "tensorboard" in (values["report_to"] or []):
        values["logging_dir"] = board
    if resume_from is not None:
        values["resume_from_checkpoint"] = os.fspath(resume_from)
    return values


def command_line(spec: TrialSpec, *, resume_from: str | None = None, transformers: str | None = None) -> list[str]:
    """The argv of the user's command for this trial: `{recipe}` filled, the leading word taken from
    script.python's environment, then `--key value` for every override."""
    assert spec.script is not None
    recipe = spec.script.recipe or ""
    words = [w.replace("{recipe}", recipe) for w in shlex.split(str(spec.script.command))]
    if not words:
        raise ValueError("script.command is empty")
    python = spec.script.python
    if python:
        bindir = Path(python).parent
        if words[0] in ("python", "python3"):
            words[0] = os.fspath(python)
        elif words[0] in ENV_LAUNCHERS and (bindir / words[0]).exists():
            words[0] = os.fspath(bindir / words[0])
    for key, value in overrides(spec, resume_from=resume_from, transformers=transformers).items():
        words += [f"--{key}", *_text(value)]
    return words


