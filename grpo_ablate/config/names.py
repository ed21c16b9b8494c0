"""What a study names: a built-in task and model, and its rewards (built-in, or module:function).

Names come from grpo_ablate/core/vocab.py, so validation never imports the trainer. A reward's
module is looked up beside the study file (config/load.py rewrites such a name to
`/folder/module:function`), else on the import path the trial will have (the current directory
first), without importing it or its parent packages.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

from grpo_ablate.core.errors import Problem, did_you_mean, echo
from grpo_ablate.core.safe_read import kind_problem
from grpo_ablate.config.schema import RewardSpec, StudyFile
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX, BUILTIN_MODELS, BUILTIN_TASKS, reward_names

__all__ = ["UNCHECKED_PACKAGES", "check_names", "check_reward", "module_findable", "module_spec"]


# Packages a cluster's trial machine provides that a laptop often lacks: a reward from one of them
# that is not installed here is a warning ("cannot be checked here"), so the study still plans.
UNCHECKED_PACKAGES = {"open_r1": "pip install open-r1 (and the code sandbox its code rewards call)"}


def module_findable(dotted: str, folder: str | None = None) -> bool:
    """Whether `import dotted` would find a module (in `folder` first), checked without executing any of it."""
    return module_spec(dotted, folder) is not None


def module_spec(dotted: str, folder: str | None = None) -> "importlib.machinery.ModuleSpec | None":
    """The spec `import dotted` would use (its origin is the source file), found without executing any of it."""
    parts = dotted.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    spec = importlib.machinery.PathFinder.find_spec(parts[0], [folder]) if folder else None
    if spec is None:
        try:
            spec = importlib.util.find_spec(parts[0])  # a top-level name: no import
        except (ImportError, ValueError):
            spec = None
    if spec is None:  # the trial runs `python -m` in the current directory: that is on its path
        spec = importlib.machinery.PathFinder.find_spec(parts[0], [os.getcwd(), *sys.path])
    for i in range(1, len(parts)):
        name = ".".join(parts[: i + 1])
        if ".".join(parts[:i]) in sys.modules:  # already imported (os.path): asking costs nothing
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                return None
            continue
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, list(locations))
    return spec


def check_reward(name: str, path: str) -> list[Problem]:
    if ":" in name:
        module, _, function = name.partition(":")
        if not module or not function:
            return [Problem(path=path, message=f"expected package.module:function, got {echo(name)}")]
        folder, _, dotted = module.rpartition("/")  # a module beside the study file (config/load.py)
        if folder:
            source = Path(folder) / f"{dotted.split('.')[0]}.py"
            kind = kind_problem(source)
            return [] if module_findable(dotted, folder) and kind is None else [Problem(path=path, message=(
                f"the reward module {echo(str(source))} {kind}" if kind else
                f"module {echo(dotted)} not found in {echo(folder)}"))]
        if module.split(".")[0] in UNCHECKED_PACKAGES and not module_findable(module):
            return []  # not installed here: config/inputs.py says so as a warning; the trial machine needs it
        if not module_findable(module):
            return [Problem(path=path, message=(
                f"module {echo(module)} not found on the import path (the current directory, then PYTHONPATH "
                f"and site-packages); check its spelling, or run from its folder or add it to PYTHONPATH"))]
        return []
    names = reward_names()
    if name not in names:
        return [Problem(path=path, message=f"unknown reward {echo(name)}{did_you_mean(name, names)}; "
                                           f"built-in rewards: {names}, or package.module:function")]
    return []


def check_names(sf: StudyFile) -> list[Problem]:
    problems: list[Problem] = []
    task = sf.data.task
    tasks = sorted(BUILTIN_TASKS)
    if task is not None and task not in BUILTIN_TASKS:
        problems.append(Problem(path="data.task", message=f"unknown built-in task {echo(task)}"
                                                          f"{did_you_mean(task, tasks)}; built-in tasks: {tasks}"))
    for i, r in enumerate(sf.rewards):
        problems += check_reward(r.name if isinstance(r, RewardSpec) else r, f"rewards.{i}")
    model = sf.model.name_or_path
    if model.startswith(BUILTIN_MODEL_PREFIX):
        models = sorted(BUILTIN_MODELS)
        if model not in BUILTIN_MODELS:
            problems.append(Problem(path="model.name_or_path", message=(
                f"unknown built-in model {echo(model)}{did_you_mean(model, models)}; "
                f"built-in models: {models}, or a hub id or a local folder")))
        # with data.dataset: a tiny model over the dataset's own characters, a CPU smoke test of one's own
        # data and rewards (trainer/builtin/model.py)
    return problems
