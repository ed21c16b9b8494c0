"""What the prompt groups show: prompts ranked by within-group reward variance, the success rate,
and the share of groups a binary reward leaves without spread.

    python -c "from grpo_ablate.report.groups import zero_spread_probability as z; print(z(0.1, 8))"
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from grpo_ablate.report.records import TrialRecord
from grpo_ablate.vocab import Outcome

__all__ = ["PROMPT_COLUMNS", "prompt_variance", "success_rate", "zero_spread_probability"]

PROMPT_COLUMNS = ["prompt", "groups", "trials", "mean_reward_var", "max_reward_var", "mean_reward",
                  "mean_distinct_frac", "example_completions"]


def zero_spread_probability(p: float, num_generations: int) -> float:
    """Chance that G samples of a binary reward with success rate p all agree: p^G + (1-p)^G."""
    return p**num_generations + (1 - p) ** num_generations


def prompt_variance(groups: pd.DataFrame) -> pd.DataFrame:
    """Prompts ranked by how much rewards vary within their groups: where the model is unsure.

    Each prompt's score is the mean within-group reward variance over every group it appeared
    in (all trials, all steps); its example completions come from its most varied group.
    """
    if groups.empty or "reward_var" not in groups:
        return pd.DataFrame(columns=PROMPT_COLUMNS)
    g = groups[groups["reward_var"].notna()]
    if g.empty:
        return pd.DataFrame(columns=PROMPT_COLUMNS)
    by = g.groupby("prompt", sort=False)
    out = by.agg(
        groups=("reward_var", "size"),
        trials=("trial", "nunique"),
        mean_reward_var=("reward_var", "mean"),
        max_reward_var=("reward_var", "max"),
        mean_reward=("reward_mean", "mean"),
        mean_distinct_frac=("distinct_frac", "mean"),
    )
    top = by["reward_var"].idxmax()  # row label of each prompt's most varied group
    out["example_completions"] = [list(c) for c in g.loc[top.loc[out.index].to_numpy(), "completions"]]
    out = out.reset_index()[PROMPT_COLUMNS]
    out[["groups", "trials"]] = out[["groups", "trials"]].astype(int)
    return out.sort_values(["mean_reward_var", "groups", "prompt"], ascending=[False, False, True],
                           kind="stable").reset_index(drop=True)


def success_rate(records: Sequence[TrialRecord], groups: pd.DataFrame, steps: pd.DataFrame) -> tuple[float | None, bool]:
    """The mean reward of completed trials, as the success rate p of a binary reward.

    Returns (p, in_unit_range); p is clipped to [0, 1] and in_unit_range says whether the
    rewards looked like probabilities at all (the p^G + (1-p)^G curve assumes they do).
    """
    done = {r.number for r in records if r.outcome == Outcome.COMPLETED.value}
    vals: pd.Series
    if not groups.empty and "reward_mean" in groups:
        vals = groups.loc[groups["trial"].isin(done), "reward_mean"].dropna()
    else:
        vals = pd.Series(dtype=float)
    if vals.empty and not steps.empty and "reward" in steps:
        vals = pd.to_numeric(steps.loc[steps["trial"].isin(done), "reward"], errors="coerce").dropna()
    if vals.empty:
        return None, False
    p = float(vals.mean())
    unit = bool(vals.min() >= 0 and vals.max() <= 1)
    return min(1.0, max(0.0, p)), unit
