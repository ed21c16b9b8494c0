"""The `grpo-ablate` subcommands, one room on the top floor: each module reads its arguments,
calls the floors below, prints, and picks the exit status. Nothing below imports from here.

- cli: `main` (the entry point of `grpo-ablate` and `python -m grpo_ablate`) and the parser, built by
  looping over COMMANDS: each command module has `add_parser(sub)` and `run(args)`; common: exit codes,
  the study argument, `--set`;
- run: `run_study` (study/runner.py), then the summary, the report and the exit status;
- run_one: one trial without Optuna; plan: the feasible space, the plan and its cost;
- init: a commented study file; probe and advise: the preflight measurements, printed;
- validate: every check a trial start runs; report: the HTML report and its exports;
- compare: two summaries, the nightly gate; dashboard: optuna-dashboard on the study.
"""
