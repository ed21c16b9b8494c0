"""The trial plan: what one trial is, resolved once by the parent, and the result it reads back.

No torch here: the orchestrator imports it. `<trial_dir>/spec.json` is the trial process's
whole input, so a trial can be re-run by hand:

    python -m grpo_ablate.trainer.worker runs/x/trials/00003/spec.json

The parent (study/trial_spec.py: `build_spec` from a StudyConfig, `spec_from_sections` from plain
sections) resolves everything a trial needs, once, into a `TrialSpec`; the child (trainer/worker,
build, scheduled, evaluation) executes it: it never re-derives the batch arithmetic, never parses
G from text and never reads the study-file schema. The fields of spec.json:

- `trial_dir`; `model`, `data`, `rewards`, `hardware`, `evaluation`, `env`, `timeout_s`,
  `checkpoint` ({"every", "keep", "final"} or null; "final": seal the last step too, a branching
  study's prefix): the study's sections, every key filled;
- `trainer`: GRPOConfig keyword arguments verbatim (temperature, seed and a searched
  generation_batch_size included), never num_generations and never max_steps;
- `num_generations`: the arm's G, an int or a schedule object (schedule.generations_data:
  `{"kind": "schedule", "label": "4→8@40%", "phases": [4, 8], "switches": [...]}`); null: TRL's default;
- `max_steps`: the optimizer steps (budget.max_steps and/or completions; null: tokens/seconds only);
  a branch (`start_from`) trains to its branch step plus its budget's steps;
- `rounds`: TRL's generation cadence (space.Rounds: steps_per_generation, gradient_accumulation_steps,
  num_iterations): reward rows, round-aligned checkpoints and a schedule's round steps follow from it;
- `generated_per_step`, `completions`: completions generated per optimizer step and in all (a
  branch: in its own steps);
- `eval_budget`: {"unit", "total"}, what the held-out evaluation points divide;
- `budget`: the rest of the study's budget (tokens, seconds: the stop switch; lr_schedule, full_run);
- `params`: the searched values, for the record (display text; the child never reads G from it);
- `start_from`: a branch point, {"checkpoint": folder, "step": n, "fingerprint": the prefix spec's} or null
  (see `StartFrom`);
- `advise_prior`: [a, b], the Beta prior of a prompt's pass rate a per-prompt G policy (`adaptive:`) starts from:
  advise.json's fit at the temperature nearest the arm's, resolved by the parent (files/advise_file.py's
  `fitted_prior`, the study's owner checked); null: no fit (the policy starts from the running pass rate);
- `script`: a command trial, {"command", "python", "cwd", "recipe", "trainer"} or null: the user's own training
  script runs instead of the built-in worker (trainer/command.py turns the plan into its command line;
  `trainer` holds the GRPOConfig keys the study file itself sets, passed as overrides).

One codec: `to_json` / `from_json` (round-trip tested, G schedules included).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from grpo_ablate.schedule import generations_data, generations_from_data
from grpo_ablate.space import Rounds
from grpo_ablate.vocab import SPEC_FILE, Outcome

__all__ = ["EvalBudget", "StartFrom", "TrialResult", "TrialSpec"]


@dataclass(frozen=True)
class StartFrom:
    """A branch point: the trial starts from this checkpoint instead of from the model's weights.

    `checkpoint`: a checkpoint folder holding weights, optimizer, scheduler, RNG states and
    trainer_state.json: another trial's sealed `<trial_dir>/checkpoints/checkpoint-<step>`
    (trainer/checkpoints.py), or any folder TRL's Trainer saved; `step`: the optimizer
    step it holds (checked against the folder). The child resumes model, optimizer and scheduler
    state from it (trainer/checkpoints.py's resume path, `trainer.train(resume_from_checkpoint=...)`)
    and trains from step + 1 to `max_steps`; when the folder is a complete checkpoint of this
    package (it has its clock) and the trial checkpoints, the data sampler's state goes on too.
    The trial's own metrics, completions and seconds start at zero: a branch's result is about
    its own steps, and the prefix's compute is counted once, in the prefix. The trial's own
    newer checkpoint, when it has one (a retry), wins. Arms that branch from one
    shared prefix (issue 39) set it; None (the default): the trial starts from the model.
    `fingerprint`: the spec fingerprint the checkpoint's manifest must name (the prefix's spec, as the study file
    builds it today): the trial verifies the checkpoint as a resume would before it loads it (issue 52); None (a
    folder of another tool, a spec written before it was kept): only its step is checked.
    """

    checkpoint: str
    step: int
    fingerprint: str | None = None


@dataclass(frozen=True)
class EvalBudget:
    """What the held-out evaluation points divide: `unit` tokens, completions or seconds, `total` of them."""

    unit: str = "completions"
    total: float = 0.0


@dataclass
class TrialSpec:
    """Everything one trial process needs, resolved by the parent (module docstring: the fields).

    `trainer` holds GRPOConfig keyword arguments verbatim (never a built config: TRL fills
    generation_batch_size and steps_per_generation in __post_init__, so a rebuilt config raises).
    Build it with study/trial_spec.py (which fills every section's defaults), not by hand.
    """

    trial_dir: str
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    rewards: list[dict[str, Any]] = field(default_factory=list)
    trainer: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None  # the study's resolved `evaluation:` section; None: no held-out scoring
    timeout_s: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    # {"every": steps or "auto" or None, "keep": bool, "final": bool}: checkpoint and resume (trainer/checkpoints.py); None: never
    checkpoint: dict[str, Any] | None = None
    num_generations: int | None = None  # an int or a schedule.Schedule (never text); None: TRL's default
    max_steps: int | None = None
    rounds: Rounds = field(default_factory=lambda: Rounds(1))
    generated_per_step: float = 0.0
    completions: int | None = None
    eval_budget: EvalBudget = field(default_factory=EvalBudget)
    start_from: StartFrom | None = None
    script: dict[str, Any] | None = None  # a command trial: the user's script (module docstring)
    advise_prior: tuple[float, float] | None = None  # an adaptive G's Beta(a, b) prior from advise.json (module docstring)

    def __post_init__(self) -> None:
        self.trial_dir = os.fspath(self.trial_dir)
        self.rewards = [{"weight": 1.0, **r} for r in (self.rewards or [])]
        self.env = {str(k): str(v) for k, v in (self.env or {}).items()}
        if self.advise_prior is not None:
            a, b = (float(x) for x in self.advise_prior)
            if not (a > 0 and b > 0):  # NaN fails too
                raise ValueError(f"advise_prior must be two positive numbers (a Beta's a, b), got {self.advise_prior!r}")
            self.advise_prior = (a, b)
        if "num_generations" in self.trainer:
            raise ValueError("the trial plan's num_generations is its own field, not a trainer keyword")

    @property
    def path(self) -> Path:
        return Path(self.trial_dir)

    @property
    def num_processes(self) -> int:
        """Training processes per trial; the schema's None (not set) means one."""
        return int(self.hardware.get("num_processes") or 1)

    def to_json(self) -> str:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["num_generations"] = None if self.num_generations is None else generations_data(self.num_generations)
        out["rounds"] = asdict(self.rounds)
        out["eval_budget"] = asdict(self.eval_budget)
        out["start_from"] = None if self.start_from is None else asdict(self.start_from)
        return json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False, default=str)

    @classmethod
    def from_json(cls, text: str) -> "TrialSpec":
        raw = json.loads(text)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"spec.json has unknown keys {unknown}; known keys are {sorted(known)}")
        try:
            if raw.get("num_generations") is not None:
                raw["num_generations"] = generations_from_data(raw["num_generations"])
            if "rounds" in raw:
                raw["rounds"] = Rounds(**raw["rounds"])
            if "eval_budget" in raw:
                raw["eval_budget"] = EvalBudget(**raw["eval_budget"])
            if raw.get("start_from") is not None:
                raw["start_from"] = StartFrom(**raw["start_from"])
        except TypeError as e:
            raise ValueError(f"spec.json: {e}") from None
        return cls(**raw)

    def save(self) -> Path:
        """Write `<trial_dir>/spec.json` (atomically: a crash never leaves half a spec)."""
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / SPEC_FILE
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, target)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "TrialSpec":
        return cls.from_json(Path(path).read_text())


@dataclass
class TrialResult:
    """What the parent learns about a finished trial.

    `metrics` are the headline metrics (grpo_ablate.metrics.summarize over metrics.jsonl, plus
    load/build seconds); they are filled for every outcome, partial runs included.
    """

    outcome: Outcome
    reason: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    log_tail: str = ""
    exception_type: str | None = None
    exception_message: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    world_size: int | None = None
    trial_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome.value
        return out
