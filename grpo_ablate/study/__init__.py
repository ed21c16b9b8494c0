"""The Optuna study of real GRPO trials: set-up, devices, one trial lifecycle, the runner.

    grpo-ablate run studies/tiny-cpu.yaml --workers 2

- setup: open or create the study, its sampler and pruner, the attributes that describe it;
- devices: each worker's GPUs, or its share of the host's CPU threads;
- lifecycle: one trial from ask to tell (and requeue);
- runner: worker threads, the main loop, signals, the exit status;
- console: what `run` prints; artifacts: what the dashboard shows per trial.
"""

from grpo_ablate.study.runner import run_study
from grpo_ablate.study.setup import library_versions, open_study

__all__ = ["run_study", "open_study", "library_versions"]
