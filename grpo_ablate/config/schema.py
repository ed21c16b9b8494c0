"""The study file's schema: one pydantic model per section. Each field's comment is its documentation.

    grpo-ablate validate studies/tiny-cpu.yaml

Types, ranges and unknown keys are checked here; what the values mean together (feasible
pairs, names, places) is checked in validate.py. The `trainer` section is GRPOConfig keywords
verbatim, checked against the installed TRL in trainer_fields.py.
"""

from __future__ import annotations

import os
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grpo_ablate.cost import GPU_TYPES

from grpo_ablate.bounds import MAX_SEARCHED_VALUES, BatchSize, Generations
from grpo_ablate.vocab import PLANNED_SAMPLERS  # re-exported: the config names the set too

__all__ = [
    "PLANNED_SAMPLERS",
    "Objective",
    "StudySection",
    "ModelSection",
    "DataSection",
    "RewardSpec",
    "VllmSection",
    "HardwareSection",
    "FloatRange",
    "IntRange",
    "SearchSection",
    "BudgetSection",
    "FullRunSection",
    "CompareSection",
    "EvaluationSection",
    "StudyFile",
    "SECTION_MODELS",
    "model_at",
]


class _Section(BaseModel):
    # NaN and infinity are refused in every float field: `.nan` compares false with every bound,
    # so it would slip past `gt=0` and fail much later, inside a trial or the sampler.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


# Seeds reach numpy's RandomState, which takes 0 <= seed < 2**32 only.
Seed = Annotated[int, Field(ge=0, lt=2**32)]
# Longest wait any setting may ask for: a year. Python's timed waits overflow near 2**63 ns, and
# a heartbeat thread that dies of OverflowError stops beating without a word.
MAX_SECONDS = 365 * 24 * 3600


class Objective(_Section):
    metric: str = "reward_per_hour"  # a metric of grpo_ablate/vocab.py METRICS that has a direction
    direction: Literal["maximize", "minimize"] | None = None  # default: the metric's natural direction


class RacingSection(_Section):
    """grid/ablation only: add seeds only where the answer is still open (study/racing.py)."""

    # group_sequential: error spending over the planned seeds (stops when one arm is left within
    # min_effect of the best, or `confidence` is reached); anytime: confidence sequences valid at
    # unplanned looks (open-ended use)
    design: Literal["group_sequential", "anytime"] = "group_sequential"
    # group_sequential: the target probability that the leader is within study.min_effect of the
    # best; anytime: the confidence sequences' level
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    first_round_seeds: int = Field(default=2, ge=2)  # every arm runs on this many seeds before any is dropped
    # anytime only: an arm whose call (better / worse / equivalent within study.min_effect) is
    # known takes no more seeds, and the study stops once every arm's is (study/racing.py)
    stop_when_settled: bool = True
    # anytime only: the confidence sequence: "t" (Lai's, for roughly normal seed noise: settles at 5+ seeds) or
    # "betting" (assumption-free for a bounded objective, but it needs many more seeds)
    method: Literal["t", "betting"] = "t"


