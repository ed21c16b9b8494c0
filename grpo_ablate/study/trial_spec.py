"""A trial's plan (contract/spec.py's TrialSpec), resolved in one place by the parent.

    from grpo_ablate.study.trial_spec import build_spec
    spec = build_spec(study, Cell(Arm(4, 32, 0.9), 0, "probe"), Path("runs/x/probe/00000"))

`build_spec` takes a validated StudyConfig and a cell (`run-one`, `probe`, the benchmarks), `plan_spec` also the
run's plan (`run`);
`spec_from_sections` takes plain section dicts (tests, scripts, benchmarks without a study file).
Both go through `_spec`, which resolves, once, what the child then only executes: the arm's G as
a value (an int or a schedule object, never text), the sections with every schema default filled,
and the batch arithmetic (space.py's rule: optimizer steps, generation rounds, completions, what
the evaluation points divide). No Optuna here.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pydantic import BaseModel

from grpo_ablate.plan.branching import branch_step
from grpo_ablate.config import BudgetSection, DataSection, HardwareSection, ModelSection
from grpo_ablate.config.hardware import trainer_batch_shape
from grpo_ablate.core.schedule import Schedule, generations_text
from grpo_ablate.core.space import generated_completions, optimizer_steps
from grpo_ablate.study.limits import planned_estimate, resolve_timeout
from grpo_ablate.study.trackers import tracker_settings
from grpo_ablate.contract.spec import (BudgetSpec, CheckpointSpec, DataSpec, EvalBudget, EvaluationSpec, HardwareSpec,
                                       ModelSpec, RewardEntry, ScriptSpec, StartFrom, TrialSpec, section_from)
from grpo_ablate.files.advise_file import fitted_prior, load_advice
from grpo_ablate.files.probe_file import Probe, host_peak_mb, load_probe
from grpo_ablate.files.owned import Owner
from grpo_ablate.core.vocab import PREFIX_ROLE, TRIAL_KEYS, Arm, Cell

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig
    from grpo_ablate.plan.run_plan import StudyPlan

__all__ = ["build_spec", "plan_spec", "spec_from_sections"]


@functools.cache
def _defaults(section: type[BaseModel]) -> dict[str, Any]:
    """A study section's field defaults as plain data, nested sections included.

    Read from the fields rather than an instance: BudgetSection refuses an empty budget.
    """
    out: dict[str, Any] = {}
    for name, info in section.model_fields.items():
        value = info.get_default(call_default_factory=True)
        out[name] = value.model_dump() if isinstance(value, BaseModel) else value
    return out


def _merged(section: type[BaseModel], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """`given` over the section's defaults (one level of nested sections merged too): the child
    reads every key the trainer core looks up without knowing the schema."""
    out = copy.deepcopy(_defaults(section))
    for key, value in (given or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _generations(value: Any) -> int | None:
    if value is None or isinstance(value, Schedule):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"num_generations must be an int or a schedule object, got {value!r}; a label is read by the "
                    "study-file loader (config), not here")


def _eval_budget(budget: Mapping[str, Any], completions: int | None, max_steps: int | None) -> EvalBudget:
    """Tokens when the budget is in tokens, else the completions of max_steps, else seconds."""
    if budget.get("tokens"):
        return EvalBudget("tokens", float(budget["tokens"]))
    if max_steps:
        return EvalBudget("completions", float(completions or 0))
    if budget.get("seconds"):
        return EvalBudget("seconds", float(budget["seconds"]))
    return EvalBudget("completions", 0.0)  # epochs only: no interior points, start and end still scored


def _spec(trial_dir: str | Path, *, knobs: Mapping[str, Any], params: Mapping[str, Any],
          model: Mapping[str, Any] | None, data: Mapping[str, Any] | None, rewards: Sequence[Mapping[str, Any] | str],
          trainer: Mapping[str, Any] | None, budget: Mapping[str, Any] | None, hardware: Mapping[str, Any] | None,
          evaluation: Mapping[str, Any] | None, timeout_s: float | None, env: Mapping[str, str] | None,
          checkpoint: Mapping[str, Any] | None = None, start_from: StartFrom | None = None,
          branch_at: int | None = None, script: Mapping[str, Any] | None = None,
          advise_prior: tuple[float, float] | None = None) -> TrialSpec:
    """The one resolution: the trial's knobs go into the trainer keywords, except G, which is the
    plan's own typed field; a generation batch given displaces steps_per_generation (TRL refuses
    both); the budget owns max_steps; then the batch arithmetic, from space.py's rule.

    `branch_at`: a branch trial's start step B. The budget is the branch's own (its completions,
    its evaluation points); the trainer's max_steps is B plus those steps, as the global step
    goes on from the prefix's checkpoint."""
    merged = dict(trainer or {})
    g = _generations(knobs.get("num_generations", merged.get("num_generations")))
    merged.pop("num_generations", None)
    for key in TRIAL_KEYS:
        value = knobs.get(key)
        if value is not None and key != "num_generations":
            merged[key] = value
    if knobs.get("generation_batch_size") is not None:
        merged.pop("steps_per_generation", None)
    steps = merged.pop("max_steps", None)
    spent = _merged(BudgetSection, budget)
    if spent.get("max_steps") is None and isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        spent["max_steps"] = steps
    hw = _merged(HardwareSection, hardware)
    shape = trainer_batch_shape(merged, int(hw.get("num_processes") or 1))
    gbs = merged.get("generation_batch_size")
    max_steps = optimizer_steps(shape, max_steps=spent.get("max_steps"), completions=spent.get("completions"))
    completions = generated_completions(shape, max_steps=max_steps) if max_steps else None
    eval_budget = _eval_budget(spent, completions, max_steps)
    if branch_at is not None and max_steps:
        max_steps += int(branch_at)
    return TrialSpec(
        trial_dir=str(trial_dir),
        model=section_from(ModelSpec, _merged(ModelSection, model), "model"),
        data=section_from(DataSpec, _merged(DataSection, data), "data"),
        rewards=[RewardEntry(r) if isinstance(r, str) else section_from(RewardEntry, dict(r), "rewards[]") for r in rewards],
        trainer=merged,
        budget=section_from(BudgetSpec, spent, "budget"),
        hardware=section_from(HardwareSpec, hw, "hardware"),
        params={k: generations_text(v) if k == "num_generations" and isinstance(v, int) else v for k, v in params.items()},
        evaluation=section_from(EvaluationSpec, dict(evaluation), "evaluation") if evaluation is not None else None,
        timeout_s=timeout_s,
        env=dict(env or {}),
        checkpoint=section_from(CheckpointSpec, dict(checkpoint), "checkpoint") if checkpoint is not None else None,
        num_generations=g,
        max_steps=max_steps,
        rounds=shape.rounds(gbs if isinstance(gbs, int) and not isinstance(gbs, bool) and gbs > 0 else None),
        generated_per_step=shape.generated_per_step,
        completions=completions,
        eval_budget=eval_budget,
        start_from=start_from,
        script=section_from(ScriptSpec, dict(script), "script") if script is not None else None,
        advise_prior=advise_prior,
    )


