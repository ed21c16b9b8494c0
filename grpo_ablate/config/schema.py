"""The study file's schema: one pydantic model per section. Each field's description is its documentation,
shown by `grpo-ablate explain KEY`, `grpo-ablate schema` and the key table of docs/study-file.md (config/keys.py).

    grpo-ablate validate studies/tiny-cpu.yaml

Types, ranges and unknown keys are checked here; what the values mean together (feasible
pairs, names, places) is checked in validate.py. The `trainer` section is GRPOConfig keywords
verbatim, checked against the installed TRL in trainer_fields.py.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grpo_ablate.core.cost import GPU_TYPES, parse_share

from grpo_ablate.core.bounds import (BOUNDS, MAX_SEARCHED_VALUES, BatchSize, Completions, Generations, Gpus, Processes,
                                 PromptTokens, Prompts, Retries, Tokens, Trials, TrialSteps, Workers)
from grpo_ablate.core.vocab import PLANNED_SAMPLERS  # re-exported: the config names the set too

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
    "ScriptSection",
    "ScreenSection",
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
    """One objective of the study: a metric and whether more or less of it is better."""

    metric: str = Field(default="reward_per_hour", description=(
        "A metric of grpo_ablate/core/vocab.py METRICS that has a direction (see \"The metrics\"), e.g. "
        "`reward_per_hour`, `eval_final_reward`, `stability_variance`."))
    direction: Literal["maximize", "minimize"] | None = Field(default=None, description=(
        "`maximize` or `minimize`; null: the metric's natural direction."))


class RacingSection(_Section):
    """grid/ablation only: add seeds only where the answer is still open (study/racing.py)."""

    design: Literal["group_sequential", "anytime", "elimination"] = Field(default="group_sequential", description=(
        "`group_sequential`: error spending over the planned seeds; stops when one arm is left within "
        "study.min_effect of the best, or `confidence` is reached, or the seeds run out. `anytime`: confidence "
        "sequences valid at unplanned looks (open-ended use). `elimination`: Kim & Nelson's fully sequential "
        "indifference-zone procedure (first stage `first_round_seeds`, at least 3; then one seed per round); "
        "P(the arm kept is the best) >= `confidence` when it leads by study.min_effect; plan many seeds "
        "(about 100 per arm at min_effect 0.02)."))
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0, description=(
        "group_sequential: the target probability that the leader is within study.min_effect of the best; "
        "anytime: the confidence sequences' level; elimination: the probability of correct selection."))
    first_round_seeds: Annotated[Trials, Field(ge=2)] = Field(default=2, description=(
        "Every arm runs on this many seeds before any arm is dropped."))
    stop_when_settled: bool = Field(default=True, description=(
        "anytime only: an arm whose call (better, worse, or equivalent within study.min_effect) is known takes "
        "no more seeds, and the study stops once every arm's call is known."))
    method: Literal["t", "betting"] = Field(default="t", description=(
        "anytime only: the confidence sequence. `t` (Lai's, for roughly normal seed noise: settles at 5+ seeds) "
        "or `betting` (assumption-free for a bounded objective, but it needs many more seeds)."))


class StudySection(_Section):
    """What is studied and how: the Optuna study, its sampler, seeds, objectives and limits."""

    name: str = Field(description="The Optuna study name; also names the run folder. Required.")
    output_dir: str | None = Field(default=None, description=(
        "Where trials, the storage, artifacts and the report go; null: `runs/<name>` in the current folder. "
        "A relative path means from the study file's folder."))
    storage: str | None = Field(default=None, description=(
        "Optuna storage URL: a file path (a journal, safe for parallel workers on one host), `sqlite:///...` "
        "(one process), or `postgresql://...` (many hosts); null: `<output_dir>/study.journal`."))
    sampler: Literal["auto", "tpe", "random", "gp", "grid", "ablation"] = Field(default="auto", description=(
        "How trials are proposed. `grid`: every arm; `ablation`: the baseline, then one factor at a time; "
        "`auto`: random search on a finite space of at most 16 configurations, TPE beyond (random matched TPE on "
        "16 noisy configurations in benchmarks/search_efficiency.py)."))
    sampler_seed: Seed | None = Field(default=0, description=(
        "Seeds the sampler itself, so the same study proposes the same trials; null: a fresh seed each run."))
    pruner: Literal["none", "median", "hyperband"] = Field(default="none", description=(
        "Stops unpromising trials early at equal compute; single-objective studies only."))
    n_trials: Trials | None = Field(default=None, description=(
        "Finished trials the study aims for, over every run, worker and host; null: the plan size for grid and "
        "ablation, else 20."))
    timeout: float | None = Field(default=None, gt=0, le=MAX_SECONDS, description=(
        "Seconds for this invocation of the study; running trials finish. null: no limit."))
    objectives: list[Objective] = Field(default_factory=lambda: [Objective()], description=(
        "The objectives, first one first (the answer is decided on it); default `eval_final_reward` with an "
        "`evaluation` section, else `reward_per_hour`."))
    seeds: list[Seed] = Field(default_factory=lambda: [0], description=(
        "Training seeds (replicates, never searched); grid and ablation repeat every arm over them."))
    baseline: dict[str, float | int] = Field(default_factory=dict, description=(
        "The ablation's baseline arm, e.g. `{num_generations: 8, temperature: 0.9}`; a value not given is "
        "TRL's default (G=8) or the feasible value nearest to it."))
    workers: Workers = Field(default=1, description="Parallel trial processes on this machine.")
    trial_timeout: float | Literal["auto"] | None = Field(default="auto", gt=0, le=MAX_SECONDS, description=(
        "Seconds before a trial is stopped and failed. `auto`: 2 x the long per-trial estimate + 10 min (measured "
        "once a trial finished or a probe ran, else the assumption-based range; 1 h while nothing estimates a "
        "trial: study/limits.py); null: never. `plan` prints it, and `plan`, `validate` and `run` warn of a "
        "number below the estimate."))
    checkpoint_steps: TrialSteps | Literal["auto"] | None = Field(default="auto", description=(
        "Optimizer steps between a trial's checkpoints, so a killed, pre-empted or requeued trial resumes where "
        "it was, with its metrics and compute clock. `auto`: every ~10% of the trial's steps once 5 min of "
        "training passed since the last (a short trial saves none); null: never (then the trainer section's "
        "save_strategy applies). While on, it replaces the trainer section's save_strategy, save_steps and "
        "save_total_limit (contract/checkpoints.py)."))
    keep_checkpoints: bool = Field(default=False, description=(
        "Keep a finished trial's last checkpoint; false: it is removed when the trial ends for good."))
    budget_gpu_hours: Annotated[float, Field(gt=0)] | str | None = Field(default=None, description=(
        "GPU-hours the whole study may spend over every run (each attempt's wall time x its GPUs): no trial "
        "starts that the per-trial estimate says would cross it (measured once trials finished). Or a share of "
        "the full run, e.g. `0.5x`: that share of the full run's GPU-hours as `plan` estimates them (the low end; "
        "plan/price.py), resolved when a command loads the study. null: no limit."))
    max_consecutive_failures: int = Field(default=5, ge=1, le=BOUNDS["retries"].high, description=(
        "The study stops after this many failed trials in a row."))
    heartbeat_interval: int = Field(default=60, ge=1, le=24 * 3600, description=(
        "RDB storages (PostgreSQL, SQLite): seconds between a running trial's heartbeats."))
    grace_period: int | None = Field(default=None, ge=1, le=MAX_SECONDS, description=(
        "RDB storages: seconds without a heartbeat after which a trial is failed and retried; null: 3 x "
        "heartbeat_interval."))
    max_retry: Retries = Field(default=2, description="How often a trial whose worker died is retried.")
    trackers: list[Literal["tensorboard", "wandb", "trackio", "mlflow", "comet_ml", "swanlab"]] | None = Field(
        default=None, description=(
            "`report_to` for every trial, e.g. `[tensorboard]` or `[wandb]`; runs are grouped under the study's "
            "name and named by arm and seed. null: the trainer's `report_to` (a recipe's stays on, as its run "
            "had it); `[]`: none."))
    racing: RacingSection | None = Field(default=None, description=(
        "grid/ablation: add seeds round by round and stop spending them on arms that are clearly out (see "
        "\"The answer\"); null: every arm runs on every seed."))
    min_effect: float | None = Field(default=None, gt=0, description=(
        "The smallest difference in the first objective worth acting on: the answer recommends an arm within it "
        "of the best, and arms whose interval lies inside +-min_effect are equivalent. null: per metric "
        "(stats/min_effect.py): 0.05 of a reward in [0, 1], 5% of a bounded metric's range, else 5% of the "
        "baseline's mean."))

    @field_validator("budget_gpu_hours", mode="before")
    @classmethod
    def _budget_share(cls, v: Any) -> Any:
        if isinstance(v, str) and parse_share(v) is None:
            raise ValueError(f"{v!r} is neither GPU-hours (a number > 0) nor a share of the full run (e.g. \"0.5x\")")
        return v

    @property
    def is_planned(self) -> bool:
        """A grid or an ablation: plan/cells.py lists every trial, the study runs only those."""
        return self.sampler in PLANNED_SAMPLERS


class ModelSection(_Section):
    """The policy model every trial trains, passed to `from_pretrained`."""

    name_or_path: str = Field(default="builtin:tiny", description=(
        "A hub id, a local folder, or a built-in offline model (vocab.BUILTIN_MODELS, e.g. `builtin:tiny`)."))
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(default=None, description=(
        "`from_pretrained`'s dtype; null: the trainer's choice."))
    attn_implementation: str | None = Field(default=None, description=(
        "`from_pretrained`'s attention implementation, e.g. `flash_attention_2` on GPUs; null: the model's "
        "default."))
    trust_remote_code: bool = Field(default=False, description=(
        "Allow the model's own code from the hub (`from_pretrained`'s trust_remote_code)."))
    revision: str | None = Field(default=None, description=(
        "A hub branch, tag or commit of the model; null: the default branch."))


class DataSection(_Section):
    """The training prompts: a built-in task or a dataset (exactly one), built as Open R1 builds them."""

    task: str | None = Field(default=None, description=(
        "A built-in offline task (grpo_ablate/core/vocab.py BUILTIN_TASKS, e.g. `addition`); set this or `dataset`."))
    dataset: str | None = Field(default=None, description=(
        "A hub id, a local folder, or a .jsonl/.json/.parquet/.csv file; set this or `task`."))
    config_name: str | None = Field(default=None, description="The dataset's configuration (subset) name.")
    split: str = Field(default="train", description="The dataset split the training prompts come from.")
    prompt_column: str = Field(default="prompt", description="The column that holds each prompt.")
    system_prompt: str | None = Field(default=None, description=(
        "A system message put before every prompt; null: none."))
    chat_template: bool | str | None = Field(default=None, description=(
        "null: the tokenizer's chat template when it has one; false: plain text; true: the tokenizer's "
        "template, required; a string: this Jinja template."))
    max_samples: Prompts | None = Field(default=None, description=(
        "Use at most this many training prompts; null: all."))
    num_prompts: Prompts | None = Field(default=None, description=(
        "The size of a built-in task's dataset; null: the task's default."))
    max_prompt_tokens: PromptTokens | None = Field(default=None, description=(
        "Drop prompts longer than this many tokens (TRL no longer truncates); null: keep all."))

    @model_validator(mode="after")
    def _one_source(self) -> "DataSection":
        if (self.task is None) == (self.dataset is None):
            raise ValueError("set exactly one of data.task (a built-in task) or data.dataset (a dataset id or file)")
        return self


class RewardSpec(_Section):
    """One reward function and its weight; a bare string in `rewards` is a name with weight 1."""

    name: str = Field(description=(
        "A built-in reward or task name (vocab.reward_names()), or `package.module:function`. Required."))
    weight: float = Field(default=1.0, description="The reward's weight in the sum GRPO trains on.")
    args: dict[str, Any] | None = Field(default=None, description=(
        "Keyword arguments for `package.module:function`: a factory (no `completions` parameter, e.g. Open R1's "
        "get_code_format_reward) is called with them and returns the reward; a reward function gets them bound."))


class VllmSection(_Section):
    """Generation with vLLM: off, inside each training process, or on a server of its own."""

    mode: Literal["none", "colocate", "server"] = Field(default="none", description=(
        "`none`: generate with transformers; `colocate`: vLLM inside each training process; `server`: a vLLM "
        "server per trial on GPUs of its own."))
    server_gpus: Annotated[Gpus, Field(ge=1)] = Field(default=1, description=(
        "server mode: GPUs the vLLM server takes from each trial's block."))
    port: int = Field(default=8000, ge=1, le=65535, description=(
        "server mode: the vLLM server's HTTP port, the first one tried (a busy port moves on to the next free one)."))


LAUNCHER_ENV = "GRPO_ABLATE_LAUNCHER"  # a launcher's name: overrides hardware.launcher for every trial


class HardwareSection(_Section):
    """Where and how each trial's processes run."""

    num_processes: Processes | None = Field(default=None, description=(
        "Training processes per trial (the world size); wins over `gpus` and `accelerate_config`. null: from "
        "those, else 1."))
    gpus: Gpus | None = Field(default=None, description=(
        "GPUs per trial; with vLLM server mode, gpus - server_gpus of them train. null: none given (the world "
        "size then comes from num_processes or accelerate_config, else 1)."))
    accelerate_config: str | None = Field(default=None, description=(
        "An accelerate config file; its num_processes counts unless vLLM server mode sets it."))
    launcher: str = Field(default="auto", description=(
        "Where trials run: a launcher of launch/registry.py's LAUNCHERS (the allowed values, which `grpo-ablate "
        "explain hardware.launcher` lists), or `auto`: the first launcher of the registry that takes the trial "
        "(today warm, a fresh fork of a pre-imported template, for single-process CPU trials, else process, a "
        "process tree each; never a remote one such as slurm). GRPO_ABLATE_LAUNCHER overrides it; every command "
        "that loads the study refuses a name the registry does not hold."))
    command: Literal["auto", "python", "torchrun", "accelerate"] = Field(default="auto", description=(
        "What starts a trial's processes; `auto`: python for one process, accelerate with accelerate_config, "
        "else torchrun."))
    vllm: VllmSection = Field(default_factory=VllmSection, description="vLLM generation (see its keys).")
    memory_limit_mb: Annotated[int, Field(ge=1, le=2**40)] | None = Field(default=None, description=(
        "CPU: a trial whose processes' resident memory passes this many MB is an OOM (so `probe` works without a "
        "GPU); null: no limit."))
    gpu_type: str | None = Field(default=None, description=(
        "The GPU model (cost.GPU_TYPES: H100, H200, H20, A100, L40S): narrows plan's GPU-hour estimate; null: "
        "H100-like rates."))

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
        """Read case-blind, as GRPO_ABLATE_LAUNCHER is; the name itself is checked against the launcher registry
        by the commands (launch/registry.py's launcher_problems): config sits below launch and cannot see it."""
        if isinstance(value, str):
            value = value.strip().lower()
        if value in ("python", "torchrun", "accelerate"):
            raise ValueError(f"hardware.launcher now names where trials run (`grpo-ablate explain hardware.launcher` "
                             f"lists them); the command moved to its own key: write `command: {value}`")
        return value


