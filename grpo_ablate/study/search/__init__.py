"""How a study searches, and how well: one module per concept.

- encoding.py: arms as Optuna params, each param name spelled once (adaptive: G ordinal, the batch
  conditional on G; planned: G as text or the "GxB" label); seeds are replicates, never params;
- samplers.py: the study's sampler and pruner, for `run` and the benchmark alike;
- fidelity.py: pruning steps counted in generated completions;
Racing is the study's own policy (study/racing.py), and so is warm start (study/warm.py); the plan (plan/cells.py)
gives the pruner each trial's completions.
The benchmark's grid table and its replays of each strategy live with the benchmark
(benchmarks/search_table.py, search_replay.py, driven by benchmarks/search_efficiency.py).
"""