class StudySection(_Section):
    name: str  # the Optuna study name; also names the run folder
    output_dir: str | None = None  # default runs/<name>, relative to the current directory
    storage: str | None = None  # Optuna storage URL; default a journal file in output_dir (safe for parallel workers)
    # auto: random search on a small finite space (<= 16 configurations), TPE otherwise; chosen from
    # benchmarks/search_efficiency.py, where random matched TPE on 16 noisy configurations
    sampler: Literal["auto", "tpe", "random", "gp", "grid", "ablation"] = "auto"
    sampler_seed: Seed | None = 0  # seeds the sampler itself, so the same study proposes the same trials
    pruner: Literal["none", "median", "hyperband"] = "none"
    n_trials: int | None = Field(default=None, ge=1)  # total over all runs/workers; grid/ablation default: the plan size
    timeout: float | None = Field(default=None, gt=0, le=MAX_SECONDS)  # seconds for the whole study (this invocation)
    objectives: list[Objective] = Field(default_factory=lambda: [Objective()])
    seeds: list[Seed] = Field(default_factory=lambda: [0])  # training seeds; grid/ablation repeat every arm over them
    baseline: dict[str, float | int] = Field(default_factory=dict)  # ablation baseline, e.g. {num_generations: 8}
    workers: int = Field(default=1, ge=1)  # parallel trial processes on this machine
    # seconds before a trial is stopped and failed; auto: from the plan's per-trial estimate with a margin
    # (measured once a trial finished or a probe ran, else the assumption-based range: study/limits.py); null: never
    trial_timeout: float | Literal["auto"] | None = Field(default="auto", gt=0, le=MAX_SECONDS)
    # optimizer steps between a trial's checkpoints, so a killed, pre-empted or requeued trial resumes where it
    # was; auto: every ~10% of its steps once 5 min of training passed since the last (a short trial saves none);
    # null: never (trainer/checkpoints.py)
    checkpoint_steps: int | Literal["auto"] | None = Field(default="auto", ge=1)
    keep_checkpoints: bool = False  # keep a finished trial's last checkpoint (default: removed when it ends for good)
    # GPU-hours the whole study may spend (every trial's wall time x its GPUs, over every run): no trial starts
    # that the per-trial estimate says would cross it (measured once trials finished)
    budget_gpu_hours: float | None = Field(default=None, gt=0)
    max_consecutive_failures: int = Field(default=5, ge=1)  # the study stops after this many failures in a row
    heartbeat_interval: int = Field(default=60, ge=1, le=24 * 3600)  # RDB storages: seconds between a running trial's heartbeats
    grace_period: int | None = Field(default=None, ge=1, le=MAX_SECONDS)  # RDB storages: a trial silent this long is failed and retried (default 3x interval)
    max_retry: int = Field(default=2, ge=0)  # how often a trial whose worker died is retried
    # report_to for every trial, e.g. [tensorboard] or [wandb]; runs are grouped under the study's name
    trackers: list[Literal["tensorboard", "wandb", "trackio", "mlflow", "comet_ml", "swanlab"]] = Field(default_factory=list)
    racing: RacingSection | None = None  # grid/ablation: stop spending seeds on arms that are clearly out
    # the smallest difference in the first objective worth acting on: the answer recommends an arm
    # within it of the best, and arms whose interval lies inside +-min_effect are equivalent;
    # default per metric, defined once in stats/min_effect.py (0.05 of a reward in [0, 1])
    min_effect: float | None = Field(default=None, gt=0)

    @property
    def is_planned(self) -> bool:
        """A grid or an ablation: plan.py lists every trial, the study runs only those."""
        return self.sampler in PLANNED_SAMPLERS


class ModelSection(_Section):
    name_or_path: str = "builtin:tiny"  # a hub id, a local folder, or a built-in model (vocab.BUILTIN_MODELS, offline)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    attn_implementation: str | None = None  # e.g. flash_attention_2 on GPUs
    trust_remote_code: bool = False
    revision: str | None = None


class DataSection(_Section):
    task: str | None = None  # a built-in offline task (grpo_ablate/vocab.py BUILTIN_TASKS), or
    dataset: str | None = None  # a hub id, a local folder, or a .jsonl/.json/.parquet/.csv file
    config_name: str | None = None
    split: str = "train"
    prompt_column: str = "prompt"
    system_prompt: str | None = None
    chat_template: bool | str | None = None  # None: the tokenizer's template when it has one; a string: this Jinja template
    max_samples: int | None = Field(default=None, ge=1)
    num_prompts: int | None = Field(default=None, ge=1)  # size of a built-in task's dataset
    max_prompt_tokens: int | None = Field(default=None, ge=1)  # drop longer prompts (TRL no longer truncates)

    @model_validator(mode="after")
    def _one_source(self) -> "DataSection":
        if (self.task is None) == (self.dataset is None):
            raise ValueError("set exactly one of data.task (a built-in task) or data.dataset (a dataset id or file)")
        return self


class RewardSpec(_Section):
    name: str  # a built-in reward or task name (vocab.reward_names()), or package.module:function
    weight: float = 1.0
    # keyword arguments for package.module:function: a factory (no `completions` parameter, e.g. Open R1's
    # get_code_format_reward) is called with them and returns the reward; a reward function gets them bound
    args: dict[str, Any] | None = None


class VllmSection(_Section):
    mode: Literal["none", "colocate", "server"] = "none"
    server_gpus: int = Field(default=1, ge=1)  # server mode: GPUs the vLLM server takes from each trial's block
    port: int = Field(default=8000, ge=1, le=65535)