class FloatRange(_Section):
    """A searched float range."""

    low: float = Field(description="The lowest value. Required.")
    high: float = Field(description="The highest value. Required.")
    log: bool = Field(default=False, description="Sample on a log scale.")


class IntRange(_Section):
    """A searched integer range of G."""

    low: Generations = Field(description="The smallest G. Required.")
    high: Generations = Field(description="The largest G. Required.")
    step: int = Field(default=1, ge=1, description="The spacing of the searched values.")

    @model_validator(mode="after")
    def _few_values(self) -> "IntRange":
        count = (self.high - self.low) // self.step + 1
        if count > MAX_SEARCHED_VALUES:  # each is checked against the hardware and offered to the sampler
            raise ValueError(f"searches {count} values; at most {MAX_SEARCHED_VALUES}: raise step or narrow the range")
        return self


DEFAULT_GENERATIONS: tuple[int | str, ...] = (4, 8, 16)


class SearchSection(_Section):
    """What is searched: G, and optionally the temperature and the generation batch."""

    num_generations: list[Generations | str] | IntRange = Field(
        default_factory=lambda: list(DEFAULT_GENERATIONS), description=(
            "A list of G values, or `{low, high, step}`; a list may hold G schedules by label (`\"4->8@40%\"`, "
            "`\"2->8@zero_std<0.3\"`: grpo_ablate/core/schedule.py)."))
    temperature: list[float] | FloatRange | float | None = Field(default=None, description=(
        "A list, `{low, high, log}`, or one number; null: the trainer's temperature (TRL's default 1.0)."))
    generation_batch_size: list[BatchSize] | Literal["auto", "probed"] | None = Field(default=None, description=(
        "A list of batches; `auto`: every feasible batch up to max_generation_batch_size; `probed`: each G's "
        "largest batch that fit in probe.json; null: TRL's default batch."))
    max_generation_batch_size: BatchSize | None = Field(default=None, description=(
        "The upper bound of `generation_batch_size: auto`; null: no bound but feasibility."))


