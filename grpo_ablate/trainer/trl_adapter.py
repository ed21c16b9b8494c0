"""Every private TRL (and vLLM-engine) access of the trial, in one module, behind a version gate.

    python -c "from grpo_ablate.trainer.trl_adapter import support; print(support())"

TRL documents GRPOTrainer's arguments, its logged metrics and its callbacks; it does not document
the members used here, and may change any of them in a minor release without a word. So each one
is named here, with what depends on it, and tests/test_trl_contract.py checks each against the
installed TRL: the four GRPOTrainer methods the G-schedule trainer (trainer/scheduled.py, a
subclass) overrides and the rollout this module times are hashed per TRL version (CHECKED), and
the private attributes read here must still be set where TRL sets them. TRL's private helpers the
trial calls (FUNCTIONS: a module-level function no TRL `__all__` exports) are hashed the same way.

Where a public route exists it is used instead: the per-step metrics come from `on_log`, the
reward functions are plain callables, and the round's completions with each reward (groups.jsonl)
are recorded by a reward function of weight 0 (trainer/rewards.py GroupsRecorder), no longer read
from GRPOTrainer._logs. None exists for these:
- the rollout's time: TRL times it with `profiling_context`, which reports to wandb, mlflow and
  trackio only, never to `on_log`; so `time_rollouts` wraps `_generate_and_score_completions`;
- evaluating with the trainer's own engine between steps (trainer/evaluation.py): which step's
  weights vLLM holds (`_last_loaded_step`), whether sleep mode discarded them
  (`_llm_weights_sleeping`), and FSDP's full-parameter context (`_dist`);
- the colocated engine's memory, from vLLM's model runner (`engine_memory_bytes`);
- the pad id of a dynamic-sampling round's joined rows (`pad_token_id`): TRL pads its own rows with its
  `_tokenizer`'s, the processing class's tokenizer (a processor's inner one), and a joined round must match;
- TRL's NaN-ignoring group std (`nanstd`), which per-prompt G's advantages use so that equal group sizes
  reproduce fixed G's advantages to the bit (trainer/g_policy.py `group_advantages`).

The gate (`gate(trainer)`, called when the recorder attaches): on a TRL whose version and hashes
were checked, nothing happens. Otherwise each feature refuses or degrades, loudly, by what a
changed member would do to the numbers:
- REFUSED: a trainer that overrides private methods (G schedules, dynamic sampling, per-prompt
  G: trainer/scheduled.py; `nanstd` and `pad_token_id` refuse too, wherever they are called) and
  evaluation with a vLLM engine. A changed member there trains with a
  wrong grouping or scores stale weights and still finishes: a wrong answer, so the trial fails
  with TrlUnchecked, naming the version and the fix;
- DEGRADED (a warning on stderr, once): the rollout timing (generation_seconds left out) and
  engine_memory_mb (left out): each only loses a column.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import inspect
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["CHECKED", "OVERRIDDEN", "TIMED", "FUNCTIONS", "PRIVATE_ATTRIBUTES", "REFUSED", "DEGRADED", "TrlUnchecked",
           "Support", "support", "gate", "degraded", "time_rollouts", "vllm_generation", "pad_token_id", "nanstd",
           "engine_memory_bytes", "weights_sleeping", "mark_weights_sleeping", "loaded_step", "mark_loaded_step",
           "full_params", "dist_description"]

# The GRPOTrainer methods trainer/scheduled.py overrides, and what it relies on in each.
OVERRIDDEN = {
    "_get_train_sampler": "returns a RepeatSampler of generation_batch_size / num_generations prompts, each "
                          "repeated num_generations times (ScheduledRepeatSampler copies its order and seed)",
    "_prepare_inputs": "generates every `steps_per_generation * num_iterations` steps, counted by self._step, "
                       "and serves self._buffered_inputs in between (the round boundary _enter_round hooks)",
    "_calculate_rewards": "returns the (completions, reward functions) tensor before weighting, gathered over "
                          "processes (_total_rewards re-weights it with reward_weights)",
    "_generate_and_score_completions": "groups rewards as rewards.view(-1, self.num_generations) for advantages, "
                                       "and appends frac_reward_zero_std to self._metrics[mode]",
}
# The method this module times (time_rollouts): one call is one generation round.
TIMED = "_generate_and_score_completions"
# TRL's private module-level functions the trial calls (through this module): dotted path -> what relies on it.
FUNCTIONS = {
    "trl.trainer.utils.nanstd": "nanstd: per-prompt G's group std (g_policy.group_advantages), TRL's own arithmetic "
                                "(Bessel-corrected, NaN-ignoring) so equal groups reproduce fixed G to the bit",
}
# Private attributes read or written here and in scheduled.py: (owner, name) -> what uses it.
PRIVATE_ATTRIBUTES = {
    ("GRPOTrainer", "_step"): "scheduled.py: the micro-step counter _prepare_inputs starts a round from",
    ("GRPOTrainer", "_buffered_inputs"): "scheduled.py: the round's generated batch, served between rounds",
    ("GRPOTrainer", "_metrics"): "scheduled.py: overwrites frac_reward_zero_std of a per-prompt round",
    ("GRPOTrainer", "_tokenizer"): "pad_token_id: the pad id of a dynamic-sampling round's joined rows (scheduled.py)",
    ("GRPOTrainer", "_last_loaded_step"): "loaded_step: the step whose weights vLLM holds (evaluation re-syncs)",
    ("GRPOTrainer", "_dist"): "full_params, dist_description: FSDP's summon_full_params for evaluation",
    ("VLLMGeneration", "_llm_weights_sleeping"): "weights_sleeping: sleep mode discarded the engine's weights",
}

# sha256 (first 16 hex digits) of inspect.getsource(GRPOTrainer.<method>) and of each of FUNCTIONS, per checked
# TRL version.
CHECKED: dict[str, dict[str, str]] = {
    "1.16.0": {
        "_get_train_sampler": "36497afb4d311dc9",
        "_prepare_inputs": "f824e7fb07147956",
        "_calculate_rewards": "736ae29b083840b5",
        "_generate_and_score_completions": "1fa48922792dcd5c",
        "trl.trainer.utils.nanstd": "081b874388d813a0",
    },
}

REFUSED = {
    "private overrides": "G schedules, dynamic sampling and per-prompt G (trainer/scheduled.py) override private "
                         "GRPOTrainer methods",
    "vllm evaluation": "held-out evaluation with the trainer's vLLM engine reads which weights it holds",
}
DEGRADED = {
    "rollout timing": "metrics.jsonl has no generation_seconds (it wraps GRPOTrainer._generate_and_score_completions)",
    "engine memory": "metrics.jsonl has no engine_memory_mb (it reads vLLM's model runner)",
}


class TrlUnchecked(RuntimeError):
    """A feature that would give wrong numbers on a TRL whose private members were not checked."""


@dataclass(frozen=True)
class Support:
    """The installed TRL against the checked table: `ok` when its version is listed and every hash matches."""

    version: str
    checked: bool  # the version is in CHECKED
    changed: tuple[str, ...] = field(default=())  # methods whose source differs from the recorded hash

    @property
    def ok(self) -> bool:
        return self.checked and not self.changed

    def words(self) -> str:
        if not self.checked:
            return f"TRL {self.version} is not one grpo-ablate was checked against (checked: {', '.join(CHECKED)})"
        return f"TRL {self.version}'s GRPOTrainer differs from the checked source in {', '.join(self.changed)}"


def source_hash(method: object) -> str:
    return hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]  # type: ignore[arg-type]


def checked_member(name: str) -> object | None:
    """The installed TRL's member a CHECKED entry names: a GRPOTrainer method, or a function by its dotted path."""
    from trl import GRPOTrainer  # lazy: the gate's table imports without TRL; TRL loads when a trial checks it

    if name not in FUNCTIONS:
        return getattr(GRPOTrainer, name, None)
    module, _, attr = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr, None)
    except ImportError:
        return None


