"""The study's plan, resolved from the study file alone (and the files its earlier stages wrote): pure, no Optuna.

- cells: the planned cells (grid, ablation, racing rounds, a branched study's prefixes), the one default arm
  and the baseline;
- run_plan: all of it, with the trial estimate and the price, resolved once for a run (`StudyPlan`,
  `resolve_plan`);
- branching: the optimizer step a seed's arms branch at from one shared prefix (budget.branch_from);
- price: the study in units of the run it tunes, planned and spent;
- design: what a design of arms x seeds resolves at its price, and the confirm stage `init` fits to a budget.
- draft: the study file `init` drafts from a recipe (or a few answers): its arms, fitted design and text;
- trial_cost: what one trial generates and costs, and the study's GPU-hours, as `plan` shows them.

It sits below the trainer, the launchers, the study and the report: the study runs the plan, and the report
reads what it priced and where its arms branched without importing the study (tests/test_layering.py).
Import what you use from its module: this package's `__init__` imports nothing.
"""
