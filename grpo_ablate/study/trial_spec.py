"""A trial process's whole input (trainer/spec.py's TrialSpec), built in one place.

    from grpo_ablate.study.trial_spec import build_spec
    spec = build_spec(study, Cell(Arm(4, 32, 0.9), 0, "probe"), Path("runs/x/probe/00000"))

`build_spec` takes a validated Study and a cell (`run`, `run-one`, `probe`, the benchmarks);
`spec_from_sections` takes plain section dicts (tests, scripts, benchmarks without a study file).
Both merge the trial's knobs into the trainer section the same way (`_spec`). No Optuna here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.study.limits import planned_estimate, resolve_timeout
from grpo_ablate.trainer.spec import TrialSpec
from grpo_ablate.vocab import TRIAL_KEYS, Cell, generations_text
from grpo_ablate.study.trackers import tracker_settings

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["build_spec", "spec_from_sections"]


def _spec(trial_dir: str | Path, *, knobs: Mapping[str, Any], params: Mapping[str, Any],
          model: Mapping[str, Any] | None, data: Mapping[str, Any] | None, rewards: Sequence[Mapping[str, Any] | str],
          trainer: Mapping[str, Any] | None, budget: Mapping[str, Any] | None, hardware: Mapping[str, Any] | None,
          evaluation: Mapping[str, Any] | None, timeout_s: float | None, env: Mapping[str, str] | None,
          checkpoint: Mapping[str, Any] | None = None) -> TrialSpec:
    """The one merge: the trial's knobs (G as its text, a schedule's label included: trainer/scheduled.py)
    go into the trainer; a generation batch given displaces steps_per_generation (TRL refuses both);
    the budget owns max_steps."""
    merged = dict(trainer or {})
    for key in TRIAL_KEYS:
        value = knobs.get(key)
        if value is not None:
            merged[key] = generations_text(value) if key == "num_generations" else value
    if knobs.get("generation_batch_size") is not None:
        merged.pop("steps_per_generation", None)
    steps = merged.pop("max_steps", None)
    spent = dict(budget or {})
    if spent.get("max_steps") is None and isinstance(steps, int):
        spent["max_steps"] = steps
    return TrialSpec(
        trial_dir=str(trial_dir),
        model=dict(model or {}),
        data=dict(data or {}),
        rewards=[{"name": r} if isinstance(r, str) else dict(r) for r in rewards],
        trainer=merged,
        budget=spent,
        hardware=dict(hardware or {}),
        params=dict(params),
        evaluation=dict(evaluation) if evaluation is not None else None,
        timeout_s=timeout_s,
        env=dict(env or {}),
        checkpoint=dict(checkpoint) if checkpoint is not None else None,
    )


def build_spec(study: "Study", cell: Cell, trial_dir: Path, env: dict[str, str] | None = None,
               timeout: float | None = None) -> TrialSpec:
    """A trial of this study: its sections with the cell's knobs, its trackers and its world size.

    The generation batch is the cell's only when the study searches batches; otherwise TRL
    derives it from the trainer section, as it would without this tool. `timeout`: the trial's
    seconds (the runner resolves study.trial_timeout with what the study measured); by default it
    is resolved here from the planned estimate (run-one, probe).
    """
    setting = study.study.trial_timeout
    if timeout is None and setting is not None:  # the estimate is read only when auto needs it
        timeout, _ = resolve_timeout(setting, planned_estimate(study) if setting == "auto" else None)

    arm = cell.arm
    knobs: dict[str, Any] = {"num_generations": arm.num_generations, "temperature": arm.temperature, "seed": cell.seed}
    if study.space.batch_searched:
        knobs["generation_batch_size"] = arm.generation_batch_size
    tracked, tracker_env = tracker_settings(study, cell)
    hardware = study.hardware.model_dump()
    hardware["num_processes"] = study.world_size
    return _spec(trial_dir, knobs=knobs, params=cell.as_attrs(), model=study.model.model_dump(),
                 data=study.data.model_dump(), rewards=[r.model_dump() for r in study.rewards],
                 trainer={**study.trainer, **tracked}, budget=study.budget.model_dump(), hardware=hardware,
                 evaluation=study.file.evaluation.model_dump() if study.file.evaluation is not None else None,
                 timeout_s=timeout, env={**tracker_env, **(env or {})},
                 checkpoint={"every": study.study.checkpoint_steps, "keep": study.study.keep_checkpoints})


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
) -> TrialSpec:
    """A TrialSpec from plain section dicts; the trial's `params` (TRIAL_KEYS) are merged into the trainer.

    For callers without a validated Study. Missing section keys take the schema defaults
    (trainer/spec.py).
    """
    return _spec(trial_dir, knobs=params or {}, params=params or {}, model=model, data=data, rewards=rewards,
                 trainer=trainer, budget=budget, hardware=hardware, evaluation=evaluation, timeout_s=timeout_s, env=env)
