"""How long a trial may run: its timeout, from its estimate (the GPU-hour budget is gpu_hours.py's).

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml   # "Trial timeout: ..."

A 10-hour trial killed at hour one by a fixed timeout fails every time, so `study.trial_timeout:
auto` (the default) is the trial's long estimate times TIMEOUT_FACTOR plus TIMEOUT_SLACK_S: from
the study's own finished trials once there are some (the slowest), else estimate.estimate_trial
(the storage's or the probe's measured pace, else the assumption-based range), else
NO_ESTIMATE_TIMEOUT_S until a first trial has finished. A timeout the user set below the
estimate is warned about (plan, validate, run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_ablate.config.schema import MAX_SECONDS
from grpo_ablate.plan.estimate import estimate_trial, trial_time
from grpo_ablate.records.gpu_hours import TrialTime, duration_text

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["TIMEOUT_FACTOR", "TIMEOUT_SLACK_S", "NO_ESTIMATE_TIMEOUT_S", "planned_estimate", "derived_timeout",
           "resolve_timeout", "timeout_warning"]

TIMEOUT_FACTOR = 2.0  # a trial may run twice its long estimate (a loaded machine, a slow disk, a long tail) ...
TIMEOUT_SLACK_S = 600.0  # ... plus 10 minutes (start-up, model download, a vLLM engine)
NO_ESTIMATE_TIMEOUT_S = 3600.0  # before anything is known: one hour, until the first trial finishes


def planned_estimate(study: "StudyConfig") -> TrialTime | None:
    """One trial's seconds as estimate.estimate_trial gives them (measured from the study's storage file or
    probe.json, else the assumption range); None when nothing estimates a trial."""
    return trial_time(estimate_trial(study))


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
