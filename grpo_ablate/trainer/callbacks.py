"""Trainer callbacks: the per-step metrics recorder and the stop/budget switch.

The recorder turns each of GRPOTrainer's per-step logs into one flushed line of
`metrics.jsonl` (so a crash keeps every finished step), and each generation round into one line
per prompt group in `groups.jsonl`: every completion of the group with its reward, each text cut
to MAX_COMPLETION_CHARS characters, at most MAX_GROUPS_PER_STEP groups a generation round
(sampled when there are more). The switch ends training at the end of an optimizer step
when the parent asks (a `STOP` file), or a token/time budget runs out; in a multi-process run
rank 0 decides and broadcasts (one collective per step): a rank that stops alone leaves the
others waiting in DDP forever, and only rank 0's clock knows the evaluation time to leave out.

    grpo-ablate run-one studies/tiny-cpu.yaml   # one trial; its folder gets both files
"""

from __future__ import annotations

import json
import math
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import TrainerCallback

from grpo_ablate.core.vocab import GROUPS_FILE, METRICS_FILE, STOP_FILE, TAKEN_FILE

from . import trl_adapter
from .collective import from_rank0
from .rewards import GROUPS_RECORDER, GenerationRound, GroupsRecorder
from .text import plain_text

__all__ = ["MetricsRecorder", "StopSwitch", "TAKEN_REASON", "engine_memory_mb", "peak_memory_mb"]

TAKEN_REASON = "taken over by another run"  # the start of StopSwitch.stop_reason when TAKEN_FILE stopped the trial

# TRL's log keys that we rename (slashes make awkward column names in reports).
_RENAMED = {
    "completions/mean_length": "completions_mean_length",
    "completions/min_length": "completions_min_length",
    "completions/max_length": "completions_max_length",
    "completions/clipped_ratio": "completions_clipped_ratio",
    "completions/mean_terminated_length": "completions_mean_terminated_length",
    "completions/min_terminated_length": "completions_min_terminated_length",
    "completions/max_terminated_length": "completions_max_terminated_length",
}
# Trainer summary keys logged once at the end; not a step.
_END_OF_TRAINING = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}

MAX_GROUPS_PER_STEP = 32
MAX_PROMPT_CHARS = 500
MAX_COMPLETION_CHARS = 200


