"""The Optuna study of real GRPO trials: its set-up, its trials' state, their lifecycle, the runner.

    grpo-ablate run studies/tiny-cpu.yaml --workers 2

- the plan it runs (cells, branching, price, design) is grpo_ablate/plan/, a floor below;
- search/: how the study searches: arm encoding (ordinal G, conditional batch), the sampler and pruner,
  pruning at equal generated compute, the race's fidelity check;
- setup: open or create the study, its sampler and pruner, the attributes that describe it, the plan's queue;
- ledger: every write of a trial's state (queueing a cell, telling, requeue); the attribute names
  and their reads are the trial-record schema's (grpo_ablate/records/trial_record.py), re-exported here;
- trial_spec: a trial process's input (spec.json) from the study and a cell; no Optuna;
- lifecycle: one trial from ask to tell, and the running trials' registry;
- racing: a planned study's race over seeds (group-sequential, elimination, or anytime when asked); what a
  race stores and how it is read are grpo_ablate/records/race_record.py's;
- runner: worker threads, the main loop, signals; `run_study` returns how the run ended (`StudyRun`),
  and the command (commands/run.py) prints it and picks the exit status;
- warm: `run --warm-start`, seeding a new study from a finished one's best arms;
- console: what `run` prints; artifacts: what the dashboard shows per trial; trackers: report_to per trial.

Import what you use from its module (`grpo_ablate.study.runner.run_study`): this package's
`__init__` imports nothing, so `grpo_ablate.study.ledger` or `trial_spec` load without the runner.
"""
