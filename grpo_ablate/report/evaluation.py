"""Held-out evaluation as the report reads it: a trial's eval.jsonl, its summary, the study's target,
and the censored "... to target" figures.

    python -c "from grpo_ablate.report.evaluation import read_eval, summarize_eval; \
print(summarize_eval(read_eval('runs/tiny-cpu/trials/00000')))"

The rows are those of issue 10's interface (one JSON object per evaluation point: point, step,
completions, generated_tokens, train_seconds, eval_seconds, reward, per_prompt, samples).
The per-trial formulas (summarize_eval, to_target) are grpo_ablate.contract.metrics'; this module adds
what needs the whole study: the target, and the censored figures per arm.

A target-based figure is never averaged over an arm: `CensoredStat` keeps how many seeds reached
it and the median (a real median when more than half reached it, else a lower bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from grpo_ablate.contract.metrics import EVAL_KEYS as EVAL_METRICS
from grpo_ablate.contract.metrics import TARGET_COLUMNS as TARGET_KEYS
from grpo_ablate.contract.metrics import read_jsonl, summarize_eval, to_target
from grpo_ablate.records.trial_record import StudyAttrs
from grpo_ablate.core.vocab import EVAL_FILE, finite

__all__ = ["EVAL_METRICS", "TARGET_KEYS", "DEFAULT_TARGET_FRACTION", "read_eval", "summarize_eval", "to_target",
           "study_has_evaluation", "study_target", "CensoredStat", "censored_stat"]

DEFAULT_TARGET_FRACTION = 0.5  # the interface's default: start + half the baseline's mean held-out gain


def read_eval(trial_dir: str | Path | None) -> tuple[list[dict[str, Any]], int]:
    """The trial's evaluation rows in point order, and how many lines were unreadable."""
    if trial_dir is None:
        return [], 0
    rows, bad = read_jsonl(Path(trial_dir) / EVAL_FILE)
    rows = [r for r in rows if finite(r.get("reward")) is not None]
    rows.sort(key=lambda r: (finite(r.get("point")) or 0.0, finite(r.get("completions")) or 0.0))
    return rows, bad


def study_has_evaluation(study: StudyAttrs, metrics: Iterable[Mapping[str, Any]] = ()) -> bool:
    """The study recorded an evaluation section, or any trial recorded a held-out reward."""
    if study.evaluation is not None:
        return True
    return any(finite(m.get("eval_final_reward")) is not None for m in metrics)


def study_target(evaluation: Mapping[str, Any] | None, baseline_starts: Sequence[float],
                 baseline_gains: Sequence[float]) -> tuple[float | None, str]:
    """The held-out reward every arm must reach, and where it came from (for the page).

    An absolute `target` in the study's evaluation section wins; otherwise the baseline's mean
    start plus `target_fraction` (default 0.5) of its mean gain. None without a baseline gain.
    """
    ev = evaluation or {}
    t = finite(ev.get("target"))
    if t is not None:
        return t, f"the study's target, a held-out reward of {t:g}"
    frac = finite(ev.get("target_fraction"))
    frac = DEFAULT_TARGET_FRACTION if frac is None else frac
    if not baseline_starts or not baseline_gains:
        return None, "no target: the baseline has no held-out gain to take a fraction of"
    start = math.fsum(baseline_starts) / len(baseline_starts)
    gain = math.fsum(baseline_gains) / len(baseline_gains)
    if gain <= 0:
        return None, (f"no target: the baseline's mean held-out gain is {gain:.3g}, so a fraction of it "
                      f"is not progress")
    target = start + frac * gain
    return target, (f"{frac:g} of the baseline's mean held-out gain above its start: "
                    f"{start:.3g} + {frac:g} x {gain:.3g} = {target:.3g}")


@dataclass(frozen=True)
class CensoredStat:
    """One target figure of one arm over its seeds: how many reached the target, and the median.

    `median_is_bound` is True when half or more of the seeds never reached it: the median then
    lies at or beyond the budget, and `median` is a lower bound, not a value.
    """

    n: int
    reached: int
    median: float | None
    median_is_bound: bool
    values: tuple[tuple[float, bool], ...]  # (figure, reached) per seed

    def as_dict(self) -> dict[str, object]:
        return {"n": self.n, "reached": self.reached, "median": self.median, "median_is_lower_bound": self.median_is_bound,
                "values": [{"value": v, "reached": r} for v, r in self.values]}


def censored_stat(values: Iterable[tuple[float | None, bool]]) -> CensoredStat:
    """The median with censored seeds counted as beyond their budget (never as reached)."""
    xs = [(v, bool(r)) for v, r in ((finite(v), r) for v, r in values) if v is not None]
    n = len(xs)
    reached = sum(1 for _, r in xs if r)
    if n == 0:
        return CensoredStat(0, 0, None, False, ())
    # censored values sort after every reached one: their true value is at least the budget
    order = sorted(xs, key=lambda vr: (not vr[1], vr[0]))
    if n % 2:
        v, r = order[n // 2]
        median, bound = v, not r
    else:  # a censored half-point's true value is at least its budget, so the mean is a lower bound
        (a, ra), (b, rb) = order[n // 2 - 1], order[n // 2]
        median, bound = (a + b) / 2, not (ra and rb)
    return CensoredStat(n, reached, median, bound, tuple(xs))