class FullRunSection(_Section):
    """The run a recipe describes (its own length), which a trial is the first part of. `trainer_from` fills it."""

    max_steps: TrialSteps | None = Field(default=None, description=(
        "The full run in optimizer steps, when the recipe gives them."))
    num_train_epochs: float | None = Field(default=None, gt=0, description=(
        "Else the full run in epochs over the training prompts."))
    num_generations: Generations | None = Field(default=None, description=(
        "The G the full run's steps are counted at (the recipe's)."))
    prompts: Prompts | None = Field(default=None, description=(
        "Training prompts, when known before the trial loads them."))


class BudgetSection(_Section):
    """How much each trial trains: at least one of max_steps, completions, tokens, seconds (the first reached stops it)."""

    max_steps: TrialSteps | None = Field(default=None, description=(
        "Optimizer steps per trial (also a cap when another budget is set)."))
    completions: Completions | None = Field(default=None, description=(
        "Generated completions per trial, equal for every arm."))
    tokens: Tokens | None = Field(default=None, description=(
        "Stop once this many tokens were processed (TRL's num_tokens)."))
    seconds: float | None = Field(default=None, gt=0, le=MAX_SECONDS, description=(
        "Stop after this many seconds of training wall time."))
    lr_schedule: Literal["prefix", "compressed"] | None = Field(default=None, description=(
        "The learning-rate schedule of a trial. `prefix` computes it for the full run (full_run) and the trial "
        "stops at its budget, so step k has the recipe's learning rate at step k; `compressed` fits the whole "
        "schedule (warmup, decay to the end) into the trial. null: prefix when full_run is known, else "
        "compressed."))
    full_run: FullRunSection | None = Field(default=None, description=(
        "The recipe's own run, set by trainer_from; null: unknown."))
    allow_inside_warmup: bool = Field(default=False, description=(
        "Allow trials that end inside the learning-rate warmup of the run they stand for (the full run's, under "
        "`lr_schedule: prefix`; the trial's own, compressed): such trials train mostly at a rising learning rate "
        "and answered close to random on the CPU benchmark, so `validate`, `plan` and `run` refuse them unless "
        "this is true (grpo_ablate/study/warmup.py)."))
    branch_from: int | str | None = Field(default=None, description=(
        "Arms that branch from one shared prefix: for each seed the baseline trains once up to this step and is "
        "checkpointed, and every arm of that seed starts from that checkpoint with its own G, temperature and "
        "generation batch, the learning-rate schedule going on as the full run's; each arm then trains the "
        "trial's budget from there. `none`/null: every trial starts from step 0; `warmup`: the end of the "
        "trainer's warmup_steps; a step count; or a share of the full run (`0.1x`). grpo_ablate/plan/branching.py."))

    @field_validator("branch_from", mode="before")
    @classmethod
    def _branch_point(cls, v: Any) -> Any:
        if v is None or isinstance(v, bool):
            return None if v is None else _bad_branch(v)
        if isinstance(v, int):
            return v if v >= 1 else _bad_branch(v)
        if isinstance(v, str) and (v in ("none", "warmup") or parse_share(v) is not None):
            return None if v == "none" else v
        return _bad_branch(v)

    @model_validator(mode="after")
    def _some_budget(self) -> "BudgetSection":
        if not any(v is not None for v in (self.max_steps, self.completions, self.tokens, self.seconds)):
            raise ValueError("give each trial a budget: max_steps, completions, tokens or seconds")
        return self


