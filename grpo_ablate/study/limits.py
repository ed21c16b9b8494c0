"""How long a trial may run: its timeout, from its estimate (the GPU-hour budget is gpu_hours.py's).

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml   # "Trial timeout: ..."

A 10-hour trial killed at hour one by a fixed timeout fails every time, so `study.trial_timeout:
auto` (the default) is the trial's long estimate times TIMEOUT_FACTOR plus TIMEOUT_SLACK_S: from
the study's own finished trials once there are some (the slowest), else the probe's measured
pace, else the assumption-based range (cost.py), else NO_ESTIMATE_TIMEOUT_S until a first trial
has finished. A timeout the user set below the estimate is warned about (plan, run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_ablate.config.schema import MAX_SECONDS
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.cost import ASSUMED, assumed_trial_seconds, model_parameters
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe
from grpo_ablate.gpu_hours import TrialTime, duration_text
from grpo_ablate.plan import completions_per_trial

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["TIMEOUT_FACTOR", "TIMEOUT_SLACK_S", "NO_ESTIMATE_TIMEOUT_S", "planned_estimate", "derived_timeout",
           "resolve_timeout", "timeout_warning"]

TIMEOUT_FACTOR = 2.0  # a trial may run twice its long estimate (a loaded machine, a slow disk, a long tail) ...
TIMEOUT_SLACK_S = 600.0  # ... plus 10 minutes (start-up, model download, a vLLM engine)
NO_ESTIMATE_TIMEOUT_S = 3600.0  # before anything is known: one hour, until the first trial finishes


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