def _script(study: "StudyConfig") -> dict[str, Any] | None:
    """A command trial's script: the command, its environment and folder, the recipe it reads, and the trainer
    keys the study file itself sets (the script gets those as overrides; the recipe's it reads itself)."""
    if study.script is None:
        return None
    own = study.own_trainer_keys
    keys = list(study.trainer) if own is None else [k for k in own if k in study.trainer]
    return {"command": study.script.command, "python": study.script.python, "cwd": study.script.cwd,
            "recipe": study.file.trainer_from, "trainer": {k: study.trainer[k] for k in keys}}


def _advise_prior(study: "StudyConfig", arm: Arm) -> tuple[float, float] | None:
    """A per-prompt G arm's prior from advise.json (read with the study's owner, so a foreign or broken file is
    refused here, naming the fix); None for any other arm, or without a fit."""
    if getattr(arm.num_generations, "kind", None) != "adaptive":
        return None
    return fitted_prior(load_advice(study.output_dir, Owner.of(study)), float(arm.temperature))


def _host_memory(probe: Probe | None, spec: TrialSpec) -> float | None:
    """The probe's host-memory peak for the trial's shape (its G, its generation batch when it names one): a launcher
    that reserves memory (SLURM) sizes the job from it, without reading the study's files."""
    if probe is None:
        return None
    return host_peak_mb(probe.points, spec.num_generations, spec.trainer.get("generation_batch_size"))


def build_spec(study: "StudyConfig", cell: Cell, trial_dir: Path, env: dict[str, str] | None = None,
               timeout: float | None = None, *, probe_steps: int | None = None,
               start_from: StartFrom | None = None) -> TrialSpec:
    """A trial of this study outside a run (run-one, probe, validate): what the run's plan holds is read here.

    `timeout`: by default resolved from the planned estimate. `probe_steps`: a probe point
    (preflight/probe.py): the cell's generation batch whatever the study searches, and a budget of
    exactly that many steps. `start_from`: as plan_spec's.
    """
    setting = study.study.trial_timeout
    if timeout is None and setting is not None:  # the estimate is read only when auto needs it
        timeout, _ = resolve_timeout(setting, planned_estimate(study) if setting == "auto" else None)
    step = branch_step(study) if cell.role == PREFIX_ROLE else None
    return _build(study, cell, trial_dir, env, timeout, probe_steps=probe_steps, start_from=start_from,
                  prefix_steps=step, prior=_advise_prior(study, cell.arm),
                  probe=load_probe(study.output_dir, Owner.of(study)))


