"""Run one trial in a process of its own: the entry point the rest of the package calls.

The parent side of a trial: no torch here, so the orchestrator's memory stays flat over
hundreds of trials. The machinery is the launcher seam in trainer/launchers/ (start, poll,
stop, collect; a process per trial or a warm session); this module keeps the short names the
study, run-one, probe and the benchmarks import.

    python -m grpo_ablate.trainer.launch runs/x/trials/00000/spec.json    # re-run a trial from its spec
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, Callable

from ..vocab import Outcome
from .launchers import (ProcessLauncher, build_command, oom_kill_count, oom_kill_files, parse_oom_kills, request_stop,
                        requested_stop)
from .launchers.base import POLL_SECONDS, STOP_GRACE_SECONDS
from .spec import TrialResult, TrialSpec

__all__ = [
    "TrialResult",
    "build_command",
    "oom_kill_count",
    "oom_kill_files",
    "parse_oom_kills",
    "request_stop",
    "requested_stop",
    "run_trial",
]


def run_trial(
    spec: TrialSpec,
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    stop_event: threading.Event | None = None,
    poll_seconds: float = POLL_SECONDS,
    stop_grace_s: float = STOP_GRACE_SECONDS,
) -> TrialResult:
    """Run one trial in a fresh process tree to its end and classify it (Launcher.run says how)."""
    return ProcessLauncher().run(spec, on_progress=on_progress, stop_event=stop_event, poll_seconds=poll_seconds,
                                 stop_grace_s=stop_grace_s)


def _main(argv: list[str] | None = None) -> int:
    """`python -m grpo_ablate.trainer.launch spec.json`: re-run a trial from its spec."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.launch <trial_dir>/spec.json", file=sys.stderr)
        return 2
    spec = TrialSpec.load(argv[0])
    result = run_trial(spec, on_progress=lambda row: print(json.dumps({k: row.get(k) for k in ("step", "train_seconds", "reward")})))
    print(json.dumps({k: v for k, v in result.to_dict().items() if k != "log_tail"}, indent=2, default=str))
    return 0 if result.outcome is Outcome.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(_main())
