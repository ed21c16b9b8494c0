"""What `run` would start for each arm, without starting it (`grpo-ablate plan --commands`, a dry run): the
vLLM server's and the training launch's command lines, the environment each is started with, and the GRPOConfig
keyword arguments the trial runs with, computed by the trial's own code in one child process
(trainer/dry_run.py), so the parent never imports torch.

    grpo-ablate plan studies/tiny-cpu.yaml --commands --json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from grpo_ablate.core.child_processes import die_with_parent
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.launch import describe_launch
from grpo_ablate.launch.devices import worker_envs
from grpo_ablate.launch.launch_env import launch_environment
from grpo_ablate.plan.cells import baseline_arm, study_plan
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.contract.command import command_line, script_problem
from grpo_ablate.core.vocab import Cell

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["launch_plan"]


def launch_plan(study: "StudyConfig") -> list[dict[str, Any]]:
    """Per arm (its first seed), what `run` would start, without starting it: the vLLM server's command line
    (server mode), the training launch command line (a command trial: also the user's own command with the
    trial's overrides), the environment each is started with (launch/launch_env.py, the launcher's own code:
    the GPU split included), and the GRPOConfig keyword arguments the trial runs with (trainer/dry_run.py:
    computed by the trial's own code in one child process, the parent never imports torch; the checkpoint
    cadence and learning-rate schedule as the worker decides them)."""
    cells = study_plan(study)
    if not cells:
        cells = [Cell(baseline_arm(study), study.study.seeds[0], "baseline")]
    # the first worker's devices on a node with the study's GPUs (the runner's own rule, devices.worker_envs)
    node = worker_envs(study, 1, gpus=[str(i) for i in range(int(study.hardware.gpus or 0))])[0] \
        if study.hardware.gpus else worker_envs(study, 1, gpus=[])[0]
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    for cell in cells:
        if cell.arm.key in seen:
            continue
        seen.add(cell.arm.key)
        trial_dir = study.output_dir / "trials" / "<n>"
        spec = build_spec(study, cell, trial_dir, dict(node))
        row: dict[str, Any] = {"role": cell.role, "arm": cell.arm.label, "seed": cell.seed}
        row["environment"] = launch_environment(spec)
        row.update(describe_launch(spec, trial_dir / "spec.json"))  # the launcher's own lines (vllm_server, launch)
        if spec.script is not None:
            problem = script_problem(spec)
            row["script"] = command_line(spec) if problem is None else None
            row["script_problem"] = problem
        row["spec"] = json.loads(spec.to_json())
        rows.append(row)
    full = estimate_trial(study).full_run_steps
    payload = [{"spec": r.pop("spec"), "world_size": study.world_size, "gpu": bool(study.hardware.gpus),
                "full_run_steps": full} for r in rows]
    out = subprocess.run([sys.executable, "-m", "grpo_ablate.trainer.dry_run"], input=json.dumps(payload),
                         capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                         preexec_fn=die_with_parent())
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"could not compute the trials' GRPOConfig arguments: {tail}")
    for row, computed in zip(rows, json.loads(out.stdout.strip().splitlines()[-1])):
        if "script" in row:  # the script builds its own GRPOConfig on its own TRL: its overrides are the line
            continue
        row["grpo_config"], row["grpo_config_notes"] = computed["kwargs"], computed["notes"]
    return rows
