"""What `grpo-ablate plan` prints: the hardware arithmetic, feasible pairs, rejections, the plan.

    grpo-ablate plan studies/tiny-cpu.yaml --json
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_ablate.config import FloatRange
from grpo_ablate.plan import resolved_trial_count, study_plan
from grpo_ablate.preflight.probe import probe_table
from grpo_ablate.preflight.probe_file import load_probe

if TYPE_CHECKING:
    from grpo_ablate.config import Study


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
            "sampler": study.study.sampler,
            "temperature": text,
            "search_space_size": (len(space.feasible) * n_temps) if n_temps else None,
            "seeds": list(study.study.seeds),
            "plan": [
                {"role": c.role, **c.arm.as_dict(), "seed": c.seed}
                for c in cells
            ],
            "n_trials": resolved_trial_count(study),
        }
    )
    probe = load_probe(study.output_dir)
    if probe is not None:
        out["probe"] = probe.to_dict()
    return out


def plan_text(study: "Study") -> str:
    space = study.space
    lines = [f"Study {study.study.name!r} ({study.study.sampler} sampler)", "", "Hardware: " + space.shape.describe(), ""]
    lines.append(f"Feasible pairs ({len(space.feasible)}):")
    lines.append(f"  {'num_generations':>15} {'gen_batch':>9} {'steps/gen':>9} {'prompts/round':>13}")
    for p in space.feasible:
        lines.append(f"  {p.num_generations:>15} {p.generation_batch_size:>9} {p.steps_per_generation:>9} {p.prompts_per_generation:>13}")
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
        lines.append(f"Trials: {resolved_trial_count(study)} proposed by the {study.study.sampler} sampler, seeds {list(study.study.seeds)}.")
    probe = load_probe(study.output_dir)
    if probe is not None:
        lines += ["", f"Probe ({study.output_dir / 'probe.json'}):", *("  " + line for line in probe_table(probe).splitlines())]
    for w in study.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)
