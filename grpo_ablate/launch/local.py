"""What a launcher that runs trials on this host may assume, and a launcher on another node may not.

- the trial's process is this process's descendant: it watches this pid (GRPO_ABLATE_PARENT_PID)
  and ends itself when the orchestrator is gone, and dies with the starting thread
  (children.die_with_parent); it and everything it starts (a reward's setsid or double-forked
  children included) carry this process's tree mark (children.TREE_ENV), and this process's
  tree supervisor SIGKILLs them all once this process is gone, kill -9 included;
- it imports this checkout of the package (PYTHONPATH) and starts in this working folder;
- it shares this process's memory cgroup, so a rise of the cgroup's `oom_kill` count while it
  ran is evidence that the kernel's OOM killer ended it (outcome.py).

A launcher that sends the trial elsewhere (SLURM, Ray, Kubernetes) subclasses `Launcher`
instead: the worker then watches no parent, and out-of-memory evidence is the worker's own
record (result.json), or whatever the scheduler reports, through `Launcher.oom_evidence`.
"""

from __future__ import annotations

import os

from grpo_ablate.core.children import TREE_ENV, importing_this_checkout, tree_token
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.contract.env import PARENT_PID_ENV

from .base import Capabilities, Launcher, trial_environment
from .outcome import oom_kill_count, oom_kill_evidence

__all__ = ["LocalLauncher"]


class LocalLauncher(Launcher):
    """A launcher whose trials are child processes on this host (ProcessLauncher, WarmSession)."""

    capabilities = Capabilities(local_processes=True, cgroup_oom=True, remote=False, auto=True)

    def environment(self, spec: TrialSpec) -> dict[str, str]:
        env = importing_this_checkout(trial_environment(spec))  # the worker imports this package by module name
        env[PARENT_PID_ENV] = str(os.getpid())  # the worker ends its trial when this pid is gone
        env[TREE_ENV] = tree_token()  # and the tree supervisor ends all it started, however it left
        return env

    def oom_marker(self) -> int | None:
        return oom_kill_count()

    def oom_evidence(self, marker: object) -> str | None:
        return oom_kill_evidence(marker if isinstance(marker, int) else None, oom_kill_count())