@functools.lru_cache(maxsize=1)
def support() -> Support:
    """The installed TRL, checked once per process (reading five members' source: milliseconds)."""
    import trl  # lazy: the gate's table imports without TRL; TRL loads when a trial checks it

    version = str(trl.__version__)
    recorded = CHECKED.get(version)
    if recorded is None:
        return Support(version, False)
    changed = tuple(m for m, h in recorded.items() if source_hash(checked_member(m) or (lambda: None)) != h)
    return Support(version, True, changed)


_warned: set[str] = set()


def degraded(feature: str) -> bool:
    """True (after one warning on stderr) when `feature` of DEGRADED must be left out on this TRL."""
    state = support()
    if state.ok:
        return False
    if feature not in _warned:
        _warned.add(feature)
        print(f"[grpo-ablate] warning: {state.words()}: {DEGRADED[feature]}; add the version to "
              "grpo_ablate/trainer/trl_adapter.py CHECKED after tests/test_trl_contract.py passes", file=sys.stderr,
              flush=True)
    return True


def refuse(feature: str) -> None:
    """Raise TrlUnchecked for `feature` of REFUSED on a TRL whose private members were not checked."""
    state = support()
    if not state.ok:
        raise TrlUnchecked(f"{state.words()}; {REFUSED[feature]}, which could then train or score wrongly and still "
                           "finish. Install the checked TRL (pip install 'trl>=1.16,<1.17'), or re-check the members "
                           "tests/test_trl_contract.py names and add the version to trl_adapter.CHECKED")


