"""The trial plan: what one trial is, resolved once by the parent, and the result it reads back.

No torch here: the orchestrator imports it. `<trial_dir>/spec.json` is the trial process's
whole input, so a trial can be re-run by hand:

    python -m grpo_ablate.trainer.worker runs/x/trials/00003/spec.json

Part of the contract (contract/): everything that crosses from parent to child.

The parent (study/trial_spec.py: `build_spec` from a StudyConfig, `spec_from_sections` from plain
sections) resolves everything a trial needs, once, into a `TrialSpec`; the child (trainer/worker,
build, scheduled, evaluation) executes it: it never re-derives the batch arithmetic, never parses
G from text and never reads the study-file schema. The fields of spec.json:

- `trial_dir`; `model`, `data`, `rewards`, `hardware`, `evaluation`, `env`, `timeout_s`,
  `checkpoint` ({"every", "keep", "final"} or null; "final": seal the last step too, a branching
  study's prefix): the study's sections, every key filled, each a typed frozen section here (`ModelSpec`,
  `DataSpec`, `BudgetSpec`, `HardwareSpec`, `EvaluationSpec`, `CheckpointSpec`, `ScriptSpec`) written as the
  study file's own keys; `rewards`: a list of `RewardEntry` ({"name", "weight", "args"});
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
- `host_memory_mb`: the host memory (MB) `grpo-ablate probe` measured for the trial's shape on CPU (probe.json,
  resolved by the parent: files/probe_file.py's `host_peak_mb`); a launcher that reserves memory sizes its job from
  it (SLURM's --mem); null: not measured. A launch detail, left out of the checkpoint fingerprint;
- `script`: a command trial, {"command", "python", "cwd", "recipe", "trainer"} or null: the user's own training
  script runs instead of the built-in worker (contract/command.py turns the plan into its command line;
  `trainer` holds the GRPOConfig keys the study file itself sets, passed as overrides).

One codec: `to_json` / `from_json` (round-trip tested, G schedules included).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from grpo_ablate.core.cost import FullRun
from grpo_ablate.core.schedule import generations_data, generations_from_data
from grpo_ablate.core.space import Rounds
from grpo_ablate.core.vocab import SPEC_FILE

__all__ = ["BudgetSpec", "CheckpointSpec", "DataSpec", "EvalBudget", "EvaluationSpec", "HardwareSpec", "ModelSpec",
           "RewardEntry", "ScriptSpec", "StartFrom", "TrialSpec", "VllmSpec", "section_from"]

_S = TypeVar("_S")


def section_from(cls: type[_S], raw: Any, where: str) -> _S:
    """A typed section from its spec.json data (a dict), strictly: a key the section lacks is refused, naming it,
    so a spec.json from a newer study file fails loudly instead of losing a setting. An instance passes through."""
    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, dict):
        raise ValueError(f"spec.json's {where} must be an object, got {raw!r}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"spec.json's {where} has unknown keys {unknown}; known keys are {sorted(known)}")
    return cls(**raw)


# The sections: the study file's sections (config/schema.py) as the child reads them, every key filled by the
# parent (study/trial_spec.py). Same names and defaults as the schema (tests/test_contract.py checks it), so
# spec.json keeps the study file's shape; no pydantic here, the child never imports the schema.


@dataclass(frozen=True)
class RewardEntry:
    """One reward (config's `rewards:` entry): a built-in name or `module:function`, its weight, its factory's args."""

    name: str
    weight: float = 1.0
    args: dict[str, Any] | None = None


@dataclass(frozen=True)
class ModelSpec:
    """The policy model (config's `model:`)."""

    name_or_path: str = "builtin:tiny"
    dtype: str | None = None  # "auto", "float32", "bfloat16", "float16"; None: the checkpoint's own
    attn_implementation: str | None = None
    trust_remote_code: bool = False
    revision: str | None = None


@dataclass(frozen=True)
class DataSpec:
    """The training prompts (config's `data:`): a built-in task or a dataset."""

    task: str | None = None
    dataset: str | None = None
    config_name: str | None = None
    split: str = "train"
    prompt_column: str = "prompt"
    system_prompt: str | None = None
    chat_template: bool | str | None = None
    max_samples: int | None = None
    num_prompts: int | None = None
    max_prompt_tokens: int | None = None


@dataclass(frozen=True)
class VllmSpec:
    """vLLM generation (config's `hardware.vllm:`)."""

    mode: str = "none"  # "none", "colocate", "server"
    server_gpus: int = 1
    port: int = 8000


@dataclass(frozen=True)
class HardwareSpec:
    """Where the trial runs (config's `hardware:`); `num_processes` is the parent's resolved world size."""

    num_processes: int | None = None
    gpus: int | None = None
    accelerate_config: str | None = None
    launcher: str = "auto"
    command: str = "auto"  # "auto", "python", "torchrun", "accelerate"
    vllm: VllmSpec = field(default_factory=VllmSpec)
    memory_limit_mb: int | None = None
    gpu_type: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "vllm", section_from(VllmSpec, self.vllm, "hardware.vllm"))


@dataclass(frozen=True)
class BudgetSpec:
    """What a trial may spend (config's `budget:`). `lr_schedule`: "prefix" or "compressed", resolved by the parent
    (cost.lr_schedule_of); `full_run`: the recipe's whole run (core/cost.py's `FullRun`), which the child turns into
    steps once it knows its dataset's size (cost.full_run_steps)."""

    max_steps: int | None = None
    completions: int | None = None
    tokens: int | None = None
    seconds: float | None = None
    lr_schedule: str | None = None
    full_run: FullRun | None = None
    allow_inside_warmup: bool = False
    branch_from: int | str | None = None

    def __post_init__(self) -> None:
        if self.full_run is not None:
            object.__setattr__(self, "full_run", section_from(FullRun, self.full_run, "budget.full_run"))


@dataclass(frozen=True)
class EvaluationSpec:
    """Held-out scoring (config's `evaluation:`)."""

    num_prompts: int = 128
    dataset: str | None = None
    split: str | None = None
    temperature: float = 0.0
    samples_per_prompt: int = 1
    max_completion_length: int | None = None
    points: int = 4
    batch_size: int = 64
    show_prompts: int = 4
    target: float | None = None
    target_fraction: float = 0.5


@dataclass(frozen=True)
class CheckpointSpec:
    """Checkpoint and resume (contract/checkpoints.py): `every` steps (or "auto"; None: only `final`), `keep` them
    after the trial, `final`: seal the last step too (a branching study's prefix)."""

    every: int | str | None = None
    keep: bool = False
    final: bool = False


@dataclass(frozen=True)
class ScriptSpec:
    """A command trial: the user's own training script (contract/command.py turns the plan into its command line).
    `trainer`: the GRPOConfig keys the study file itself sets, passed as overrides; `recipe`: the file it reads."""

    command: str
    python: str | None = None
    cwd: str | None = None
    recipe: str | None = None
    trainer: dict[str, Any] = field(default_factory=dict)



@dataclass(frozen=True)
class StartFrom:
    """A branch point: the trial starts from this checkpoint instead of from the model's weights.

    `checkpoint`: a checkpoint folder holding weights, optimizer, scheduler, RNG states and
    trainer_state.json: another trial's sealed `<trial_dir>/checkpoints/checkpoint-<step>`
    (contract/checkpoints.py), or any folder TRL's Trainer saved; `step`: the optimizer
    step it holds (checked against the folder). The child resumes model, optimizer and scheduler
    state from it (contract/checkpoints.py's resume path, `trainer.train(resume_from_checkpoint=...)`)
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
    model: ModelSpec = field(default_factory=ModelSpec)
    data: DataSpec = field(default_factory=DataSpec)
    rewards: list[RewardEntry] = field(default_factory=list)
    trainer: dict[str, Any] = field(default_factory=dict)
    budget: BudgetSpec = field(default_factory=BudgetSpec)
    hardware: HardwareSpec = field(default_factory=HardwareSpec)
    params: dict[str, Any] = field(default_factory=dict)
    evaluation: EvaluationSpec | None = None  # None: no held-out scoring
    timeout_s: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    checkpoint: CheckpointSpec | None = None  # None: never
    num_generations: int | None = None  # an int or a schedule.Schedule (never text); None: TRL's default
    max_steps: int | None = None
    rounds: Rounds = field(default_factory=lambda: Rounds(1))
    generated_per_step: float = 0.0
    completions: int | None = None
    eval_budget: EvalBudget = field(default_factory=EvalBudget)
    start_from: StartFrom | None = None
    script: ScriptSpec | None = None  # a command trial: the user's script (module docstring)
    advise_prior: tuple[float, float] | None = None  # an adaptive G's Beta(a, b) prior from advise.json (module docstring)
    host_memory_mb: float | None = None  # the probe's host-memory peak for this shape (module docstring)

    def __post_init__(self) -> None:
        self.trial_dir = os.fspath(self.trial_dir)
        self.model = section_from(ModelSpec, self.model, "model")
        self.data = section_from(DataSpec, self.data, "data")
        self.budget = section_from(BudgetSpec, self.budget, "budget")
        self.hardware = section_from(HardwareSpec, self.hardware, "hardware")
        if self.evaluation is not None:
            self.evaluation = section_from(EvaluationSpec, self.evaluation, "evaluation")
        if self.checkpoint is not None:
            self.checkpoint = section_from(CheckpointSpec, self.checkpoint, "checkpoint")
        if self.script is not None:
            self.script = section_from(ScriptSpec, self.script, "script")
        self.rewards = [section_from(RewardEntry, r, "rewards[]") for r in (self.rewards or [])]
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
        return int(self.hardware.num_processes or 1)

    def to_json(self) -> str:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("model", "data", "budget", "hardware", "evaluation", "checkpoint", "script"):
            out[name] = None if out[name] is None else asdict(out[name])
        out["rewards"] = [asdict(r) for r in self.rewards]
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
