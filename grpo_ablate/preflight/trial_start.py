"""Every check a trial start runs that needs no training, for `grpo-ablate validate`.

    grpo-ablate validate study.yaml      # the study file's checks, then these (one child process, ~10-40 s)

A trial start runs, in order, and each refusal used to cost a launch (on a cluster, a queue wait):
1. the study file's own checks (config/validate.py: schema, types as TRL casts them, the feasible
   space, the evaluation section, the inputs): `load_study`, before this module;
2. the trial's plan (study/trial_spec.py `build_spec`): each arm's sections resolved, its batch
   arithmetic;
3. the launcher's refusals (launch/process.py: vLLM server mode serves a model folder or hub id,
   never the built-in model; launch/vllm_server.py needs vLLM where the trial runs);
4. what the trial process builds before the model (trainer/build.py): GRPOConfig from the
   trial's keyword arguments (TRL's own checks), the plan's rounds against TRL's, one reward
   weight per reward; and at the first step, the optimizer class and the learning-rate scheduler
   (trainer/trial_check.py, in a child: the parent never imports torch);
5. vLLM and DeepSpeed importable where the trial uses them.
Loading the model and the prompts and the first generation are left to `grpo-ablate smoke`,
which runs one short CPU trial per arm.

Where the trials run decides what a missing package means: a study for this machine (a CPU
study, or GPUs this machine has, not launched through SLURM) fails on it, so it is a problem; a
study for a node this machine is not (GPUs it lacks, or SLURM) gets a note that the node must
have it, and the way to try the study here (`smoke`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grpo_ablate.core.children import die_with_parent
from grpo_ablate.config import Problem
from grpo_ablate.launch.devices import remote_launcher
from grpo_ablate.plan.cells import baseline_arm, study_plan
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX, Cell

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig
    from grpo_ablate.contract.spec import TrialSpec

__all__ = ["TrialStartReport", "trial_start_checks", "uses_vllm", "uses_deepspeed", "SMOKE_HINT"]

SMOKE_HINT = "to try the study on this machine, `grpo-ablate smoke STUDY` derives its CPU variant"
CHILD_TIMEOUT_S = 600.0


@dataclass
class TrialStartReport:
    """What a trial start would hit: `problems` (it would fail), `notes` (it would fail on this machine, which
    is not where the study runs), and `for_this_machine`."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    for_this_machine: bool = True


def uses_vllm(study: "StudyConfig") -> bool:
    return study.hardware.vllm.mode != "none" or bool(study.trainer.get("use_vllm"))


def uses_deepspeed(study: "StudyConfig") -> bool:
    """A DeepSpeed config in the trainer keys or the accelerate config's file."""
    if study.trainer.get("deepspeed"):
        return True
    path = study.hardware.accelerate_config
    if not path:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            return "deepspeed" in f.read().lower()
    except OSError:
        return False  # config/places.py already said the file is missing


def _cells(study: "StudyConfig") -> list[Cell]:
    """One cell per arm (its first seed), as `plan --commands` shows them; the baseline for an adaptive study."""
    cells = study_plan(study) or [Cell(baseline_arm(study), study.study.seeds[0], "baseline")]
    seen: set[str] = set()
    out = []
    for c in cells:
        if c.arm.key not in seen:
            seen.add(c.arm.key)
            out.append(c)
    return out


def _child(specs: list["TrialSpec"], gpu: bool) -> dict[str, Any]:
    payload = {"specs": [json.loads(s.to_json()) for s in specs], "gpu": gpu}
    out = subprocess.run([sys.executable, "-m", "grpo_ablate.trainer.trial_check"], input=json.dumps(payload),
                         capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                         timeout=CHILD_TIMEOUT_S, preexec_fn=die_with_parent())
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the trial-start check could not run: {tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def trial_start_checks(study: "StudyConfig") -> TrialStartReport:
    """Run steps 2-5 of the module docstring on a study that passed its file's checks."""
    report = TrialStartReport()
    specs: list[tuple[Cell, "TrialSpec"]] = []
    for cell in _cells(study):
        try:
            specs.append((cell, build_spec(study, cell, study.output_dir / "trials" / "validate", timeout=0.0)))
        except Exception as e:  # noqa: BLE001 - every refusal of the plan is the answer
            report.problems.append(Problem(path="trainer", message=(
                f"arm {cell.arm.label}: its trial cannot be planned: {type(e).__name__}: {e}")))

    model = str(study.model.name_or_path)
    if study.hardware.vllm.mode == "server" and model.startswith(BUILTIN_MODEL_PREFIX):
        report.problems.append(Problem(path="hardware.vllm.mode", message=(
            f"vLLM server mode serves a model folder or hub id, and model.name_or_path is {model}: every trial would "
            f"fail at its start; set hardware.vllm.mode: none (and trainer.use_vllm: false), or {SMOKE_HINT}")))

    result: dict[str, Any] = (_child([s for _, s in specs], gpu=bool(study.hardware.gpus)) if specs
                              else {"cuda_devices": 0, "results": []})
    cuda = int(result.get("cuda_devices") or 0)
    gpus = study.hardware.gpus or 0
    report.for_this_machine = not remote_launcher(study) and cuda >= gpus  # the launcher declares it (Capabilities.remote)
    if gpus and cuda < gpus:
        report.notes.append(f"the study names {gpus} GPU(s) per trial and this machine has {cuda}: its trials run on "
                            f"another machine; {SMOKE_HINT}")
    for (cell, _), checked in zip(specs, result.get("results", [])):
        for line in checked.get("problems", []):
            report.problems.append(Problem(path="trainer", message=f"arm {cell.arm.label}: {line}"))

    for used, module, why in ((uses_vllm(study), "vllm", "vLLM generation (trainer.use_vllm / hardware.vllm.mode)"),
                              (uses_deepspeed(study), "deepspeed", "DeepSpeed (the accelerate config)")):
        if not used or importlib.util.find_spec(module) is not None:
            continue
        what = f"{why} needs the `{module}` package, which this environment lacks"
        if report.for_this_machine:
            report.problems.append(Problem(path="hardware.vllm.mode" if module == "vllm" else "hardware.accelerate_config",
                                           message=f"{what}: every trial would fail at its start; install it, or "
                                                   f"{SMOKE_HINT}"))
        else:
            report.notes.append(f"{what}: the machine the trials run on must have it")
    return report
