"""Run-to-run timing noise: whether a time-based metric can separate the arms at all.

Seeds of one configuration do the same work, so the spread of their training seconds per step
is the machine's noise. When it is as large as the differences between arms on a time-based
metric (reward per hour, samples/s), the verdict (report/verdict.py, rule 1) compares on the
metric's token-based twin instead, and the report says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from grpo_ablate.report.arms import ArmSummary
from grpo_ablate.report.records import TrialRecord
from grpo_ablate.stats.seeds import coefficient_of_variation
from grpo_ablate.core.vocab import METRICS, Outcome, finite, metric

__all__ = ["TIME_TWINS", "TimingNoise", "timing_noise"]

# Time-based metrics and their token-based twins (vocab.Metric.time_based / .twin).
TIME_TWINS: dict[str, str | None] = {n: m.twin for n, m in METRICS.items() if m.time_based}


@dataclass(frozen=True)
class TimingNoise:
    """Run-to-run timing noise against the differences between arms on a time-based metric.

    `cv` is the root mean square, over arms with two or more completed seeds, of the coefficient
    of variation of training seconds per step among the arm's seeds (same work, different time).
    `arm_spread` is the largest relative difference of an arm's mean from the baseline's on
    `metric`. `exceeds` when cv >= arm_spread: the time-based metric cannot separate the arms.
    """

    cv: float
    arm_spread: float | None
    metric: str
    exceeds: bool
    twins: tuple[str, ...] = ("reward_per_million_tokens",)  # the token-based metrics to compare on instead

    @property
    def words(self) -> str:
        twin = list(self.twins)
        spread = f"{self.arm_spread * 100:.0f}%" if self.arm_spread is not None else "unknown"
        return (f"Run-to-run timing noise ({self.cv * 100:.0f}%: the spread of training seconds per step among "
                f"seeds of the same configuration) is larger than the differences between configurations on "
                f"{metric(self.metric).label} ({spread} at most), so time-based metrics (reward per hour, "
                f"held-out gain per hour, samples/s) cannot separate the configurations here. Compare them on "
                f"the token-based twin{'s' if len(twin) > 1 else ''} instead: {', '.join(twin)}.")

    def as_dict(self) -> dict[str, Any]:
        return {"cv": self.cv, "arm_spread": self.arm_spread, "metric": self.metric, "exceeds": self.exceeds,
                "twins": list(self.twins), "words": self.words if self.exceeds else None}


def timing_noise(records: Sequence[TrialRecord], arms: Sequence[ArmSummary], time_metric: str,
                 has_eval: bool = False) -> TimingNoise | None:
    """None when no arm has two completed seeds with training times."""
    cvs = []
    for a in arms:
        per_step = []
        for r in records:
            if r.config != a.config or r.outcome != Outcome.COMPLETED.value:
                continue
            secs, steps = finite(r.metrics.get("train_seconds")), finite(r.metrics.get("steps"))
            if secs is not None:
                per_step.append(secs / steps if steps else secs)
        cv = coefficient_of_variation(per_step)
        if cv is not None:
            cvs.append(cv)
    if not cvs:
        return None
    cv = math.sqrt(math.fsum(c * c for c in cvs) / len(cvs))
    base = next((a for a in arms if a.is_baseline), None)
    spread = None
    if base is not None and time_metric in base.metrics and base.metrics[time_metric].mean:
        bm = base.metrics[time_metric].mean
        rel = [abs((a.metrics[time_metric].mean - bm) / bm) for a in arms  # type: ignore[operator]
               if not a.is_baseline and time_metric in a.metrics and a.metrics[time_metric].mean is not None]
        spread = max(rel) if rel else None
    twins = tuple(dict.fromkeys(t for t in (TIME_TWINS.get(time_metric), "reward_per_million_tokens",
                                            "eval_gain_per_million_tokens" if has_eval else None) if t))
    return TimingNoise(cv, spread, time_metric, spread is not None and cv >= spread, twins)
