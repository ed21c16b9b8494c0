"""Where a trial runs: the launcher seam (start, poll, stop, collect) and its two launchers.

- `ProcessLauncher`: a process tree per trial (python, torchrun or accelerate);
- `WarmSession`: consecutive single-process trials in one long-lived child.
`launcher_for(spec)` is the study's choice between them; `Launcher.run` is a trial's whole life.
"""

from .base import Launcher, trial_environment
from .outcome import classify, oom_kill_count, oom_kill_evidence, oom_kill_files, parse_oom_kills
from .process import ProcessLauncher, build_command, kill_tree, launcher_name
from .warm import LAUNCHER_ENV, WarmSession, launcher_for, shares_a_session, warm_by_default
from .watch import MetricsTail, finish, prepare, request_stop, requested_stop

__all__ = [
    "LAUNCHER_ENV",
    "Launcher",
    "MetricsTail",
    "ProcessLauncher",
    "WarmSession",
    "build_command",
    "classify",
    "finish",
    "kill_tree",
    "launcher_for",
    "launcher_name",
    "oom_kill_count",
    "oom_kill_evidence",
    "oom_kill_files",
    "parse_oom_kills",
    "prepare",
    "request_stop",
    "requested_stop",
    "shares_a_session",
    "trial_environment",
    "warm_by_default",
]