LAUNCHER_ENV = "GRPO_ABLATE_LAUNCHER"  # a launcher's name: overrides hardware.launcher for every trial


class HardwareSection(_Section):
    num_processes: int | None = Field(default=None, ge=1)  # training processes per trial (the world size); wins over all below
    gpus: int | None = Field(default=None, ge=0)  # GPUs per trial; with vLLM server mode, gpus - server_gpus train
    accelerate_config: str | None = None  # accelerate config file; its num_processes counts unless vLLM server mode sets it
    # where trials run: a launcher of trainer/launchers/registry.py (auto: a warm session for
    # single-process CPU trials, else a process per trial); GRPO_ABLATE_LAUNCHER overrides it
    launcher: Literal["auto", "process", "warm", "slurm"] = "auto"
    # what starts a trial's processes (auto: python for one, accelerate with accelerate_config, else torchrun)
    command: Literal["auto", "python", "torchrun", "accelerate"] = "auto"
    vllm: VllmSection = Field(default_factory=VllmSection)
    memory_limit_mb: int | None = Field(default=None, ge=1)  # CPU: a trial whose processes' RSS passes this is an OOM
    # the GPU model (cost.GPU_TYPES: H100, H200, H20, A100, L40S): narrows plan's GPU-hour estimate
    gpu_type: str | None = None

    @field_validator("gpu_type")
    @classmethod
    def _known_gpu(cls, v: str | None) -> str | None:
        if v is None:
            return v
        known = {k.lower(): k for k in GPU_TYPES}
        if v.lower() not in known:
            raise ValueError(f"unknown GPU type {v!r}; known: {sorted(GPU_TYPES)} (leave it unset for H100-like rates)")
        return known[v.lower()]

    @field_validator("launcher", mode="before")
    @classmethod
    def _command_moved(cls, value: Any) -> Any:
        if value in ("python", "torchrun", "accelerate"):
            raise ValueError(f"hardware.launcher now names where trials run (auto, process, warm); "
                             f"the command moved to its own key: write `command: {value}`")
        return value


def launcher_env_problem(env: Any = os.environ) -> str | None:
    """What is wrong with GRPO_ABLATE_LAUNCHER, checked where the study loads (validate, plan, run)
    rather than at the first trial's launch; None when it is unset or names a launcher."""
    value = str(env.get(LAUNCHER_ENV, "")).strip().lower()
    choices = typing.get_args(HardwareSection.model_fields["launcher"].annotation)
    if not value or value in choices:
        return None
    return f"{LAUNCHER_ENV}={value!r} names no launcher: use one of {list(choices)} or unset it"


class FloatRange(_Section):
    low: float
    high: float
    log: bool = False


class IntRange(_Section):
    low: Generations
    high: Generations
    step: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _few_values(self) -> "IntRange":
        count = (self.high - self.low) // self.step + 1
        if count > MAX_SEARCHED_VALUES:  # each is checked against the hardware and offered to the sampler
            raise ValueError(f"searches {count} values; at most {MAX_SEARCHED_VALUES}: raise step or narrow the range")
        return self


DEFAULT_GENERATIONS: tuple[int | str, ...] = (4, 8, 16)


class SearchSection(_Section):
    # integers, or G schedules by label ("4->8@40%", "2->8@zero_std<0.3"; grpo_ablate/schedule.py)
    num_generations: list[Generations | str] | IntRange = Field(default_factory=lambda: list(DEFAULT_GENERATIONS))
    temperature: list[float] | FloatRange | float | None = None  # None: the trainer's temperature (TRL default 1.0)
    # None: TRL's default batch; auto: every batch that fits; probed: each G's largest batch in probe.json
    generation_batch_size: list[BatchSize] | Literal["auto", "probed"] | None = None
    max_generation_batch_size: BatchSize | None = None  # upper bound for `auto`


class FullRunSection(_Section):
    """The run a recipe describes (its own length), which a trial is the first part of. `trainer_from` fills it."""

    max_steps: int | None = Field(default=None, ge=1)  # the full run in optimizer steps, when the recipe gives them
    num_train_epochs: float | None = Field(default=None, gt=0)  # else its epochs over the training prompts
    num_generations: int | None = Field(default=None, ge=1)  # the G its steps are counted at (the recipe's)
    prompts: int | None = Field(default=None, ge=1)  # training prompts, when known before the trial loads them


