"""Where a trial runs: the launcher seam (start, poll, stop, collect), its launchers, and the one choice among them.

- `ProcessLauncher` ("process"): a process tree per trial (python, torchrun or accelerate);
- `WarmSession` ("warm"): each single-process trial in a fresh fork of a template that did the
  imports once (template.py, trainer/session.py), thrown away after the trial;
- `SlurmLauncher` ("slurm"): each trial a SLURM batch job submitted from this host (slurm.py);
- `LAUNCHERS` (registry.py) names them for `hardware.launcher`; `launcher_name(spec)` chooses,
  `launcher_for` (a study's worker thread), `LauncherPool` (the probe) and `run_trial`
  (run-one, tests) run what it chose. `Launcher.run` is a trial's whole life; `reclaim_trial`
  ends what a dead orchestrator's trial left running (a SLURM job) before it is queued again.
"""

from .base import Capabilities, Launcher, trial_environment
from .local import LocalLauncher
from .outcome import classify, oom_kill_count, oom_kill_evidence, oom_kill_files, parse_oom_kills
from .process import ProcessLauncher, build_command, command_name, kill_tree
from .slurm import SlurmLauncher
from .registry import (LAUNCHER_ENV, LAUNCHERS, LauncherPool, describe_launch, launcher_for, launcher_name, lend_launchers,
                       reclaim_trial, release_thread_launchers, run_trial)
from .warm import WarmSession, shares_a_session
from .watch import MetricsTail, finish, prepare, request_stop, requested_stop

__all__ = [
    "Capabilities",
    "LAUNCHERS",
    "LAUNCHER_ENV",
    "Launcher",
    "LauncherPool",
    "LocalLauncher",
    "MetricsTail",
    "ProcessLauncher",
    "SlurmLauncher",
    "WarmSession",
    "build_command",
    "classify",
    "command_name",
    "describe_launch",
    "finish",
    "kill_tree",
    "launcher_for",
    "launcher_name",
    "lend_launchers",
    "oom_kill_count",
    "oom_kill_evidence",
    "oom_kill_files",
    "parse_oom_kills",
    "prepare",
    "reclaim_trial",
    "release_thread_launchers",
    "request_stop",
    "requested_stop",
    "run_trial",
    "shares_a_session",
    "trial_environment",
]