def _bad_branch(v: Any) -> Any:
    raise ValueError(f"{v!r}: give `none`, `warmup`, a step count (>= 1) or a share of the full run (e.g. \"0.1x\")")


class CompareSection(_Section):
    """What `grpo-ablate compare` accepts as no regression."""

    tolerances: dict[str, float] = Field(default_factory=dict, description=(
        "metric -> allowed relative worsening (0.1 = 10%) before `grpo-ablate compare` fails; empty: any "
        "worsening fails."))


class EvaluationSection(_Section):
    """Held-out prompts every trial scores at one fixed decoding (never searched): before the first step, at
    `points` equal fractions of the budget in generated completions (tokens when the budget is in tokens), and
    at the end. Rows go to <trial_dir>/eval.jsonl."""

    num_prompts: Prompts = Field(default=128, description=(
        "How many held-out prompts (held out of the training data; a built-in task draws its own disjoint set)."))
    dataset: str | None = Field(default=None, description=(
        "A hub id, folder or file of evaluation prompts; null: held out of the training data."))
    split: str | None = Field(default=None, description=(
        "A split of `dataset` (or of data.dataset when `dataset` is not set)."))
    temperature: float = Field(default=0.0, ge=0, description="The evaluation's decoding temperature; 0: greedy.")
    samples_per_prompt: Annotated[int, Field(ge=1, le=65536)] = Field(default=1, description="Completions scored per held-out prompt.")
    max_completion_length: PromptTokens | None = Field(default=None, description=(
        "Tokens per evaluation completion; null: trainer.max_completion_length."))
    points: Annotated[int, Field(ge=0, le=10_000)] = Field(default=4, description=(
        "Evaluation points between the start and the end, at equal generated compute."))
    batch_size: BatchSize = Field(default=64, description="Prompts per generate() call.")
    show_prompts: Annotated[int, Field(ge=0, le=10_000)] = Field(default=4, description=(
        "The first prompts whose completions each row keeps (shown side by side in the report)."))
    target: float | None = Field(default=None, description=(
        "An absolute held-out reward for the *_to_target metrics; null: from target_fraction."))
    target_fraction: float = Field(default=0.5, gt=0, le=1, description=(
        "target = start + this fraction x the baseline arm's mean held-out gain (when `target` is null)."))


