"""What a trial's processes find in their environment, as the launcher sets it: one function for `run` and the dry run.

    grpo-ablate plan study.yaml --commands     # prints these, per role, for each arm

`launch_environment(spec)` asks the launcher chosen for the spec (registry.launcher_name) for the trial's
environment (Launcher.environment: trial_environment, the local launchers' additions), splits the GPUs
between training and the vLLM server as server mode does (vllm_server.gpu_split, server_environments),
and for a command trial adds what the user's script gets (contract/command.py command_env). It returns,
per role, every variable that differs from this process's environment: what the launcher sets. The
values that only exist once a trial starts (its launch time, the orchestrator's pid, the process tree's
mark) are the keys of VOLATILE: their values are the dry run's own.
"""

from __future__ import annotations

import os
from typing import Mapping

from grpo_ablate.core.child_processes import PACKAGE_ROOT, TREE_ENV
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.contract.env import LAUNCHED_AT_ENV, PARENT_PID_ENV, command_env

from .registry import LAUNCHERS, launcher_name
from .vllm_server import gpu_split, server_environments

__all__ = ["VOLATILE", "launch_environment"]

VOLATILE = (LAUNCHED_AT_ENV, PARENT_PID_ENV, TREE_ENV)


def _changes(env: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if base.get(k) != v}


def launch_environment(spec: TrialSpec) -> dict[str, dict[str, str]]:
    """{role: the variables the launcher sets for it}: "training" (the trial's processes), "vllm_server" (server
    mode), "script" (a command trial's own command)."""
    base = dict(os.environ)
    env = LAUNCHERS[launcher_name(spec)]().environment(spec)
    out: dict[str, dict[str, str]] = {}
    if (spec.hardware.vllm.mode or "none") == "server":
        train_gpus, serve_gpus = gpu_split(spec.hardware, env)
        env, server = server_environments(env, train_gpus, serve_gpus)
        out["vllm_server"] = _changes(server, base)
    out["training"] = _changes(env, base)
    if spec.script is not None:
        out["script"] = _changes(command_env(env, spec, PACKAGE_ROOT), base)
    return out
