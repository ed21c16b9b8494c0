"""The plan in words and as JSON: what `grpo-ablate plan` prints, and what `init` and `validate` show of it
(the hardware arithmetic, feasible pairs, rejections, what each trial generates and costs, the screen, the
limits, the notes on a translated recipe; with --commands, every arm's launch lines). Presentation only:
the numbers come from config/, estimate, plan/, study/limits and preflight/launch_plan.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from grpo_ablate.config import FloatRange
from grpo_ablate.config.hardware import world_size_reason
from grpo_ablate.config.cpu_run import cpu_run_changes
from grpo_ablate.core.precision import CPU_CHANGES_LEAD
from grpo_ablate.config.names import module_findable
from grpo_ablate.config.recipes import FieldList, RecipeDifference, RecipeNote
from grpo_ablate.core.cost import RunShare, fmt_range, lr_schedule_of
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.plan.cells import resolved_trial_count, study_plan
from grpo_ablate.study import limits
from grpo_ablate.plan.price import planned_price
from grpo_ablate.plan.design import resolution_line
from grpo_ablate.files.screen_file import load_screen
from grpo_ablate.core.vocab import Schedule
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe, probe_table
from grpo_ablate.launch.launch_env import VOLATILE
from grpo_ablate.plan.trial_cost import trial_cost
from grpo_ablate.preflight.launch_plan import launch_plan

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["plan_json", "plan_text", "note_text", "commands_text", "limits_json", "screen_json"]

STEPS_PER_GENERATION = (
    "steps/gen: micro-steps (one per-device batch each) trained on the completions of one generation round; "
    "a round spans steps/gen / gradient_accumulation_steps optimizer steps, and prompts/round = gen_batch / G."
)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _temperature_text(study: "StudyConfig") -> tuple[str, int | None]:
    t = study.temperatures()
    if t is None:
        return f"fixed at {study.fixed_temperature():g}", 1
    if isinstance(t, FloatRange):
        return f"searched in [{t.low:g}, {t.high:g}]{' (log scale)' if t.log else ''}", None
    return f"searched over {[float(x) for x in t]}", len(t)


def plan_json(study: "StudyConfig") -> dict[str, Any]:
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
            "notes": [str(w) for w in study.warnings if isinstance(w, RecipeNote) and not isinstance(w, RecipeDifference)],
            "differences": [*(str(w) for w in study.warnings if isinstance(w, RecipeDifference)),
                            *_stack_differences(study)],
            "lr_schedule": lr_schedule_of(study.budget.model_dump()),
            "g_policies": _policy_words(space),
            "limits": limits_json(study),
            "price": planned_price(study).as_dict(),
            "resolution": resolution_line(study, planned_price(study).multiple),
            "screen": screen_json(study),
        }
    )
    probe = load_probe(study.output_dir, Owner.of(study))
    if probe is not None:
        out["probe"] = probe.to_dict()
    return out


def _stack_differences(study: "StudyConfig") -> list[str]:
    """What the trials will do differently from the run as written, whatever the recipe: the learning-rate
    schedule when it is compressed, and a kernel the trainer asks for that is not installed here."""
    out: list[str] = []
    if lr_schedule_of(study.budget.model_dump()) == "compressed" and study.file.trainer_from:
        out.append("budget.lr_schedule: compressed: the learning-rate schedule is fitted into each trial's steps "
                   "(warmup and decay included), not the recipe's full run")
    if study.trainer.get("use_liger_kernel") and not module_findable("liger_kernel"):
        out.append("use_liger_kernel: true, but liger-kernel is not installed here and the gpu extra does not install it: "
                   "transformers stops the trial with an ImportError when training starts; `pip install liger-kernel` on "
                   "the trial machine, or set trainer.use_liger_kernel: false (a different memory profile, the same "
                   "objective; TRL 1.16 applies only liger's layer kernels anyway, not its fused cross-entropy)")
    return out


def _policy_words(space: Any) -> dict[str, str]:
    """label -> what it does per generation round, for every schedule, dynamic or per-prompt G offered."""
    return {g.label: g.describe() for g in space.generations if isinstance(g, Schedule)}


def note_text(note: str, verbose: bool = False) -> str:
    """A recipe note as the console shows it: a list of dozens of TRL fields as one line unless `verbose`."""
    return note.brief() if isinstance(note, FieldList) and not verbose else str(note)


def plan_text(study: "StudyConfig", verbose: bool = False) -> str:
    space = study.space
    lines = [f"Study {study.study.name!r} ({study.sampler_kind} sampler)", ""]
    notes = [w for w in study.warnings if isinstance(w, RecipeNote) and not isinstance(w, RecipeDifference)]
    if notes:
        lines.append(f"Recipe {study.file.trainer_from} (notes on its keys):")
        lines += [f"  note: {note_text(n, verbose)}" for n in notes]
        lines.append("")
    differences = [*(w for w in study.warnings if isinstance(w, RecipeDifference)), *_stack_differences(study)]
    if differences:
        lines.append("Differs from the recipe's own run (what its stack would have used):" if study.file.trainer_from
                     else "Differs from what TRL alone would run:")
        lines += [f"  differs: {note_text(d, verbose)}" for d in differences]
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
    lines += screen_lines(study)
    if cells:
        lines += ["", f"Trial plan ({len(cells)} trials, seeds {list(study.study.seeds)}):"]
        for i, c in enumerate(cells):
            lines.append(f"  {i:>3}. {c.role:<28} {c.arm.label}, seed {c.seed}")
    elif study.is_planned and study.file.screen is not None:
        lines.append("Trial plan: none (the screen alone, or it left fewer than two arms to compare).")
    else:
        lines.append(f"Trials: {resolved_trial_count(study)} proposed by the {study.sampler_kind} sampler, seeds {list(study.study.seeds)}.")
    lines += ["", *_cost_lines(study), *_limit_lines(study)]
    probe = load_probe(study.output_dir, Owner.of(study))
    if probe is not None:
        lines += ["", f"Probe ({study.output_dir / 'probe.json'}):", *("  " + line for line in probe_table(probe).splitlines())]
    for w in study.warnings:
        if not isinstance(w, RecipeNote):
            lines.append(f"warning: {w}")
    return "\n".join(lines)


def _cost_lines(study: "StudyConfig") -> list[str]:
    cost = trial_cost(study)
    n = cost["completions"]
    if not n:
        return ["Per trial: generated tokens unknown (the budget is tokens or seconds only)."]
    out = [f"Per trial: {n:,} completions x max_completion_length {cost['max_completion_length']} = "
           f"at most {cost['max_tokens']:,} generated tokens."]
    gpu = cost.get("gpu_time")
    prefixes = cost.get("prefixes")
    with_prefixes = (f" and {prefixes['count']} shared prefix{'' if prefixes['count'] == 1 else 'es'} of "
                     f"{prefixes['branch_step']} steps (one per seed, each counted once)" if prefixes else "")
    if cost["seconds"] is not None:
        trials = gpu["trials"] if gpu else resolved_trial_count(study)
        per = cost.get("seconds_per_completion")
        rate = ""
        if per:
            rate = f" ({per:.3g} s per completion"
            rate += f" + {cost['overhead_seconds']:.0f} s start-up and evaluation)" if cost.get("overhead_seconds") else ")"
        out.append(f"Wall time: about {_duration(cost['seconds'])} per trial, {_duration(cost['seconds'] * trials)} "
                   f"for {trials} trials{' (the shared prefixes not included)' if prefixes else ''}{rate}; "
                   f"from {cost['seconds_source']}.")
    else:
        out.append("Wall time: no measurement yet (no finished trial in this study's storage, no probe.json).")
    if gpu and gpu["gpu_hours_study"]:
        lo, hi = gpu["gpu_hours_per_trial"]
        slo, shi = gpu["gpu_hours_study"]
        out.append(f"GPU time (estimate): {fmt_range(lo, hi)} per trial, {fmt_range(slo, shi)} for {gpu['trials']} trials"
                   f"{with_prefixes} at {gpu['gpus_per_trial']} GPU(s) each; {gpu['source']}.")
    elif cost.get("gpu_time_note"):
        out.append(f"GPU time: {cost['gpu_time_note']}.")
    price = planned_price(study)
    out.append(f"Price: {price.words()}.")
    resolves = resolution_line(study, price.multiple)
    if resolves:
        out.append(f"{resolves}.")
    est = cost["estimate"]
    if est["full_run_share"]:
        full = est["full_run_gpu_hours"]
        line = (f"Share of the recipe's full run: one trial is {_share(est['full_run_share'])} of its "
                f"{est['full_run_steps']:,} optimizer steps")
        out.append(line + (f" (the full run: {fmt_range(*full)} at these rates)." if full else "."))
    return out


def _share(x: float) -> str:
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def screen_json(study: "StudyConfig") -> dict[str, Any] | None:
    """The study's screen: what it will run, and what it decided once it ran (screen.json); None without one."""
    screen = study.file.screen
    if screen is None:
        return None
    ran = load_screen(study.output_dir, Owner.of(study))
    return {"generations": screen.generations, "k": screen.k, "prompts": screen.prompts,
            "probe_steps": screen.probe_steps, "confirm": screen.confirm, "ran": ran is not None,
            "dropped": [{"arm": d.label, "rule": d.rule, "reason": d.reason} for d in ran.dropped] if ran else None,
            "kept": list(ran.kept) if ran else None}