class ScriptSection(_Section):
    """The user's own training script: each trial runs it instead of the built-in worker (a command trial).

    The orchestrator never imports the script's TRL: it passes each trial's values as the script's own
    command-line overrides (TRL's TrlParser: `--num_generations 8 --seed 0 --max_steps 40 --output_dir ...`)
    and reads back what the Trainer writes (trainer_state.json's log history, its checkpoints)."""

    command: str = Field(description=(
        "The training command as you run it, e.g. `accelerate launch --config_file "
        "recipes/accelerate_configs/zero2.yaml --num_processes 7 src/open_r1/grpo.py --config {recipe}`. "
        "`{recipe}` is the study's trainer_from file; a leading `python`, `accelerate`, `torchrun` or `trl` "
        "runs from script.python's environment. Each trial appends its overrides. Required."))
    python: str | None = Field(default=None, description=(
        "The interpreter of the script's environment (e.g. `/opt/openr1-venv/bin/python`): the command's "
        "`python` is it, and its folder comes first on PATH. null: the `python` on PATH."))
    cwd: str | None = Field(default=None, description=(
        "The folder the command runs in (your checkout of the script's repository); null: the study file's "
        "folder."))


class ScreenSection(_Section):
    """A stage before any training (`grpo-ablate screen`; `run` starts with it): advise on the study's own prompts
    with the starting model and a probe on the study's hardware, then the arms it shows dominated leave the plan,
    each with its reason (grpo_ablate/preflight/screen.py)."""

    generations: list[Generations] | None = Field(default=None, description=(
        "The G values the screen predicts for (its table); null: the study's own. The study's arms are the ones "
        "it may drop; the others are shown, never trained."))
    temperatures: list[Annotated[float, Field(gt=0)]] | None = Field(default=None, description=(
        "The temperatures advise samples at; null: the study's own."))
    k: Generations = Field(default=16, description="Completions advise samples per prompt.")
    prompts: Prompts = Field(default=64, description="Training prompts advise samples.")
    probe_steps: TrialSteps = Field(default=2, description="Optimizer steps the probe runs per (G, batch).")
    confirm: bool = Field(default=True, description=(
        "Train the arms the screen keeps (the confirm stage); false: the study is the screen alone, and its report "
        "presents a screen, not a verdict."))


