"""The Optuna study of real GRPO trials: its set-up, its trials' state, their lifecycle, the runner.

    grpo-ablate run studies/tiny-cpu.yaml --workers 2

- setup: open or create the study, its sampler and pruner, the attributes that describe it, the plan's queue;
- ledger: a trial's state in the study (attribute names, queueing a cell, outcome, requeue); every
  other module reads and writes trial state through it;
- trial_spec: a trial process's input (spec.json) from the study and a cell; no Optuna;
- devices: each worker's GPUs, or its share of the host's CPU threads;
- lifecycle: one trial from ask to tell, and the running trials' registry;
- racing: a planned study's race over seeds (group-sequential, or anytime when asked);
- runner: worker threads, the main loop, signals, the exit status;
- console: what `run` prints; artifacts: what the dashboard shows per trial; trackers: report_to per trial.

The names below load their modules on first use, so `grpo_ablate.study.trial_spec` or
`grpo_ablate.study.ledger` can be imported without the runner.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["run_study", "open_study", "library_versions"]

_HOMES = {"run_study": "grpo_ablate.study.runner", "open_study": "grpo_ablate.study.setup",
          "library_versions": "grpo_ablate.study.setup"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
