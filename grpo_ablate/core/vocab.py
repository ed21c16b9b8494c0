"""The words every layer shares, each defined once. Stdlib only, so anything may import it.

    python -c "from grpo_ablate.core.vocab import Arm; print(Arm(8, 64, 0.9).key)"   # G8xB64|T0.9

- `Arm`: one configuration of the knobs this tool decides (G, generation batch, temperature),
  with its key (stable across studies: compare matches arms on it) and its labels;
- `Cell`: an arm on one seed in one role ("baseline", "num_generations=4", or the sampler's
  name): what one trial runs;
- `SEARCHED_KEYS`, `TRIAL_KEYS`: the study keys a search owns;
- `Outcome`: how a trial ended;
- the trial folder's file names;
- `METRICS`: every metric's label, unit, direction, bounds and plain-words definition, read by
  the metrics module, the study lifecycle, the report, compare and the dashboard attributes;
- the names of the built-in tasks, rewards and models (the trainer core holds their code).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping

from grpo_ablate.core.schedule import Dynamic, PerPrompt, Schedule, generations_data, generations_from_data, generations_text

__all__ = [
    "PLANNED_SAMPLERS",
    "PREFIX_ROLE",
    "Arm",
    "Cell",
    "Schedule",
    "Dynamic",
    "PerPrompt",
    "generations_text",
    "generations_data",
    "pair_label",
    "Metric",
    "METRICS",
    "HEADLINE_METRICS",
    "DIAGNOSTIC_METRICS",
    "TARGET_METRICS",
    "EVAL_FILE",
    "RANK_RESULT_GLOB",
    "HEADLINE_FILE",
    "TENSORBOARD_DIR",
    "EVENTS_FILE",
    "MEMORY_FILE",
    "SAMPLES_FILE",
    "PROBE_FILE",
    "ADVISE_FILE",
    "Outcome",
    "SEARCHED_KEYS",
    "TRIAL_KEYS",
    "SPEC_FILE",
    "RESULT_FILE",
    "METRICS_FILE",
    "GROUPS_FILE",
    "LOG_FILE",
    "STOP_FILE",
    "TAKEN_FILE",
    "LEASE_FILE",
    "LEASE_ENV",
    "RESOLVED_CONFIG_FILE",
    "REWARD_CURVE_FILE",
    "TRIALS_DIR",
    "trial_dir_name",
    "BUILTIN_TASKS",
    "BUILTIN_REWARDS",
    "BUILTIN_MODELS",
    "BUILTIN_MODEL_PREFIX",
    "reward_names",
    "metric",
    "finite",
]

# ---------------------------------------------------------------- searched keys

# The GRPOConfig keys a study searches (TRL's own names, unchanged).
SEARCHED_KEYS: tuple[str, ...] = ("num_generations", "temperature", "generation_batch_size")
# What identifies one trial's run: the searched keys plus the training seed.
TRIAL_KEYS: tuple[str, ...] = (*SEARCHED_KEYS, "seed")


PLANNED_SAMPLERS = ("grid", "ablation")  # every trial is planned and queued; the sampler proposes none


# ---------------------------------------------------------------- arms and cells

@dataclass(frozen=True, order=True)
class Arm:
    """One configuration: the three knobs this tool decides.

    `num_generations` is an int or a `Schedule` (an int subclass whose str is its label, e.g.
    `4→8@40%`), so every reader goes through `key`, `label` and `as_dict` rather than formatting
    it itself. Plain-int arms keep the keys and labels they always had.

    G is never read back from text here: `as_dict` stores a schedule as its numbers
    (schedule.generations_data) and `from_mapping` rebuilds it from them. The key and the labels
    are for matching and reading only; text becomes a G in the study-file loader alone (config/).
    """

    num_generations: int
    generation_batch_size: int
    temperature: float

    @property
    def key(self) -> str:
        """Stable across studies and versions: compare and the duplicate check match on it."""
        return f"G{self.num_generations}xB{self.generation_batch_size}|T{self.temperature:g}"

    @property
    def label(self) -> str:
        """Short, for tables and legends."""
        return f"G={self.num_generations}, batch {self.generation_batch_size}, T={self.temperature:g}"

    @property
    def words(self) -> str:
        """In TRL's own key names, for sentences a user can paste into a config."""
        return (f"num_generations={self.num_generations}, generation_batch_size={self.generation_batch_size}, "
                f"temperature={self.temperature:g}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe knobs (trial attributes, a study's baseline, summary.json, advise.json): G as data,
        an int or a schedule's numbers, so `from_mapping` never parses it."""
        return {"num_generations": generations_data(self.num_generations),
                "generation_batch_size": self.generation_batch_size, "temperature": self.temperature}

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Arm | None":
        """`as_dict`'s inverse (trial attributes, saved files); None when a knob is missing or not a
        number. A schedule stored as its label (studies before G travelled as data) reads as None:
        rebuilding it would mean parsing text outside the loader."""
        try:
            return cls(generations_from_data(values["num_generations"]), int(values["generation_batch_size"]),
                       float(values["temperature"]))
        except (KeyError, TypeError, ValueError):
            return None


def pair_label(num_generations: int, generation_batch_size: int) -> str:
    """The single categorical param ("8x64") a trial draws when batches are searched too; read back
    through the study's feasible space (FeasibleSpace.by_label), never split."""
    return f"{num_generations}x{generation_batch_size}"


PREFIX_ROLE = "prefix"  # a seed's shared prefix (budget.branch_from): the baseline trained to the branch step


@dataclass(frozen=True)
class Cell:
    """One trial's run: an arm on one seed, in a role.

    The role says why the trial exists: the ablation's "baseline" or the factor it varies
    ("num_generations=4"), "grid", the adaptive sampler's name, or PREFIX_ROLE: the baseline
    trained once per seed up to the branch point every arm of that seed starts from
    (grpo_ablate/plan/branching.py). A prefix is not an arm's result: its key differs from the
    baseline cell's on the same seed.
    """

    arm: Arm
    seed: int
    role: str = ""

    @property
    def key(self) -> str:
        """Unique within a study: the plan's duplicate check and requeueing use it."""
        return f"{self.arm.key}|seed{self.seed}" + ("|prefix" if self.role == PREFIX_ROLE else "")

    @property
    def slug(self) -> str:
        """File-name safe."""
        a = self.arm
        g = a.num_generations.slug if isinstance(a.num_generations, Schedule) else a.num_generations
        return f"G{g}-B{a.generation_batch_size}-T{a.temperature:g}-s{self.seed}"

    def as_attrs(self) -> dict[str, Any]:
        """The trial's user attributes (the report and the dashboard read these names)."""
        return {**self.arm.as_dict(), "seed": self.seed, "role": self.role}

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> "Cell | None":
        arm = Arm.from_mapping(attrs)
        if arm is None:
            return None
        try:
            seed = int(attrs["seed"])
        except (KeyError, TypeError, ValueError):
            return None
        return cls(arm, seed, str(attrs.get("role") or ""))


# ---------------------------------------------------------------- outcomes


class Outcome(str, enum.Enum):
    """How a trial ended. A str enum, so it goes into JSON and Optuna attrs as its value."""

    COMPLETED = "completed"
    PRUNED = "pruned"
    OOM = "oom"  # on evidence only: the kernel's OOM kill, CUDA's OOM error, MemoryError
    FAILED = "failed"  # the trial's own fault: counted, not retried
    INTERRUPTED = "interrupted"  # stopped or lost for reasons outside the trial: queued again
    RUNNING = "running"  # only seen by readers of a live study: a trial a run has started and not yet recorded
    QUEUED = "queued"  # a cell waiting in the study's queue: nothing runs it yet

    @property
    def retried(self) -> bool:
        return self is Outcome.INTERRUPTED


# ---------------------------------------------------------------- trial files

TRIALS_DIR = "trials"  # <output_dir>/trials/<trial_dir_name(number)>/
SPEC_FILE = "spec.json"  # the trial's whole input
RESULT_FILE = "result.json"  # how it ended (the worker's record, then the parent's classification)
METRICS_FILE = "metrics.jsonl"  # one JSON object per optimizer step
GROUPS_FILE = "groups.jsonl"  # one JSON object per prompt group
LOG_FILE = "log.txt"  # the trial process's stdout and stderr
STOP_FILE = "STOP"  # written by the parent: end after the current step (its text is the reason)
TAKEN_FILE = "TAKEN"  # another run took the trial over (its run was judged dead): stop at once, save nothing
LEASE_FILE = "lease.json"  # renewed by the trial process while it runs: another host's sign that it still trains
LEASE_ENV = "GRPO_ABLATE_LEASE_S"  # seconds between a trial process's lease renewals (the study's heartbeat interval)
RESOLVED_CONFIG_FILE = "resolved_config.json"  # GRPOConfig after TRL derived its fields
REWARD_CURVE_FILE = "reward_curve.png"  # the dashboard's per-trial plot
RANK_RESULT_GLOB = "result.rank*.json"  # a failing non-zero rank's own record of what went wrong
EVAL_FILE = "eval.jsonl"  # held-out evaluation: one JSON object per evaluation point
HEADLINE_FILE = "headline_metrics.csv"  # the headline metrics as a small table, a dashboard artifact
TENSORBOARD_DIR = "tensorboard"  # <output_dir>/tensorboard/<run name>/ when the study turns TensorBoard on
EVENTS_FILE = "events.jsonl"  # events of a run: one JSON object per G-schedule phase change (step, reason)
MEMORY_FILE = "memory.json"  # the trial's peak memory (and the cap, when hardware.memory_limit_mb is set)
SAMPLES_FILE = "samples.json"  # advise's sampler: rewards of K completions per prompt, no training
# In the study's output_dir, beside the trials:
PROBE_FILE = "probe.json"  # grpo-ablate probe: fits or OOM, memory and throughput per (G, batch)
ADVISE_FILE = "advise.json"  # grpo-ablate advise: fitted difficulty and the predicted shortlist


def trial_dir_name(number: int) -> str:
    return f"{number:05d}"


# ---------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    """How every layer names, reads and orders one metric."""

    name: str
    label: str  # short, for tables and axes
    unit: str
    direction: str | None  # "maximize" | "minimize"; None: a count, not something to optimise
    description: str  # plain words; the formula lives in grpo_ablate/contract/metrics.py
    low: float | None = None  # the range the quantity can take (intervals are clipped to it)
    high: float | None = None
    # "trial": computed when a trial ends, copied into its user attributes (objectives are these);
    # "diagnostic": derived by the report from a trial's files, pooled over every trial that logged it;
    # "target": derived by the report once the study's evaluation target is known (censored when unmet).
    kind: str = "trial"
    # Measured in wall time, so only as good as the machine's timing noise; `twin` is the
    # token-based metric that answers the same question without the clock (None: no twin).
    time_based: bool = False
    twin: str | None = None

    @property
    def headline(self) -> bool:
        return self.kind == "trial"

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "maximize"

    @property
    def optimisable(self) -> bool:
        """A study may name it as an objective: it has a direction and every trial records it."""
        return self.direction is not None and self.headline

    def clip(self, x: float) -> float:
        if self.low is not None:
            x = max(self.low, x)
        if self.high is not None:
            x = min(self.high, x)
        return x


def _m(name: str, label: str, unit: str, direction: str | None, description: str, *,
       low: float | None = None, high: float | None = None, kind: str = "trial", time_based: bool = False,
       twin: str | None = None) -> tuple[str, Metric]:
    return name, Metric(name, label, unit, direction, description, low, high, kind, time_based, twin)


METRICS: dict[str, Metric] = dict([
    _m("reward_per_hour", "reward/hour", "reward/h", "maximize",
       "Reward gained per hour of training: (mean reward of the last 10% of steps - mean of the first 10%) / training hours.", time_based=True, twin="reward_per_million_tokens"),
    _m("final_reward", "final reward", "reward", "maximize", "Mean reward over the last 10% of steps."),
    _m("reward_gain", "reward gain", "reward", "maximize",
       "Mean reward of the last 10% of steps minus that of the first 10%."),
    _m("start_reward", "start reward", "reward", "maximize",
       "Mean reward over the first 10% of steps, before training changed much."),
    _m("stability_variance", "stability variance", "reward^2", "minimize",
       "How much the reward curve jitters: variance of each step's reward minus the 5-step moving average around it. Lower is steadier.",
       low=0.0),
    _m("samples_per_second", "samples/s", "completions/s", "maximize",
       "Completions generated (and trained on) per second of training time.", low=0.0, time_based=True),
    _m("tokens_per_second", "tokens/s", "tokens/s", "maximize",
       "Prompt plus completion tokens processed per second of training time.", low=0.0, time_based=True),
    _m("reward_per_million_tokens", "reward per M tokens", "reward/Mtok", "maximize",
       "Reward gained per million generated completion tokens: sample efficiency in tokens."),
    _m("peak_memory_mb", "peak memory (MB)", "MB", "minimize",
       "Peak memory: CUDA max allocated on GPU, peak resident memory (RSS) on CPU.", low=0.0),
    _m("train_seconds", "train time (s)", "s", "minimize",
       "Training wall time, excluding start-up, loading and building.", low=0.0, time_based=True),
    _m("load_seconds", "load time (s)", "s", "minimize",
       "Time to load the model and data before the trainer is built.", low=0.0),
    _m("steps", "steps", "", None, "Optimizer steps the trial took.", low=0.0),
    # Held-out evaluation (EVAL_FILE): the same prompts and the same fixed decoding for every arm,
    # scored before the first step, at equal generated compute, and at the end.
    _m("eval_start_reward", "held-out reward at start", "reward", "maximize",
       "Held-out reward before the first step, at the study's fixed evaluation decoding."),
    _m("eval_final_reward", "held-out reward", "reward", "maximize",
       "Held-out reward at the end of the trial's budget, at the study's fixed evaluation decoding."),
    _m("eval_gain", "held-out gain", "reward", "maximize", "Held-out reward at the end minus at the start."),
    _m("eval_gain_per_hour", "held-out gain/hour", "reward/h", "maximize",
       "Held-out gain per hour of training time (evaluation time excluded).", time_based=True, twin="eval_gain_per_million_tokens"),
    _m("eval_gain_per_million_tokens", "held-out gain per M tokens", "reward/Mtok", "maximize",
       "Held-out gain per million generated completion tokens: sample efficiency, independent of the machine."),
    _m("eval_auc", "held-out reward AUC", "reward", "maximize",
       "Area under the held-out reward curve against generated tokens, divided by the tokens: the mean held-out "
       "reward over the run, so an arm that learns early scores higher."),
    _m("eval_seconds", "evaluation time (s)", "s", "minimize",
       "Time spent scoring held-out prompts; never counted as training time.", low=0.0),
    _m("completions_to_target", "completions to target", "completions", "minimize",
       "Completions generated until the held-out reward first reached the study's target; censored at the budget "
       "when it never did.", low=0.0, kind="target"),
    _m("tokens_to_target", "tokens to target", "tokens", "minimize",
       "Completion tokens generated until the held-out reward first reached the target; censored when never reached.",
       low=0.0, kind="target"),
    _m("seconds_to_target", "training seconds to target", "s", "minimize",
       "Training seconds until the held-out reward first reached the target; censored when never reached.",
       low=0.0, kind="target", time_based=True, twin="tokens_to_target"),
    # Diagnostics the report derives from a trial's files; they back its warnings.
    _m("frac_reward_zero_std", "zero-spread groups", "", "minimize",
       "Share of prompt groups whose completions all got the same reward: such groups have zero advantage and "
       "teach nothing (TRL's frac_reward_zero_std, averaged over steps).", low=0.0, high=1.0, kind="diagnostic"),
    _m("completions_clipped_ratio", "truncated completions", "", "minimize",
       "Share of completions cut off at max_completion_length (averaged over steps).", low=0.0, high=1.0,
       kind="diagnostic"),
    _m("distinct_frac", "distinct completions", "", "maximize",
       "Share of a group's completions that differ from each other (averaged over groups); low means the G "
       "samples are near duplicates.", low=0.0, high=1.0, kind="diagnostic"),
])

HEADLINE_METRICS: tuple[str, ...] = tuple(n for n, m in METRICS.items() if m.kind == "trial")
DIAGNOSTIC_METRICS: tuple[str, ...] = tuple(n for n, m in METRICS.items() if m.kind == "diagnostic")
TARGET_METRICS: tuple[str, ...] = tuple(n for n, m in METRICS.items() if m.kind == "target")


def metric(name: str) -> Metric:
    """The registry's entry; a name from an older study gets a neutral entry rather than a crash."""
    return METRICS.get(name) or Metric(name, name.replace("_", " "), "", "maximize", "")


# ---------------------------------------------------------------- built-ins (names only)

BUILTIN_MODEL_PREFIX = "builtin:"

# name -> what it is. The code is in grpo_ablate/trainer/builtin/.
BUILTIN_MODELS: dict[str, str] = {
    "builtin:tiny": "2-layer, 64-wide Qwen2; warm-started on the data section's built-in task when there is one.",
    "builtin:tiny-untrained": "the same model, randomly initialised (no warm start): shows GRPO cannot start from zero reward.",
    "builtin:tiny-vllm": ("builtin:tiny with 2 attention heads of 32 instead of 4 of 16, warm-started alike: vLLM's CPU "
                          "attention needs head size >= 32 (the vLLM test tier runs it)."),
}

BUILTIN_TASKS: dict[str, str] = {
    "addition": ("Carry drill: add a 2-digit and a 1-digit number whose units carry (`47+8=` -> `55`); "
                 "reward 1 for the exact sum, else 0."),
    "addition_rare": ("The carry drill from a warm start that is right about 1 time in 50 when sampling, so small "
                      "groups rarely hold a right answer (no reward spread): the task where num_generations matters; "
                      "reward 1 for the exact sum, else 0."),
    "addition_mixed": ("Mixed-difficulty sums of a 3-digit and a 2-digit number (`347+85=` -> `432`): carry-free "
                       "(easy), one carry (the drill) and double carries (hard), so per-prompt success rates "
                       "spread like a real math set's; reward 1 for the exact sum, else 0."),
}

# name -> what it scores. Every built-in task's name is a reward too (its exact-answer score).
BUILTIN_REWARDS: dict[str, str] = {
    "accuracy": "math answer equals the `solution` column (math-verify)",
    "format": "<think>...</think><answer>...</answer> layout, 1 or 0",
    "tag_count": "0.25 per think/answer tag present exactly once",
    "length_penalty": "-(completion tokens / max_completion_length)",
    "task": "the built-in task's own exact-answer reward",
}


def reward_names() -> list[str]:
    """Every name a study's `rewards` may use besides package.module:function."""
    return sorted({*BUILTIN_REWARDS, *BUILTIN_TASKS})


def finite(x: object) -> float | None:
    """A finite float, or None (missing, None, bool, NaN, inf, not a number)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        f = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