class BudgetSection(_Section):
    max_steps: int | None = Field(default=None, ge=1)  # optimizer steps per trial (also the cap for the others)
    completions: int | None = Field(default=None, ge=1)  # equal generated completions per trial
    tokens: int | None = Field(default=None, ge=1)  # stop once this many tokens were processed
    seconds: float | None = Field(default=None, gt=0, le=MAX_SECONDS)  # stop after this much training wall time
    # the learning-rate schedule of a trial: "prefix" computes it for the full run (full_run) and the trial
    # stops at its budget, so step k has the recipe's learning rate at step k; "compressed" fits the whole
    # schedule (warmup, decay to the end) into the trial. Default: prefix when full_run is known, else compressed
    lr_schedule: Literal["prefix", "compressed"] | None = None
    full_run: FullRunSection | None = None  # the recipe's own run; set by trainer_from

    @model_validator(mode="after")
    def _some_budget(self) -> "BudgetSection":
        if not any(v is not None for v in (self.max_steps, self.completions, self.tokens, self.seconds)):
            raise ValueError("give each trial a budget: max_steps, completions, tokens or seconds")
        return self


class CompareSection(_Section):
    # metric -> allowed relative worsening (0.1 = 10%) before `grpo-ablate compare` fails
    tolerances: dict[str, float] = Field(default_factory=dict)


class EvaluationSection(_Section):
    # Held-out prompts every trial scores at one fixed decoding (never searched): before the first
    # step, at `points` equal fractions of the budget in generated completions (tokens when the
    # budget is in tokens), and at the end. Rows go to <trial_dir>/eval.jsonl.
    num_prompts: int = Field(default=128, ge=1)  # how many held-out prompts
    dataset: str | None = None  # a hub id, folder or file of evaluation prompts; default: held out of the training data
    split: str | None = None  # a split of `dataset` (or of data.dataset when `dataset` is not set)
    temperature: float = Field(default=0.0, ge=0)  # 0 = greedy
    samples_per_prompt: int = Field(default=1, ge=1)
    max_completion_length: int | None = Field(default=None, ge=1)  # default: trainer.max_completion_length
    points: int = Field(default=4, ge=0)  # evaluation points between the start and the end
    batch_size: int = Field(default=64, ge=1)  # prompts per generate() call
    show_prompts: int = Field(default=4, ge=0)  # the first prompts whose completions each row keeps (side by side)
    target: float | None = None  # an absolute held-out reward for *_to_target; null: from target_fraction
    target_fraction: float = Field(default=0.5, gt=0, le=1)  # target = start + fraction x the baseline arm's mean gain


class StudyFile(_Section):
    study: StudySection
    model: ModelSection = Field(default_factory=ModelSection)
    data: DataSection
    rewards: list[RewardSpec | str] = Field(default_factory=list)
    trainer: dict[str, Any] = Field(default_factory=dict)
    trainer_from: str | None = None
    hardware: HardwareSection = Field(default_factory=HardwareSection)
    search: SearchSection = Field(default_factory=SearchSection)
    budget: BudgetSection = Field(default_factory=lambda: BudgetSection(max_steps=100))
    compare: CompareSection = Field(default_factory=CompareSection)
    evaluation: EvaluationSection | None = None  # absent: no held-out evaluation


SECTION_MODELS: dict[str, type[BaseModel]] = {
    "study": StudySection, "model": ModelSection, "data": DataSection, "hardware": HardwareSection,
    "search": SearchSection, "budget": BudgetSection, "compare": CompareSection,
    "evaluation": EvaluationSection,
}


def model_at(loc: list[str]) -> type[BaseModel] | None:
    """The model whose keys are valid at a key path (for did-you-mean on unknown keys)."""
    if not loc:
        return StudyFile
    model = SECTION_MODELS.get(loc[0])
    if model is HardwareSection and len(loc) > 1 and loc[1] == "vllm":
        return VllmSection
    if loc[0] == "study" and len(loc) > 2 and loc[1] == "objectives":
        return Objective
    if loc[0] == "rewards":
        return RewardSpec
    if loc[0] == "budget" and len(loc) > 1 and loc[1] == "full_run":
        return FullRunSection
    if loc[0] == "search" and len(loc) > 1:
        return FloatRange if loc[1] == "temperature" else IntRange
    return model
