"""Statistics of seeds: the floor every study policy and the report stand on (stdlib, numpy, scipy, vocab).

    python -c "from grpo_ablate.stats.selection import select; help(select)"

One module per concept, each with one owner:
- seeds: a metric over seeds (mean, t interval), one arm's descriptive interval against the
  baseline (paired over shared seeds, else Welch: `mean_difference`), power and seeds needed;
- model: the one model every answer about arms reads (arm and seed effects, a pooled variance
  floored at the values' rounding error, nothing from fewer than 3 seeds);
- min_effect: study.min_effect's default, per metric;
- selection: the recommendation, P(within min_effect of the best), the eps-best set
  (simultaneous), Bechhofer's indifference-zone sample size;
- multiplicity: Holm's adjustment, so better/worse calls hold a family-wise error;
- spending: group-sequential error spending over a planned race's looks;
- sequential: confidence sequences for open-ended looks (the anytime race);
- zero_spread: the chance that a group of G binary rewards has no spread.
Nothing here knows Optuna, trials or files: values in, numbers out.
"""