def screen_lines(study: "StudyConfig") -> list[str]:
    """plan's words on the screen: what it runs before any training, or what it dropped and why."""
    info = screen_json(study)
    if info is None:
        return []
    gens = info["generations"] or "the study's"
    lines = ["", f"Screen (no training; `grpo-ablate screen`, or `run` starts with it): advise over G {gens} "
                 f"({info['prompts']} prompts x {info['k']} samples), a probe of each arm ({info['probe_steps']} steps); "
                 "arms it shows dominated are dropped before training."]
    if info["ran"]:
        lines += [f"  dropped {d['reason']}" for d in info["dropped"]] or ["  it dropped no arm."]
    else:
        lines.append("  Not run yet: the plan below is the most the confirm stage trains.")
    if not info["confirm"]:
        lines.append("  The study is the screen alone (screen.confirm: false): no arm is trained.")
    return lines


# ------------------------------------------------------------------ plan --commands (a dry run)


def commands_text(study: "StudyConfig") -> str:
    """`plan --commands`: every arm's command lines, environments and GRPOConfig arguments, as `run` would use them."""
    rows = launch_plan(study)
    lines = [f"Launch plan of {study.study.name!r}: {len(rows)} arm(s), each as its first trial would start "
             f"(nothing is run; ports and trial folders are chosen at run time)"]
    schedule = lr_schedule_of(study.budget.model_dump())
    full = estimate_trial(study).full_run_steps
    lines.append(f"Learning-rate schedule: {schedule}" + (
        f" (built for the full run's {full:,} optimizer steps; each trial runs the first of them)"
        if schedule == "prefix" and full else " (the full run's length is counted when the trial has loaded its prompts)"
        if schedule == "prefix" else " (fitted into each trial's own steps)"))
    lines.append("")
    roles = {"vllm_server": "vLLM server", "training": "training", "script": "the script"}
    for row in rows:
        lines.append(f"{row['role']}: {row['arm']}, seed {row['seed']}")
        env = row["environment"]
        if "vllm_server" in env:
            lines.append(f"  GPUs: vLLM server CUDA_VISIBLE_DEVICES={env['vllm_server'].get('CUDA_VISIBLE_DEVICES', '')!r}, "
                         f"training CUDA_VISIBLE_DEVICES={env['training'].get('CUDA_VISIBLE_DEVICES', '')!r}")
        elif "CUDA_VISIBLE_DEVICES" in env.get("training", {}):
            lines.append(f"  GPUs: training CUDA_VISIBLE_DEVICES={env['training']['CUDA_VISIBLE_DEVICES']!r}")
        if "vllm_server" in row:
            lines.append(f"  vLLM server: {shlex.join(row['vllm_server'])}")
        lines.append(f"  training:    {shlex.join(row['launch'])}")
        if "script" in row:
            lines.append(f"  the script:  {shlex.join(row['script'])}" if row["script"] else
                         f"  the script:  cannot run: {row['script_problem']}")
        for role, values in env.items():
            lines.append(f"  environment ({roles.get(role, role)}), set by the launcher:")
            lines += [f"    {k}={v}" + ("   (per launch)" if k in VOLATILE else "") for k, v in values.items()]
        if "grpo_config" in row:
            lines.append("  GRPOConfig (as the trial runs it):")
            lines += [f"    {k}: {v!r}" for k, v in sorted(row["grpo_config"].items())]
            lines += [f"    note: {n}" for n in row["grpo_config_notes"]]
        lines.append("")
    return "\n".join(lines)


