"""study.min_effect's default: the smallest difference in a metric worth acting on, per metric.

    python -c "from grpo_ablate.stats.min_effect import default_min_effect; print(default_min_effect('eval_final_reward'))"

The one place the default is defined (config leaves study.min_effect None; the verdict, the race
and the benchmarks ask here). Why 0.05 of a reward: on the built-in tasks (rewards in [0, 1]) the
seed-to-seed spread of the held-out reward is 0.05-0.08 (benchmarks/data, 40 seeds), so a
difference below 0.05 is smaller than one seed's noise, needs well over 12 paired seeds to
resolve, and is five points of accuracy, about what a practitioner would trade for a cheaper G.
0.02 (the old default) asked the study for differences its seeds cannot settle: the race ran to
the last seed and the answer was "undecided". The default is per metric, never the reward's
scale applied to another quantity:
- a reward-valued metric (unit "reward": held-out reward, gain, AUC, training reward): 0.05,
  which assumes a reward in [0, 1] (set study.min_effect for another scale);
- a metric with a known range (vocab's low and high): 5% of that range;
- anything else (per hour, per token, seconds, memory): 5% of the reference arm's |mean|
  (the baseline, or the best arm without one); None without a reference.
"""

from __future__ import annotations

from grpo_ablate.core.vocab import METRICS, Metric

__all__ = ["DEFAULT_SHARE", "REWARD_MIN_EFFECT", "default_min_effect"]

REWARD_MIN_EFFECT = 0.05  # of a reward in [0, 1]: one seed's spread on the built-in tasks
DEFAULT_SHARE = 0.05  # of a metric's range, or of the reference's |mean| when it has no range


def default_min_effect(metric: str | Metric, reference: float | None = None) -> float | None:
    """The default min_effect of `metric` (see the module docstring); `reference`: the reference arm's mean."""
    m = metric if isinstance(metric, Metric) else METRICS.get(metric)
    if m is not None and m.unit == "reward":
        return REWARD_MIN_EFFECT
    if m is not None and m.low is not None and m.high is not None:
        return DEFAULT_SHARE * (m.high - m.low)
    if reference is not None and reference != 0:
        return DEFAULT_SHARE * abs(reference)
    return None
