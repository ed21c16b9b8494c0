"""What a study may spend: each trial's timeout, from its estimate, and the study's GPU-hour budget.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml   # "Trial timeout: ...", "GPU-hour budget: ..."
    grpo-ablate run studies/tiny-cpu.yaml --set study.budget_gpu_hours=2 --set hardware.gpus=1

A 10-hour trial killed at hour one by a fixed timeout fails every time, so `study.trial_timeout:
auto` (the default) is the trial's long estimate times TIMEOUT_FACTOR plus TIMEOUT_SLACK_S: from
the study's own finished trials once there are some (the slowest), else the probe's measured
pace, else the assumption-based range (cost.py), else NO_ESTIMATE_TIMEOUT_S until a first trial
has finished. A timeout the user set below the estimate is warned about (plan, run).

The budget counts what every attempt of every trial held its GPUs for (finished, failed,
interrupted: wall time x hardware.gpus), over every run of the study; a running trial holds its
estimate (or what it has used, if more). A trial starts only when spent + held + one more trial's
estimate stays within the budget; the estimate is the long end of the range, then the slowest
finished trial once trials finished. When nothing estimates a trial (a model of unknown size, no
probe), trials run one at a time until the first has finished and measured one.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from grpo_ablate.config.schema import MAX_SECONDS
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.cost import ASSUMED, assumed_trial_seconds, fmt_hours, model_parameters
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe
from grpo_ablate.plan import completions_per_trial
from grpo_ablate.study import ledger
from grpo_ablate.vocab import Outcome

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import Study

__all__ = ["TrialTime", "TIMEOUT_FACTOR", "TIMEOUT_SLACK_S", "NO_ESTIMATE_TIMEOUT_S", "planned_estimate",
           "measured_estimate", "derived_timeout", "resolve_timeout", "timeout_warning", "Budget", "budget_of",
           "duration_text", "gpu_hours_text"]

TIMEOUT_FACTOR = 2.0  # a trial may run twice its long estimate (a loaded machine, a slow disk, a long tail) ...
TIMEOUT_SLACK_S = 600.0  # ... plus 10 minutes (start-up, model download, a vLLM engine)
NO_ESTIMATE_TIMEOUT_S = 3600.0  # before anything is known: one hour, until the first trial finishes


@dataclass(frozen=True)
class TrialTime:
    """One trial's wall seconds, (short, long); equal ends when measured."""

    seconds: tuple[float, float]
    measured: bool
    source: str  # one sentence: where the seconds come from


def gpu_hours_text(h: float) -> str:
    """GPU-hours in words, down to GPU-seconds (a CPU test's budget is tiny)."""
    if h >= 0.1:
        return fmt_hours(h)
    return f"{h * 60:.0f} GPU-min" if h * 60 >= 1 else f"{h * 3600:.0f} GPU-s"


def duration_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ------------------------------------------------------------------ estimates


def planned_estimate(study: "Study") -> TrialTime | None:
    """Before the study's own trials: the probe's measured pace, else the assumption-based range; None when neither.

    (The same figures `plan` prints; cost.estimate_trial will own them once it lands, and this reads it.)
    """
    probe = load_probe(study.output_dir, Owner.of(study))
    if probe is not None and probe.one_trial_estimate_s:
        s = float(probe.one_trial_estimate_s)
        return TrialTime((s, s), True, "the probe's measured pace (probe.json)")
    n = completions_per_trial(study)
    params, where = model_parameters(study.model.name_or_path, study.model.revision)
    if not n or params is None or not study.hardware.gpus:
        return None
    hw = study.hardware
    length = study.trainer.get("max_completion_length")
    length = length if isinstance(length, int) and not isinstance(length, bool) else int(trl_default("max_completion_length"))
    server = hw.vllm.mode == "server"
    vllm = hw.vllm.mode in ("server", "colocate")
    lo, hi = assumed_trial_seconds(params, n, length, study.space.shape.num_iterations, training_gpus=study.world_size,
                                   generation_gpus=hw.vllm.server_gpus if server else study.world_size, vllm=vllm)
    if study.budget.seconds:
        lo, hi = min(lo, study.budget.seconds), min(hi, study.budget.seconds)
    return TrialTime((lo, hi), False, f"assumed, not measured: model {params / 1e9:.2g} B parameters ({where}); "
                                      f"{ASSUMED.words(vllm)}")


