"""What the prompt groups show: prompts ranked by within-group reward variance, the success rate,
and the share of groups a binary reward leaves without spread.

    python -c "from grpo_ablate.stats.zero_spread import zero_spread; print(zero_spread(8, 0.1))"
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from grpo_ablate.report.records import TrialRecord
from grpo_ablate.core.vocab import Arm, Outcome

__all__ = ["PROMPT_COLUMNS", "RANKING_RULE", "prompt_variance", "success_rate", "success_rates_by_arm"]

PROMPT_COLUMNS = ["prompt", "groups", "trials", "mean_reward_var", "max_reward_var", "mean_reward",
                  "mean_distinct_frac", "example_arm", "example_completions", "example_rewards"]
# What the page says about the order; prompt_variance sorts by exactly this.
RANKING_RULE = ("higher mean within-group reward variance first; ties go to the prompt seen in more groups, "
                "then to the higher maximum variance, then alphabetical order of the prompt text")


def prompt_variance(groups: pd.DataFrame) -> pd.DataFrame:
    """Prompts ranked by how much rewards vary within their groups: where the model is unsure.

    Each prompt's score is the mean within-group reward variance over every group it appeared
    in (all trials, all steps); its example completions, their rewards and the arm come from its
    most varied group (the latest such group on a tie). Order: RANKING_RULE.
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
    # row label of each prompt's most varied group; the last one on a tie (later groups keep every completion)
    top = g.iloc[::-1].groupby("prompt", sort=False)["reward_var"].idxmax()
    rows = top.loc[out.index].to_numpy()
    out["example_arm"] = list(g.loc[rows, "arm"]) if "arm" in g else [None] * len(out)
    out["example_completions"] = [list(c) for c in g.loc[rows, "completions"]]
    out["example_rewards"] = ([list(x) if isinstance(x, list) else [] for x in g.loc[rows, "rewards"]]
                              if "rewards" in g else [[] for _ in rows])
    out = out.reset_index()[PROMPT_COLUMNS]
    out[["groups", "trials"]] = out[["groups", "trials"]].astype(int)
    return out.sort_values(["mean_reward_var", "groups", "max_reward_var", "prompt"],
                           ascending=[False, False, False, True], kind="stable").reset_index(drop=True)


def success_rates_by_arm(records: Sequence[TrialRecord], groups: pd.DataFrame,
                         steps: pd.DataFrame) -> dict[Arm, float]:
    """Each arm's own success rate (`success_rate` over its trials), for arms whose rewards look like probabilities.

    Arms at different temperatures or G solve different shares of their prompts, so a zero-spread
    share is judged against the arm's own rate, never one pooled over the study.
    """
    out: dict[Arm, float] = {}
    for arm in sorted({r.config for r in records if r.config is not None}):
        mine = [r for r in records if r.config == arm]
        p, unit = success_rate(mine, groups, steps)
        if p is not None and unit:
            out[arm] = p
    return out


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