def peak_memory_mb(engine_resident_mb: float = 0.0) -> float:
    """The trainer's peak: CUDA max allocated (since the last reset) less what a colocated vLLM engine
    held resident then, on GPU; peak resident set size of this process on CPU."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return max(0.0, torch.cuda.max_memory_allocated() / 2**20 - engine_resident_mb)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024


def _tensor_bytes(items: Any) -> int:
    if isinstance(items, torch.Tensor):
        return items.numel() * items.element_size()
    if isinstance(items, dict):
        return sum(_tensor_bytes(v) for v in items.values())
    if isinstance(items, (list, tuple)):
        return sum(_tensor_bytes(v) for v in items)
    return 0


def engine_memory_mb(trainer: Any) -> float | None:
    """What a colocated vLLM engine holds on this GPU: its KV cache and its copy of the weights, from
    the engine's own tensors (right under sleep mode too, where vLLM's allocator frees them between
    generations). None without a colocated engine (or on a TRL the adapter was not checked against).
    """
    held = trl_adapter.engine_memory_bytes(trainer, _tensor_bytes)
    return None if held is None else held / 2**20


def _clean(value: Any) -> Any:
    """JSON-safe scalars: NaN/inf become None, tensors become floats."""
    if isinstance(value, torch.Tensor):
        value = value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsRecorder(TrainerCallback):
    """Append one row per optimizer step to metrics.jsonl and the prompt groups to groups.jsonl.

    Runs on every rank (TRL's metrics are already gathered) but writes only on the main one.
    The groups come from `groups`, the zero-weight reward TRL calls with each round's completions
    (rewards.GroupsRecorder): every rank gathers the round at the log that follows it.
    """

    def __init__(
        self,
        trial_dir: str | Path,
        *,
        reward_names: Sequence[str],
        reward_weights: Sequence[float],
        num_generations: int,
        generation_batch_size: int,
        completions_per_step: int,
        groups: GroupsRecorder | None = None,
        echo: bool = True,
    ) -> None:
        self.trial_dir = Path(trial_dir)
        self.reward_names = list(reward_names)
        self.reward_weights = list(reward_weights)
        self.num_generations = num_generations
        self.generation_batch_size = generation_batch_size
        self.completions_per_step = completions_per_step
        self.groups = groups
        self.echo = echo
        self.trainer: Any = None
        self.started: float | None = None
        self.seconds_spent = 0.0  # our own cost inside training, for the overhead benchmark
        self.paused_seconds = 0.0  # held-out evaluation time (trainer/evaluation.py): not training time
        self.completions_total = 0  # training completions generated so far (all processes)
        self.tokens_total = 0.0  # their completion tokens
        self._metrics_handle = None
        self._groups_handle = None
        self._rng = random.Random(0)
        self.engine_mb: float | None = None  # a colocated vLLM engine's pool (engine_memory_mb)
        self._engine_resident_mb = 0.0  # of it, what torch counted as allocated when the peak was reset
        self.generation_seconds = 0.0  # rollout time since the last row (generation_seconds)
        self.resumed_seconds = 0.0  # training seconds of the run this one resumes (its checkpoint's clock)
        self.timed = False  # the rollouts are timed (trl_adapter.time_rollouts): generation_seconds is written

    def attach(self, trainer: Any) -> None:
        """Read the trainer's G and round statistics, and time its rounds: TRL 1.16 logs one `step_time` for generation
        and training together, so the probe could only split them when some steps did not generate.
        The TRL version gate runs here (trl_adapter.gate): every trial's trainer is attached once."""
        trl_adapter.gate(trainer)
        self.trainer = trainer
        self.timed = trl_adapter.time_rollouts(trainer, self._add_generation_seconds)

    def _add_generation_seconds(self, seconds: float) -> None:
        self.generation_seconds += seconds

    # -- lifecycle -------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            # The engine is built by now (GRPOTrainer's __init__): start the trainer's peak here, and
            # take off what the engine keeps allocated, so peak_memory_mb is what training needs and
            # engine_memory_mb is vLLM's pool, which otherwise dominates every arm's peak alike.
            self.engine_mb = engine_memory_mb(self.trainer)
            vllm = trl_adapter.vllm_generation(self.trainer)
            asleep = vllm is not None and trl_adapter.weights_sleeping(vllm)
            allocated = torch.cuda.memory_allocated() / 2**20
            self._engine_resident_mb = 0.0 if asleep or self.engine_mb is None else min(self.engine_mb, allocated)
            torch.cuda.reset_peak_memory_stats()
        if state.is_world_process_zero:
            self.trial_dir.mkdir(parents=True, exist_ok=True)
            self._metrics_handle = open(self.trial_dir / METRICS_FILE, "a", buffering=1)
            self._groups_handle = open(self.trial_dir / GROUPS_FILE, "a", buffering=1)

    def on_train_end(self, args, state, control, **kwargs):
        self.close()

    def close(self) -> None:
        for handle in (self._metrics_handle, self._groups_handle):
            if handle is not None and not handle.closed:
                handle.flush()
                handle.close()

    @property
    def train_seconds(self) -> float:
        """Training wall time since the first step began, held-out evaluation time excluded."""
        if self.started is None:
            return self.resumed_seconds
        return self.resumed_seconds + time.perf_counter() - self.started - self.paused_seconds

    @property
    def group_size(self) -> int:
        """The G of the round just trained: the trainer's own (trainer/scheduled.py changes it)."""
        return int(getattr(self.trainer, "num_generations", None) or self.num_generations)

    # -- per step --------------------------------------------------------------------------
    def on_log(self, args, state, control, logs=None, **kwargs):
        started = time.perf_counter()
        try:
            step_log = bool(logs) and not (_END_OF_TRAINING & set(logs) or any(k.startswith("eval_") for k in logs))
            # every rank takes the round (a gather), at the same log: TRL's logs are the same on every rank
            batch = self.groups.latest() if step_log and "reward" in logs and self.groups is not None else None
            self._record(state, logs, batch)
        finally:
            self.seconds_spent += time.perf_counter() - started

    def _record(self, state, logs, batch: GenerationRound | None = None) -> None:
        if not logs or not state.is_world_process_zero or self._metrics_handle is None:
            return
        if _END_OF_TRAINING & set(logs) or any(k.startswith("eval_") for k in logs):
            return
        generated = "reward" in logs
        row: dict[str, Any] = {"step": state.global_step, "train_seconds": round(self.train_seconds, 4)}
        for key, value in logs.items():
            if key.startswith(f"rewards/{GROUPS_RECORDER}/"):
                continue  # the zero-weight recorder scores nothing: not a reward of the study
            row[_RENAMED.get(key, key)] = _clean(value)
        row["num_generations"] = self.group_size  # the G in force (a schedule changes it during the run)
        if self.timed:
            row["generation_seconds"] = round(self.generation_seconds, 4)  # of this step's time, the rollout's
        self.generation_seconds = 0.0
        made = self.generation_batch_size
        stats = getattr(self.trainer, "round_stats", None) if generated else None
        if stats:
            # dynamic sampling / per-prompt G (trainer/scheduled.py): what the round generated, dropped ones
            # included, and the G distribution in force (g_sizes: one G per group; g_alloc: [estimated pass rate, G])
            made = int(stats["completions_generated"])
            row.update({k: v for k, v in stats.items() if k != "alloc"})
            if "alloc" in stats:
                row["g_alloc"] = stats["alloc"]
        row["completions"] = made if generated else 0
        row["completions_trained"] = self.completions_per_step
        if generated and row.get("completions_mean_length") is not None:
            row["completion_tokens"] = round(row["completions_mean_length"] * made, 2)
        if generated:
            self.completions_total += made
            self.tokens_total += (row.get("completions_mean_length") or 0.0) * made
        row["peak_memory_mb"] = round(peak_memory_mb(self._engine_resident_mb), 2)
        if self.engine_mb is not None:
            row["engine_memory_mb"] = round(self.engine_mb, 2)
        self._metrics_handle.write(json.dumps(row) + "\n")
        self._metrics_handle.flush()
        if generated and batch is not None:
            self._write_groups(state.global_step, batch)
        if self.echo:
            shown = {k: row[k] for k in ("step", "train_seconds", "reward", "frac_reward_zero_std", "loss") if row.get(k) is not None}
            print("[grpo-ablate] " + json.dumps(shown), flush=True)

    def _write_groups(self, step: int, batch: GenerationRound) -> None:
        if self._groups_handle is None:
            return
        prompts, completions = batch.prompts, batch.completions
        per_func = [list(batch.rewards.get(name, [])) for name in self.reward_names]
        g = self.group_size
        n = len(prompts)
        stats = getattr(self.trainer, "round_stats", None)
        if stats and len(set(stats["g_sizes"])) > 1:
            return  # per-prompt G: groups of several sizes (a later version may write them; skipped, not mis-grouped)
        if n == 0 or n % g or len(completions) != n or any(len(v) != n for v in per_func):
            return  # not one whole generation batch: skip rather than mis-group
        totals = []
        for i in range(n):
            parts = [w * v for w, v in zip(self.reward_weights, (f[i] for f in per_func)) if v is not None and not math.isnan(v)]
            totals.append(sum(parts) if parts else None)
        num_groups = n // g
        chosen = range(num_groups)
        if num_groups > MAX_GROUPS_PER_STEP:
            chosen = sorted(self._rng.sample(range(num_groups), MAX_GROUPS_PER_STEP))
        for j in chosen:
            lo, hi = j * g, (j + 1) * g
            scores = [t for t in totals[lo:hi] if t is not None]
            texts = [plain_text(c) for c in completions[lo:hi]]
            mean = sum(scores) / len(scores) if scores else None
            var = sum((s - mean) ** 2 for s in scores) / len(scores) if scores else None
            record = {
                "step": step,
                "group": j,
                "prompt": plain_text(prompts[lo])[:MAX_PROMPT_CHARS],
                "num_generations": g,
                "reward_mean": mean,
                "reward_var": var,
                "distinct_frac": len(set(texts)) / g,
                "rewards": [None if t is None else round(t, 4) for t in totals[lo:hi]],
                "completions": [
                    {"text": text[:MAX_COMPLETION_CHARS], "reward": None if t is None else round(t, 4)}
                    for text, t in zip(texts, totals[lo:hi])
                ],
            }
            self._groups_handle.write(json.dumps(record) + "\n")
        self._groups_handle.flush()


class StopSwitch(TrainerCallback):
    """End training after the current optimizer step on a STOP file, a token budget or a time budget.

    The parent (a pruner, Ctrl-C, `run_trial(stop_event=...)`) asks by writing `<trial_dir>/STOP`
    containing "pruned" or "interrupted". Budgets: `tokens` counts TRL's num_input_tokens_seen
    (prompt + completion tokens over all processes), `seconds` the training wall time.
    """

    def __init__(self, trial_dir: str | Path, *, max_tokens: int | None = None, max_seconds: float | None = None) -> None:
        self.trial_dir = Path(trial_dir)
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.started: float | None = None
        self.stop_reason: str | None = None  # "pruned" | "interrupted" | "budget: ..."
        self.seconds_spent = 0.0
        self.paused_seconds = 0.0  # held-out evaluation time, not counted against the seconds budget
        self.resumed_seconds = 0.0  # counted by the run this one resumes

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    @property
    def elapsed(self) -> float:
        """Training seconds counted against the budget (evaluation left out, a resumed run's included)."""
        if self.started is None:
            return self.resumed_seconds
        return self.resumed_seconds + time.perf_counter() - self.started - self.paused_seconds

    def _local_reason(self, state) -> int:
        """0 = go on; 1 = budget reached; 2 = stop requested by the parent; 3 = another run took the trial over."""
        if (self.trial_dir / TAKEN_FILE).exists():
            return 3
        if (self.trial_dir / STOP_FILE).exists():
            return 2
        if self.max_tokens is not None and state.num_input_tokens_seen >= self.max_tokens:
            return 1
        if self.max_seconds is not None and self.started is not None:
            if self.elapsed >= self.max_seconds:
                return 1
        return 0

    def on_step_end(self, args, state, control, **kwargs):
        started = time.perf_counter()
        try:
            return self._check(state, control)
        finally:
            self.seconds_spent += time.perf_counter() - started

    def _check(self, state, control):
        # Rank 0 decides: its clock is the one whose evaluation pauses are all counted, and it is
        # on the host where the parent writes STOP. A MAX over ranks stopped early when another
        # rank's clock (without those pauses) ran past the budget first.
        code = from_rank0(self._local_reason(state) if state.is_world_process_zero else 0)
        if code == 0:
            return control
        if code == 3:  # at once, nothing saved: the run that took it resumes the last checkpoint (study/liveness.py)
            try:
                text = (self.trial_dir / TAKEN_FILE).read_text().strip()
            except OSError:
                text = ""
            self.stop_reason = f"{TAKEN_REASON}: {text or 'by another run'}"
        elif code == 2:
            try:
                text = (self.trial_dir / STOP_FILE).read_text().strip().lower()
            except OSError:
                text = ""
            self.stop_reason = "interrupted" if text.startswith("interrupt") else "pruned"
        else:
            self.stop_reason = self._budget_text(state)
        control.should_training_stop = True
        return control

    def _budget_text(self, state) -> str:
        if self.max_tokens is not None and state.num_input_tokens_seen >= self.max_tokens:
            return f"budget: {state.num_input_tokens_seen} tokens >= tokens budget {self.max_tokens}"
        return f"budget: training time reached the seconds budget {self.max_seconds}"
