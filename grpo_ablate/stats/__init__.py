"""Statistics of seeds: the floor every study policy and the report stand on (stdlib, numpy, scipy, vocab).

    python -c "from grpo_ablate.stats.selection import select; help(select)"

One module per concept, each with one owner:
- seeds: a metric over seeds (mean, t interval), one arm's descriptive interval against the
  baseline (paired over shared seeds, else Welch: `mean_difference`), power and seeds needed;
- model: the one model every answer about arms reads (arm and seed effects, each contrast its own
  variance moderated toward the pooled one and floored at the values' rounding error, nothing from
  fewer than 3 seeds);
- min_effect: study.min_effect's default, per metric;
- selection: the one recommendation, P(within min_effect of the best) (a model posterior), the
  eps-best set (simultaneous), the design's guarantee and Bechhofer's indifference-zone sample size;
- calls: better / worse / equivalent against a reference, one family with the page's other statements;
- multiplicity: Holm's adjustment with Shaffer's count, and a split of one alpha between families;
- elimination: Kim & Nelson's fully sequential race (KN++), its equivalence stop, the seeds it spends;
- bounded: a 95% interval for a bounded mean, inside its bounds;
- spending: group-sequential error spending over a planned race's looks;
- sequential: confidence sequences for open-ended looks (the anytime race);
- zero_spread: the chance that a group of G binary rewards has no spread.
Nothing here knows Optuna, trials or files: values in, numbers out.
"""
