"""What a trial's environment and command line carry from parent to child: the variable names, flags and log prefixes
both sides read, and the environment every launcher must set before the child process starts.

The parent (launch/, preflight/) sets or reads them; the child (trainer/) reads or writes them. Defined here so
neither side imports the other for a name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX

from .spec import TrialSpec

__all__ = ["LAUNCHED_AT_ENV", "PARENT_PID_ENV", "PROGRESS_PREFIX", "TEMPLATE_FLAG", "command_env", "forced_environment"]

PARENT_PID_ENV = "GRPO_ABLATE_PARENT_PID"  # the orchestrator's pid: the trial ends when it is gone
LAUNCHED_AT_ENV = "GRPO_ABLATE_LAUNCHED_AT"  # time.time() at launch, for startup_seconds
TEMPLATE_FLAG = "--template"  # `python -m grpo_ablate.trainer.session --template`: forks sessions
PROGRESS_PREFIX = "[advise]"  # the sampling child's log lines the parent (preflight/advise.py) echoes as progress


def forced_environment(spec: TrialSpec) -> dict[str, str]:
    """What a trial's environment holds whatever its parent's says: offline for the built-in demo.

    The launcher puts it into the trial's environment before the process starts, because
    huggingface_hub reads HF_HUB_OFFLINE once, at import: a warm session imports before its
    first trial, so setting it later would leave the session online where a fresh process is not.
    """
    if str(spec.model.name_or_path).startswith(BUILTIN_MODEL_PREFIX) and spec.data.task:
        return {"HF_HUB_OFFLINE": "1"}  # the built-in demo never touches the network
    return {}


def command_env(env: Mapping[str, str], spec: TrialSpec, package_root: str) -> dict[str, str]:
    """A command trial's environment (the user's own script): the trial's, with script.python's folder first on PATH
    (its `accelerate` and `python` are found), and this package's folder off PYTHONPATH (the script's environment
    has its own packages; ours is not one of them)."""
    out = dict(env)
    path = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != package_root]
    if path:
        out["PYTHONPATH"] = os.pathsep.join(path)
    else:
        out.pop("PYTHONPATH", None)
    python = spec.script.python if spec.script else None
    if python:
        bindir = os.fspath(Path(python).parent)
        out["PATH"] = os.pathsep.join([bindir, *[p for p in out.get("PATH", "").split(os.pathsep) if p and p != bindir]])
        out["VIRTUAL_ENV"] = os.fspath(Path(bindir).parent)
    return out