def limits_json(study: "StudyConfig") -> dict[str, Any]:
    """The trial timeout (and its warning), the checkpoint interval and the GPU-hour budget, as plan shows them."""
    estimate = limits.planned_estimate(study)  # estimate_trial's: measured (storage, probe), else assumed
    seconds, words = limits.resolve_timeout(study.study.trial_timeout, estimate)
    out: dict[str, Any] = {"trial_timeout_s": seconds, "trial_timeout": words,
                           "timeout_warning": limits.timeout_warning(study.study.trial_timeout, estimate),
                           "checkpoint_steps": study.study.checkpoint_steps, "keep_checkpoints": study.study.keep_checkpoints,
                           "budget_gpu_hours": study.study.budget_gpu_hours, "trials_in_budget": None}
    gpus = int(study.hardware.gpus or 0)
    budget = study.study.budget_gpu_hours
    if isinstance(budget, RunShare):
        out["budget_gpu_hours"], out["budget_share_of_run"] = float(budget), budget.share
    if isinstance(budget, (int, float)) and estimate is not None and gpus:
        lo, hi = (s * gpus / 3600.0 for s in estimate.seconds)
        out["trials_in_budget"] = [int(budget // hi), int(budget // lo)]
    return out


def _limit_lines(study: "StudyConfig") -> list[str]:
    info = limits_json(study)
    every = info["checkpoint_steps"]
    lines = [f"Trial timeout: {info['trial_timeout']}.",
             "Checkpoints: " + ("none (study.checkpoint_steps: null): a killed trial starts over" if every is None else
                                ("every ~10% of a trial once 5 min trained since the last" if every == "auto"
                                 else f"every {every} optimizer steps")
                                + "; a retried or pre-empted trial resumes its last one"
                                + ("" if every is None or info["keep_checkpoints"] else ", removed when it ends") + ".")]
    budget = info["budget_gpu_hours"]
    if isinstance(budget, str):  # a share of the run that nothing here turns into GPU-hours
        lines.append(f"GPU-hour budget: {budget} of the full run, whose GPU-hours are not known here (see Price); "
                     "`run` refuses it until they are, or write the budget in GPU-hours.")
    elif budget is not None:
        if info.get("budget_share_of_run"):
            budget_words = f"{info['budget_share_of_run']:g}x your run = {budget:,.1f} GPU-h (the full run's low estimate)"
        else:
            budget_words = f"{budget:g}"
        n = resolved_trial_count(study)
        fit = info["trials_in_budget"]
        if not study.hardware.gpus:
            lines.append(f"GPU-hour budget: {budget_words}; a CPU study spends none (hardware.gpus is unset).")
        elif fit is None:
            lines.append(f"GPU-hour budget: {budget_words}; nothing estimates a trial yet, so trials run one at a time until "
                         "one has finished, then none starts that would cross it.")
        else:
            lo, hi = min(fit[0], n), min(fit[1], n)
            many = (f"all {n} trials fit" if lo == n else
                    f"{lo}{'' if lo == hi else ' to ' + ('all ' if hi == n else '') + str(hi)} of the {n} trials fit")
            lines.append(f"GPU-hour budget: {budget_words}; {many} in it by the estimate"
                         + ("" if fit[0] >= n else "; the study stops before the trial that would cross it") + ".")
    if info["timeout_warning"]:
        lines.append(f"warning: {info['timeout_warning']}")
    return lines