def plan_spec(study: "StudyConfig", plan: "StudyPlan", cell: Cell, trial_dir: Path, env: dict[str, str] | None = None, *,
              timeout: float | None, start_from: StartFrom | None = None) -> TrialSpec:
    """A trial of a run: what the run resolved once (its branch step, the advice a per-prompt G starts from)
    comes from its plan, so a trial never re-reads a file the plan read.

    `timeout`: the trial's seconds (the runner resolves study.trial_timeout with what the study measured).
    `start_from`: a branch point (contract/spec.py's StartFrom): the trial trains its budget from that step on (the
    lifecycle gives a branch its prefix's checkpoint). A prefix cell (plan.PREFIX_ROLE) trains exactly the branch
    step's many steps and seals a checkpoint at its last step (checkpoint "final"), the one its branches start from.
    """
    return _build(study, cell, trial_dir, env, timeout, probe_steps=None, start_from=start_from,
                  prefix_steps=plan.branch_step if cell.role == PREFIX_ROLE else None, prior=plan.prior(cell.arm),
                  probe=plan.probe)


def _build(study: "StudyConfig", cell: Cell, trial_dir: Path, env: dict[str, str] | None, timeout: float | None, *,
           probe_steps: int | None, start_from: StartFrom | None, prefix_steps: int | None,
           prior: tuple[float, float] | None, probe: Probe | None) -> TrialSpec:
    """The study's sections with the cell's knobs, its trackers and its world size.

    The generation batch is the cell's only when the study searches batches (or for a probe point); otherwise TRL
    derives it from the trainer section, as it would without this tool."""
    arm = cell.arm
    prefix = cell.role == PREFIX_ROLE
    knobs: dict[str, Any] = {"num_generations": arm.num_generations, "temperature": arm.temperature, "seed": cell.seed}
    if study.space.batch_searched or (probe_steps is not None and not prefix):
        knobs["generation_batch_size"] = arm.generation_batch_size
    budget = study.budget.model_dump()
    if prefix:
        probe_steps = prefix_steps
        if probe_steps is None:
            raise ValueError(f"{cell.key} is a prefix cell, but the study does not branch (budget.branch_from)")
    if probe_steps is not None:
        budget = {**budget, "max_steps": probe_steps, "completions": None, "tokens": None, "seconds": None}
    tracked, tracker_env = tracker_settings(study, cell)
    hardware = study.hardware.model_dump()
    hardware["num_processes"] = study.world_size
    spec = _spec(trial_dir, knobs=knobs, params=cell.as_attrs(), model=study.model.model_dump(),
                 data=study.data.model_dump(), rewards=[r.model_dump() for r in study.rewards],
                 trainer={**study.trainer, **tracked}, budget=budget, hardware=hardware,
                 evaluation=study.file.evaluation.model_dump() if study.file.evaluation is not None else None,
                 timeout_s=timeout, env={**tracker_env, **(env or {})},
                 checkpoint={"every": study.study.checkpoint_steps, "keep": study.study.keep_checkpoints,
                             "final": prefix},
                 start_from=start_from, branch_at=start_from.step if start_from is not None else None,
                 script=_script(study), advise_prior=prior)
    return replace(spec, host_memory_mb=_host_memory(probe, spec))


def spec_from_sections(
    trial_dir: str | Path,
    *,
    model: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    rewards: Sequence[dict[str, Any] | str] = (),
    trainer: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    hardware: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    evaluation: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
    checkpoint: dict[str, Any] | None = None,
    start_from: StartFrom | None = None,
    advise_prior: tuple[float, float] | None = None,
) -> TrialSpec:
    """A TrialSpec from plain section dicts; the trial's `params` (TRIAL_KEYS) are merged into the trainer.

    For callers without a validated StudyConfig. Missing section keys take the study schema's defaults.
    num_generations (in `params` or `trainer`) is an int or a schedule object, never its label.
    """
    return _spec(trial_dir, knobs=params or {}, params=params or {}, model=model, data=data, rewards=rewards,
                 trainer=trainer, budget=budget, hardware=hardware, evaluation=evaluation, timeout_s=timeout_s,
                 env=env, checkpoint=checkpoint, start_from=start_from, advise_prior=advise_prior)