def gate(trainer: Any, *, vllm_evaluation: bool = False) -> None:
    """The run-time version gate for one trial's trainer (see the module docstring for what refuses)."""
    from trl import GRPOTrainer  # lazy: the gate's table imports without TRL; TRL loads when a trial checks it

    if type(trainer) is not GRPOTrainer and any(m in vars(type(trainer)) for m in OVERRIDDEN):
        refuse("private overrides")
    if vllm_evaluation:
        refuse("vllm evaluation")


# ---------------------------------------------------------------- the rollout's time


def time_rollouts(trainer: Any, add_seconds: Callable[[float], None]) -> bool:
    """Call `add_seconds` with each generation round's wall time; False (nothing wrapped) on an unchecked TRL."""
    if degraded("rollout timing"):
        return False
    rollout = getattr(trainer, TIMED)

    @functools.wraps(rollout)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return rollout(*args, **kwargs)
        finally:
            add_seconds(time.perf_counter() - started)

    setattr(trainer, TIMED, timed)
    return True


# ---------------------------------------------------------------- the trainer's own tokenizer and arithmetic


def pad_token_id(trainer: Any) -> int:
    """The pad id TRL pads the trainer's completions with (its `_tokenizer`: a processor's inner tokenizer)."""
    refuse("private overrides")
    return int(trainer._tokenizer.pad_token_id or 0)


def nanstd(tensor: Any, dim: int | None = None) -> Any:
    """TRL's NaN-ignoring, Bessel-corrected standard deviation (the one its advantages use), over `dim`."""
    refuse("private overrides")
    # lazy: the gate's table imports without TRL; TRL loads when a trial checks it
    from trl.trainer.utils import nanstd as trl_nanstd

    return trl_nanstd(tensor, dim=dim)


# ---------------------------------------------------------------- the vLLM engine


def vllm_generation(trainer: Any) -> Any | None:
    """TRL's vLLM generation object of the trainer (mode, llm or vllm_client, sync_weights); None without vLLM."""
    if not getattr(getattr(trainer, "args", None), "use_vllm", False):
        return None
    return getattr(trainer, "vllm_generation", None)


def engine_memory_bytes(trainer: Any, tensor_bytes: Callable[[Any], int]) -> int | None:
    """What a colocated engine holds on this GPU (KV cache + its weights), through the path TRL's own
    sync_weights writes weights through (llm.llm_engine.model_executor.driver_worker.model_runner);
    None without a colocated engine, or on an unchecked TRL. GPU smoke-checked, not here."""
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    if llm is None or degraded("engine memory"):
        return None
    runner = llm.llm_engine.model_executor.driver_worker.model_runner
    return tensor_bytes(getattr(runner, "kv_caches", [])) + sum(tensor_bytes(p) for p in runner.model.parameters())


def weights_sleeping(vllm: Any) -> bool:
    """Sleep mode discarded the engine's weights after the last generate (TRL re-syncs before the next)."""
    return bool(getattr(vllm, "enable_sleep_mode", False) and getattr(vllm, "_llm_weights_sleeping", False))


def mark_weights_sleeping(vllm: Any) -> None:
    """Tell TRL the engine's weights were discarded (our own sleep after an evaluation generate)."""
    vllm._llm_weights_sleeping = True


def loaded_step(trainer: Any) -> int | None:
    """The optimizer step whose weights the engine holds, as TRL counts it."""
    return getattr(trainer, "_last_loaded_step", None)


def mark_loaded_step(trainer: Any, step: int) -> None:
    """Record that the engine now holds this step's weights, so TRL does not sync them again."""
    trainer._last_loaded_step = step


# ---------------------------------------------------------------- distributed backends


def full_params(trainer: Any) -> contextlib.AbstractContextManager[Any]:
    """FSDP's full parameters for a transformers generate (a no-op context without FSDP)."""
    dist = getattr(trainer, "_dist", None)
    if dist is None:
        return contextlib.nullcontext()
    return dist.summon_full_params(trainer.model_wrapped, recurse=False)


def dist_description(trainer: Any) -> tuple[int, Any]:
    """(ZeRO stage, FSDP version) of the trainer's backend, for the evaluation's one log line."""
    dist = getattr(trainer, "_dist", None)
    return int(getattr(dist, "zero_stage", 0) or 0), getattr(dist, "fsdp_version", None)