def _completed_fresh(trials: Iterable["FrozenTrial"]) -> list[float]:
    """Wall seconds of the trials that ran whole here and completed (a resumed one ran only its remainder)."""
    return [t.duration.total_seconds() for t in trials
            if ledger.ran_here(t) and ledger.outcome(t) is Outcome.COMPLETED and t.duration is not None
            and t.user_attrs.get(ledger.RESUMED_FROM) is None]


def measured_estimate(trials: Iterable["FrozenTrial"]) -> TrialTime | None:
    """The slowest completed trial of the study (each arm costs about the same; the slowest is the safe bet)."""
    seconds = _completed_fresh(trials)
    if not seconds:
        return None
    top = max(seconds)
    return TrialTime((top, top), True, f"the slowest of {len(seconds)} completed trial(s) of this study")


# ------------------------------------------------------------------ the timeout


def derived_timeout(estimate: TrialTime | None) -> tuple[float, str]:
    """(seconds, why) of `trial_timeout: auto`."""
    if estimate is None:
        return NO_ESTIMATE_TIMEOUT_S, (f"{duration_text(NO_ESTIMATE_TIMEOUT_S)}: nothing estimates a trial yet (no probe, no "
                                       "finished trial, no GPU assumptions); derived from the first finished trial after that")
    long = estimate.seconds[1]
    seconds = min(MAX_SECONDS, long * TIMEOUT_FACTOR + TIMEOUT_SLACK_S)
    source = estimate.source if estimate.measured else "the assumptions `plan` lists"
    return seconds, (f"{duration_text(seconds)} = {TIMEOUT_FACTOR:g} x {duration_text(long)} "
                     f"({'measured' if estimate.measured else 'the long end of the estimate'}) + "
                     f"{duration_text(TIMEOUT_SLACK_S)}; from {source}")


def resolve_timeout(setting: float | str | None, estimate: TrialTime | None) -> tuple[float | None, str]:
    """(seconds or None for no timeout, why) for study.trial_timeout."""
    if setting == "auto":
        return derived_timeout(estimate)
    if setting is None:
        return None, "none (study.trial_timeout: null): a trial that hangs runs until it is stopped"
    return float(setting), f"{duration_text(float(setting))} (study.trial_timeout)"


def timeout_warning(setting: float | str | None, estimate: TrialTime | None) -> str | None:
    """A warning when a timeout the user set would stop trials the estimate says need longer; else None."""
    if not isinstance(setting, (int, float)) or estimate is None:
        return None
    lo, hi = estimate.seconds
    auto, _ = derived_timeout(estimate)
    kind = "measured time" if estimate.measured else "assumed time"
    span = duration_text(lo) + (f" to {duration_text(hi)}" if hi > lo else "")
    if setting < lo:
        return (f"study.trial_timeout={setting:g} s is below one trial's {kind}, {span}: every trial would be "
                f"stopped and failed; remove it (auto would give {duration_text(auto)}) or raise it")
    if setting < hi:
        return (f"study.trial_timeout={setting:g} s is inside one trial's {kind}, {span}: slow trials would be "
                f"stopped and failed; remove it "
                f"(auto would give {duration_text(auto)}) or raise it")
    return None


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


def budget_of(total: float | None, gpus: int | None, trials: Sequence["FrozenTrial"], planned: TrialTime | None,
              now: _dt.datetime | None = None) -> Budget | None:
    """The budget (study.budget_gpu_hours) from the study's trials (every host's); None when it sets none.

    Spent: the wall time of every attempt that ended (any outcome) x `gpus` (hardware.gpus). Held:
    each running trial's estimate, or its elapsed time if more. Next: the slowest completed trial,
    else the long end of the planned estimate.
    """
    if total is None:
        return None
    gpus = int(gpus or 0)
    now = now or _now()
    estimate = measured_estimate(trials) or planned
    per_trial_s = estimate.seconds[1] if estimate is not None else None
    spent = held = 0.0
    running = 0
    for t in trials:
        if not ledger.ran_here(t) or t.datetime_start is None:
            continue
        if t.datetime_complete is not None:
            spent += (t.datetime_complete - t.datetime_start).total_seconds()
        elif t.state.name == "RUNNING":
            running += 1
            held += max(per_trial_s or 0.0, (now - t.datetime_start).total_seconds())
    to_h = gpus / 3600.0
    next_h = per_trial_s * to_h if per_trial_s is not None else None
    return Budget(float(total), spent * to_h, held * to_h, next_h, estimate.source if estimate is not None else "", running)
