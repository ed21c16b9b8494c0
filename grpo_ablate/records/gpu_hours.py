"""What a study's trials spent: wall seconds, the slowest completed trial, and the GPU-hour budget.

    grpo-ablate run studies/tiny-cpu.yaml --set study.budget_gpu_hours=2 --set hardware.gpus=1

Read from the trial records alone (trial_record.py), so the runner (study/runner.py, which stops
before a trial would cross the budget) and the report (its header line, summary.json) count the
same way. The budget counts what every attempt of every trial held its GPUs for (finished,
failed, interrupted: wall time x hardware.gpus), over every run of the study; a running trial
holds its estimate (or what it has used, if more). A trial starts only when spent + held + one
more trial's estimate stays within the budget; that estimate is the slowest completed trial once
trials finished, else the long end of the planned range (study/limits.py). When nothing
estimates a trial, trials run one at a time until the first has finished.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from grpo_ablate.core.cost import fmt_hours
from grpo_ablate.core.errors import Problem, StudyError
from grpo_ablate.records.trial_record import outcome, ran_here, resumed_from
from grpo_ablate.core.vocab import Outcome

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = ["TrialTime", "measured_estimate", "Budget", "budget_of", "duration_text", "gpu_hours_text", "spent_seconds"]


@dataclass(frozen=True)
class TrialTime:
    """One trial's wall seconds, (short, long); equal ends when measured."""

    seconds: tuple[float, float]
    measured: bool
    source: str  # one sentence: where the seconds come from


def duration_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def gpu_hours_text(h: float) -> str:
    """GPU-hours in words, down to GPU-seconds (a CPU test's budget is tiny)."""
    if h >= 0.1:
        return fmt_hours(h)
    return f"{h * 60:.0f} GPU-min" if h * 60 >= 1 else f"{h * 3600:.0f} GPU-s"


def _completed_fresh(trials: Iterable["FrozenTrial"]) -> list[float]:
    """Wall seconds of the trials that ran whole here and completed (a resumed one ran only its remainder)."""
    return [t.duration.total_seconds() for t in trials
            if ran_here(t) and outcome(t) is Outcome.COMPLETED and t.duration is not None
            and resumed_from(t) is None]


def measured_estimate(trials: Iterable["FrozenTrial"]) -> TrialTime | None:
    """The slowest completed trial of the study (each arm costs about the same; the slowest is the safe bet)."""
    seconds = _completed_fresh(trials)
    if not seconds:
        return None
    top = max(seconds)
    return TrialTime((top, top), True, f"the slowest of {len(seconds)} completed trial(s) of this study")


# ------------------------------------------------------------------ the GPU-hour budget


@dataclass(frozen=True)
class Budget:
    """The study's GPU-hours: the budget, what finished attempts spent, what running ones hold, one more trial's cost."""

    total_h: float
    spent_h: float
    held_h: float
    next_h: float | None  # None: nothing estimates a trial yet (one trial at a time then runs, to measure)
    next_source: str
    running: int = 0

    @property
    def left_h(self) -> float:
        return max(0.0, self.total_h - self.spent_h)

    @property
    def may_start(self) -> bool:
        if self.next_h is None:  # nothing to estimate with: one trial at a time, whose cost then is measured
            return self.running == 0 and self.spent_h < self.total_h
        return self.spent_h + self.held_h + self.next_h <= self.total_h + 1e-9

    def words(self) -> str:
        held = f", {gpu_hours_text(self.held_h)} held by running trials" if self.held_h > 0 else ""
        return (f"GPU-hour budget {gpu_hours_text(self.total_h)}: {gpu_hours_text(self.spent_h)} spent{held}, "
                f"{gpu_hours_text(self.left_h)} left")

    def refusal(self) -> str:
        if self.next_h is None and self.spent_h < self.total_h:
            return (f"{self.words()}; nothing estimates one trial's GPU-hours yet, so trials run one at a time until one "
                    "has finished (`grpo-ablate probe` measures one beforehand)")
        if self.next_h is None:
            return f"{self.words()}: spent; raise study.budget_gpu_hours to run more"
        return (f"{self.words()}; the next trial would need about {gpu_hours_text(self.next_h)} ({self.next_source}), "
                "which would cross it: raise study.budget_gpu_hours to run more")

    def as_dict(self) -> dict[str, float | None]:
        return {"budget_gpu_hours": self.total_h, "spent_gpu_hours": round(self.spent_h, 4),
                "held_gpu_hours": round(self.held_h, 4), "left_gpu_hours": round(self.left_h, 4),
                "next_trial_gpu_hours": None if self.next_h is None else round(self.next_h, 4)}


def _now() -> _dt.datetime:
    return _dt.datetime.now()


def spent_seconds(trials: Iterable["FrozenTrial"]) -> float:
    """Wall seconds of every attempt that ended here (any outcome), as the budget counts them (x GPUs for GPU-hours)."""
    return sum((t.datetime_complete - t.datetime_start).total_seconds() for t in trials
               if ran_here(t) and t.datetime_start is not None and t.datetime_complete is not None)


def budget_of(total: float | str | None, gpus: int | None, trials: Sequence["FrozenTrial"], planned: TrialTime | None,
              now: _dt.datetime | None = None) -> Budget | None:
    """The budget (study.budget_gpu_hours) from the study's trials (every host's); None when it sets none.

    Spent: the wall time of every attempt that ended (any outcome) x `gpus` (hardware.gpus). Held:
    each running trial's estimate, or its elapsed time if more. Next: the slowest completed trial,
    else the long end of the planned estimate.
    """
    if total is None:
        return None
    if isinstance(total, str):  # "0.5x" that nothing could turn into GPU-hours (plan/price.resolve_budget)
        raise StudyError([Problem(path="study.budget_gpu_hours", message=(
            f"{total!r} is a share of the full run, whose GPU-hours are not known here (plan says why): write the "
            "budget in GPU-hours, or give what prices the full run (budget.full_run, hardware.gpus, a probe)"))])
    gpus = int(gpus or 0)
    now = now or _now()
    estimate = measured_estimate(trials) or planned
    per_trial_s = estimate.seconds[1] if estimate is not None else None
    spent = held = 0.0
    running = 0
    for t in trials:
        if not ran_here(t) or t.datetime_start is None:
            continue
        if t.datetime_complete is not None:
            spent += (t.datetime_complete - t.datetime_start).total_seconds()
        elif t.state.name == "RUNNING":
            running += 1
            held += max(per_trial_s or 0.0, (now - t.datetime_start).total_seconds())
    to_h = gpus / 3600.0
    next_h = per_trial_s * to_h if per_trial_s is not None else None
    return Budget(float(total), spent * to_h, held * to_h, next_h, estimate.source if estimate is not None else "", running)
