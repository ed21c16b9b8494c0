"""What `grpo-ablate plan` prints: the hardware arithmetic, feasible pairs, rejections, the plan,
what each trial generates and how long it may take, and the notes on a translated recipe.

    grpo-ablate plan studies/tiny-cpu.yaml --json
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from grpo_ablate.config import FloatRange
from grpo_ablate.config.hardware import world_size_reason
from grpo_ablate.config.precision import CPU_CHANGES_LEAD, cpu_run_changes
from grpo_ablate.config.recipes import RecipeNote
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.cost import ASSUMED, GpuEstimate, assumed_trial_seconds, fmt_range, hours, model_parameters
from grpo_ablate.plan import completions_per_trial, resolved_trial_count, study_plan
from grpo_ablate.storage import local_file, mask_url
from grpo_ablate.vocab import Schedule
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe, probe_table

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["plan_json", "plan_text", "trial_cost", "TrialCost"]

STEPS_PER_GENERATION = (
    "steps/gen: micro-steps (one per-device batch each) trained on the completions of one generation round; "
    "a round spans steps/gen / gradient_accumulation_steps optimizer steps, and prompts/round = gen_batch / G."
)


class TrialCost(dict[str, Any]):
    """What one trial generates (an upper bound) and, when a previous study measured it, how long it takes."""


def _measured_pace(study: "Study") -> tuple[float, float, str] | None:
    """(training seconds per completion, seconds of a trial outside training, where from): medians
    over finished trials in the study's storage. The second is the trial's wall time less its
    training time (start-up, model load, evaluation), so a short trial is not estimated at 0 s.

    Read-only: a journal file or SQLite file that exists; a server storage is not contacted by `plan`.
    """
    url = study.storage_url
    path = local_file(url)
    if path is None or not path.is_file() or not path.stat().st_size:
        return None
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        if url.startswith("sqlite:///"):
            storage: Any = optuna.storages.RDBStorage(url, skip_compatibility_check=True)
        else:
            storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
        rates: list[float] = []
        overheads: list[float] = []
        names: set[str] = set()
        for s in storage.get_all_studies():
            for t in storage.get_all_trials(s._study_id, deepcopy=False):
                sps = t.user_attrs.get("samples_per_second")
                if t.state == optuna.trial.TrialState.COMPLETE and isinstance(sps, (int, float)) and sps > 0:
                    rates.append(1.0 / float(sps))
                    names.add(s.study_name)
                    train = t.user_attrs.get("train_seconds")
                    if t.duration is not None and isinstance(train, (int, float)):
                        overheads.append(max(0.0, t.duration.total_seconds() - float(train)))
    except Exception:  # a storage plan cannot read says nothing about the plan: no estimate
        return None
    if not rates:
        return None
    where = f"{len(rates)} finished trial(s) of {', '.join(sorted(names))} in {mask_url(url)}"
    return statistics.median(rates), (statistics.median(overheads) if overheads else 0.0), where


def trial_cost(study: "Study") -> TrialCost:
    """Generated completions and tokens per trial (upper bound), the wall-time estimate with its source,
    and GPU-hours per trial and for the study (measured, else a range from stated assumptions)."""
    n = completions_per_trial(study)
    length = study.trainer.get("max_completion_length")
    length = length if isinstance(length, int) and not isinstance(length, bool) else int(trl_default("max_completion_length"))
    cost = TrialCost(completions=n, max_completion_length=length, max_tokens=n * length if n else None,
                     seconds=None, seconds_source=None)
    measured = _measured_pace(study) if n else None
    if measured and n:
        per, overhead, where = measured
        cost["seconds"] = overhead + per * n
        cost["seconds_per_completion"] = per
        cost["overhead_seconds"] = overhead
        cost["seconds_source"] = where
    probe = load_probe(study.output_dir, Owner.of(study)) if cost["seconds"] is None else None
    if probe is not None and probe.one_trial_estimate_s:  # no trial yet: the probe measured the pace
        cost["seconds"] = float(probe.one_trial_estimate_s)
        cost["seconds_source"] = ("the probe's pace (probe.json: its measured start-up plus the budget's steps "
                                  "at the baseline G's largest fitting batch)")
    if study.budget.seconds and (cost["seconds"] is None or cost["seconds"] > study.budget.seconds):
        cost["seconds"] = study.budget.seconds
        cost["seconds_source"] = (cost["seconds_source"] or "") + ("; " if cost["seconds_source"] else "") + "capped by budget.seconds"
    gpu = _gpu_estimate(study, cost)
    cost["gpu_time"] = gpu.as_dict() if isinstance(gpu, GpuEstimate) else None
    cost["gpu_time_note"] = gpu if isinstance(gpu, str) else None
    return cost


def _gpu_estimate(study: "Study", cost: TrialCost) -> GpuEstimate | str:
    """GPU-hours from the measured seconds, else from the stated assumptions; a sentence when neither applies."""
    hw = study.hardware
    gpus = int(hw.gpus or 0)
    trials = resolved_trial_count(study)
    if not gpus:
        return "no GPU-hours: the study runs on CPU (hardware.gpus unset)"
    if cost["seconds"] is not None:
        h = hours(float(cost["seconds"]), gpus)
        return GpuEstimate(gpus, trials, (h, h), f"{gpus} GPU(s) x the wall time above ({cost['seconds_source']})")
    params, where = model_parameters(study.model.name_or_path, study.model.revision)
    if params is None:
        return f"no GPU-hours yet: model size {where}; run `grpo-ablate probe` or a first trial to measure"
    if not cost["completions"]:
        return "no GPU-hours yet: the budget is tokens or seconds only; run `grpo-ablate probe` to measure"
    mode = hw.vllm.mode
    server = mode == "server"
    lo, hi = assumed_trial_seconds(params, int(cost["completions"]), int(cost["max_completion_length"]),
                                   study.space.shape.num_iterations, training_gpus=study.world_size,
                                   generation_gpus=hw.vllm.server_gpus if server else study.world_size,
                                   vllm=mode in ("server", "colocate"))
    source = (f"assumed, not measured: model {params / 1e9:.2g} B parameters ({where}); "
              f"{ASSUMED.words(mode in ('server', 'colocate'))}")
    return GpuEstimate(gpus, trials, (hours(lo, gpus), hours(hi, gpus)), source)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _temperature_text(study: "Study") -> tuple[str, int | None]:
    t = study.temperatures()
    if t is None:
        return f"fixed at {study.fixed_temperature():g}", 1
    if isinstance(t, FloatRange):
        return f"searched in [{t.low:g}, {t.high:g}]{' (log scale)' if t.log else ''}", None
    return f"searched over {[float(x) for x in t]}", len(t)


def plan_json(study: "Study") -> dict[str, Any]:
    space = study.space
    text, n_temps = _temperature_text(study)
    cells = study_plan(study)
    out = space.as_dict()
    out.update(
        {
            "study": study.study.name,
            "sampler": study.sampler_kind,
            "temperature": text,
            "search_space_size": (len(space.feasible) * n_temps) if n_temps else None,
            "seeds": list(study.study.seeds),
            "plan": [
                {"role": c.role, **c.arm.as_dict(), "seed": c.seed}
                for c in cells
            ],
            "n_trials": resolved_trial_count(study),
            "world_size_reason": world_size_reason(study.file),
            "steps_per_generation_meaning": STEPS_PER_GENERATION,
            "trial_cost": dict(trial_cost(study)),
            "notes": [str(w) for w in study.warnings if isinstance(w, RecipeNote)],
            "g_policies": _policy_words(space),
        }
    )
    probe = load_probe(study.output_dir, Owner.of(study))
    if probe is not None:
        out["probe"] = probe.to_dict()
    return out


def _policy_words(space: Any) -> dict[str, str]:
    """label -> what it does per generation round, for every schedule, dynamic or per-prompt G offered."""
    return {g.label: g.describe() for g in space.generations if isinstance(g, Schedule)}


def plan_text(study: "Study") -> str:
    space = study.space
    lines = [f"Study {study.study.name!r} ({study.sampler_kind} sampler)", ""]
    notes = [w for w in study.warnings if isinstance(w, RecipeNote)]
    if notes:
        lines.append(f"Recipe {study.file.trainer_from} (notes on its keys):")
        lines += [f"  note: {n}" for n in notes]
        lines.append("")
    lines += ["Processes: " + world_size_reason(study.file) + ".", "Hardware: " + space.shape.describe()]
    cpu = cpu_run_changes(study.file)
    lines += ["On this machine: " + CPU_CHANGES_LEAD + "; ".join(cpu) + "."] if cpu else []
    lines.append("")
    lines.append(f"Feasible pairs ({len(space.feasible)}):")
    lines.append(f"  {'num_generations':>15} {'gen_batch':>9} {'steps/gen':>9} {'prompts/round':>13}")
    for p in space.feasible:
        lines.append(f"  {p.num_generations:>15} {p.generation_batch_size:>9} {p.steps_per_generation:>9} {p.prompts_per_generation:>13}")
    lines.append("  " + STEPS_PER_GENERATION)
    policies = _policy_words(space)
    if policies:
        lines += ["", "G per round (values of num_generations that are not one fixed G):"]
        lines += [f"  {label}: {words}" for label, words in policies.items()]
    if space.rejected:
        lines += ["", f"Rejected ({len(space.rejected)}):"]
        for r in space.rejected:
            b = "-" if r.generation_batch_size is None else str(r.generation_batch_size)
            lines.append(f"  G={r.num_generations:<4} batch={b:<6} {r.reason}")
    text, n_temps = _temperature_text(study)
    lines += ["", f"Temperature: {text}."]
    if n_temps:
        lines.append(f"Search space: {len(space.feasible)} pair(s) x {n_temps} temperature(s) = {len(space.feasible) * n_temps} configurations.")
    else:
        lines.append(f"Search space: {len(space.feasible)} pair(s) x a continuous temperature range.")
    cells = study_plan(study)
    if cells:
        lines += ["", f"Trial plan ({len(cells)} trials, seeds {list(study.study.seeds)}):"]
        for i, c in enumerate(cells):
            lines.append(f"  {i:>3}. {c.role:<28} {c.arm.label}, seed {c.seed}")
    else:
        lines.append(f"Trials: {resolved_trial_count(study)} proposed by the {study.sampler_kind} sampler, seeds {list(study.study.seeds)}.")
    lines += ["", *_cost_lines(study)]
    probe = load_probe(study.output_dir, Owner.of(study))
    if probe is not None:
        lines += ["", f"Probe ({study.output_dir / 'probe.json'}):", *("  " + line for line in probe_table(probe).splitlines())]
    for w in study.warnings:
        if not isinstance(w, RecipeNote):
            lines.append(f"warning: {w}")
    return "\n".join(lines)


def _cost_lines(study: "Study") -> list[str]:
    cost = trial_cost(study)
    n = cost["completions"]
    if not n:
        return ["Per trial: generated tokens unknown (the budget is tokens or seconds only)."]
    out = [f"Per trial: {n:,} completions x max_completion_length {cost['max_completion_length']} = "
           f"at most {cost['max_tokens']:,} generated tokens."]
    if cost["seconds"] is not None:
        trials = resolved_trial_count(study)
        per = cost.get("seconds_per_completion")
        rate = ""
        if per:
            rate = f" ({per:.3g} s per completion"
            rate += f" + {cost['overhead_seconds']:.0f} s start-up and evaluation)" if cost.get("overhead_seconds") else ")"
        out.append(f"Wall time: about {_duration(cost['seconds'])} per trial, {_duration(cost['seconds'] * trials)} "
                   f"for {trials} trials{rate}; from {cost['seconds_source']}.")
    else:
        out.append("Wall time: no measurement yet (no finished trial in this study's storage, no probe.json).")
    gpu = cost.get("gpu_time")
    if gpu:
        lo, hi = gpu["gpu_hours_per_trial"]
        slo, shi = gpu["gpu_hours_study"]
        out.append(f"GPU time (estimate): {fmt_range(lo, hi)} per trial, {fmt_range(slo, shi)} for {gpu['trials']} trials "
                   f"at {gpu['gpus_per_trial']} GPU(s) each; {gpu['source']}.")
    elif cost.get("gpu_time_note"):
        out.append(f"GPU time: {cost['gpu_time_note']}.")
    return out