class StudyFile(_Section):
    """A grpo-ablate study file: every section but `study` and `data` has defaults."""

    study: StudySection = Field(description="The Optuna study (see its keys). Required.")
    model: ModelSection = Field(default_factory=ModelSection, description="The policy model (see its keys).")
    data: DataSection = Field(description="The training prompts (see its keys). Required.")
    rewards: list[RewardSpec | str] = Field(default_factory=list, description=(
        "Reward functions: built-in names or `package.module:function`, each a string or `{name, weight, args}`; "
        "empty: the built-in task's reward."))
    trainer: dict[str, Any] = Field(default_factory=dict, description=(
        "GRPOConfig keyword arguments, verbatim (checked against the installed TRL); unset ones keep TRL's "
        "defaults."))
    trainer_from: str | None = Field(default=None, description=(
        "A recipe file (Open R1 or `trl grpo` style) the trainer section starts from; keys in `trainer` win."))
    recipe_trl: str | None = Field(default=None, description=(
        "The TRL release the `trainer_from` recipe was written for (a release in trl_facts/trl_defaults.json, e.g. "
        "`0.18.0`): keys the recipe leaves out take that release's defaults. Open R1 recipes need none (their "
        "pinned TRL is known); null with a `trl grpo` recipe: `init` asks."))
    recipe_date: datetime.date | None = Field(default=None, description=(
        "The date the `trainer_from` recipe was run or published (YYYY-MM-DD). An Open R1 recipe dated before "
        "2025-05-28, when Open R1 pinned TRL 0.18.0, ran on TRL's main of its day: the keys it leaves out take the "
        "defaults of the TRL release of that date (temperature 0.9, the loss of the time), and its `accuracy` "
        "reward the rule of that date. null: the date of the recipe file's last commit when it lies in a git "
        "checkout, else the pin is assumed (plan says so)."))
    hardware: HardwareSection = Field(default_factory=HardwareSection, description=(
        "Processes, GPUs and launchers per trial (see its keys)."))
    search: SearchSection = Field(default_factory=SearchSection, description="What is searched (see its keys).")
    budget: BudgetSection = Field(default_factory=lambda: BudgetSection(max_steps=100), description=(
        "Per trial: max_steps, or equal completions, tokens, or wall seconds (see its keys)."))
    compare: CompareSection = Field(default_factory=CompareSection, description=(
        "Tolerances of `grpo-ablate compare` (see its keys)."))
    evaluation: EvaluationSection | None = Field(default=None, description=(
        "Held-out evaluation (see its keys); null: none."))
    script: ScriptSection | None = Field(default=None, description=(
        "Run your own training script in its own environment for every trial (see its keys); null: the built-in "
        "trainer (grpo_ablate's worker on the installed TRL)."))
    screen: ScreenSection | None = Field(default=None, description=(
        "A screen before any training (see its keys); null: none."))


SECTION_MODELS: dict[str, type[BaseModel]] = {
    "study": StudySection, "model": ModelSection, "data": DataSection, "hardware": HardwareSection,
    "search": SearchSection, "budget": BudgetSection, "compare": CompareSection,
    "evaluation": EvaluationSection, "script": ScriptSection, "screen": ScreenSection,
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
