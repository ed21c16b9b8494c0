"""What `grpo-ablate plan` prints: the hardware arithmetic, feasible pairs, rejections, the plan,
what each trial generates and how long it may take, and the notes on a translated recipe.

    grpo-ablate plan studies/tiny-cpu.yaml --json
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from grpo_ablate.config import FloatRange
from grpo_ablate.config.hardware import world_size_reason
from grpo_ablate.config.recipes import RecipeNote
from grpo_ablate.config.trainer_fields import TRL_DEFAULTS
from grpo_ablate.plan import resolved_trial_count, study_plan
from grpo_ablate.storage import local_file, mask_url
from grpo_ablate.preflight.probe import probe_table
from grpo_ablate.preflight.probe_file import load_probe

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["plan_json", "plan_text", "trial_cost", "TrialCost"]

STEPS_PER_GENERATION = (
    "steps/gen: micro-steps (one per-device batch each) trained on the completions of one generation round; "
    "a round spans steps/gen / gradient_accumulation_steps optimizer steps, and prompts/round = gen_batch / G."
)


class TrialCost(dict[str, Any]):
    """What one trial generates (an upper bound) and, when a previous study measured it, how long it takes."""


def _completions_per_trial(study: "Study") -> int | None:
    """Completions one trial generates: budget.completions, else max_steps x completions per optimizer step."""
    b = study.budget
    if b.completions:
        return b.completions
    steps = b.max_steps
    if not steps:
        return None
    shape = study.space.shape
    return steps * shape.unit * shape.gradient_accumulation_steps


def _seconds_per_completion(study: "Study") -> tuple[float, str] | None:
    """Median training seconds per completion over finished trials in the study's storage, and where from.

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
        names: set[str] = set()
        for s in storage.get_all_studies():
            for t in storage.get_all_trials(s._study_id, deepcopy=False):
                sps = t.user_attrs.get("samples_per_second")
                if t.state == optuna.trial.TrialState.COMPLETE and isinstance(sps, (int, float)) and sps > 0:
                    rates.append(1.0 / float(sps))
                    names.add(s.study_name)
    except Exception:  # a storage plan cannot read says nothing about the plan: no estimate
        return None
    if not rates:
        return None
    where = f"{len(rates)} finished trial(s) of {', '.join(sorted(names))} in {mask_url(url)}"
    return statistics.median(rates), where


def trial_cost(study: "Study") -> TrialCost:
    """Generated completions and tokens per trial (upper bound), and the wall-time estimate with its source."""
    n = _completions_per_trial(study)
    length = study.trainer.get("max_completion_length", TRL_DEFAULTS["max_completion_length"])
    length = length if isinstance(length, int) and not isinstance(length, bool) else TRL_DEFAULTS["max_completion_length"]
    cost = TrialCost(completions=n, max_completion_length=length, max_tokens=n * length if n else None,
                     seconds=None, seconds_source=None)
    measured = _seconds_per_completion(study) if n else None
    if measured and n:
        per, where = measured
        cost["seconds"] = per * n
        cost["seconds_per_completion"] = per
        cost["seconds_source"] = where
    probe = load_probe(study.output_dir) if cost["seconds"] is None else None
    if probe is not None and probe.one_trial_estimate_s:  # no trial yet: the probe measured the pace
        cost["seconds"] = float(probe.one_trial_estimate_s)
        cost["seconds_source"] = ("the probe's pace (probe.json: its measured start-up plus the budget's steps "
                                  "at the baseline G's largest fitting batch)")
    if study.budget.seconds and (cost["seconds"] is None or cost["seconds"] > study.budget.seconds):
        cost["seconds"] = study.budget.seconds
        cost["seconds_source"] = (cost["seconds_source"] or "") + ("; " if cost["seconds_source"] else "") + "capped by budget.seconds"
    return cost


def _duration(seconds: float) -> str:
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
        }
    )
    probe = load_probe(study.output_dir)
    if probe is not None:
        out["probe"] = probe.to_dict()
    return out


def plan_text(study: "Study") -> str:
    space = study.space
    lines = [f"Study {study.study.name!r} ({study.sampler_kind} sampler)", ""]
    notes = [w for w in study.warnings if isinstance(w, RecipeNote)]
    if notes:
        lines.append(f"Recipe {study.file.trainer_from} (notes on its keys):")
        lines += [f"  note: {n}" for n in notes]
        lines.append("")
    lines += ["Processes: " + world_size_reason(study.file) + ".", "Hardware: " + space.shape.describe(), ""]
    lines.append(f"Feasible pairs ({len(space.feasible)}):")
    lines.append(f"  {'num_generations':>15} {'gen_batch':>9} {'steps/gen':>9} {'prompts/round':>13}")
    for p in space.feasible:
        lines.append(f"  {p.num_generations:>15} {p.generation_batch_size:>9} {p.steps_per_generation:>9} {p.prompts_per_generation:>13}")
    lines.append("  " + STEPS_PER_GENERATION)
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
    probe = load_probe(study.output_dir)
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
        rate = f" ({per:.3g} s per completion)" if per else ""
        out.append(f"Wall time: about {_duration(cost['seconds'])} per trial, {_duration(cost['seconds'] * trials)} "
                   f"for {trials} trials{rate}; from {cost['seconds_source']}.")
    else:
        out.append("Wall time: no estimate yet (no finished trial in this study's storage; run a few trials first).")
    return out
