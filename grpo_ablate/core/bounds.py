"""Each value's valid range, said once: the schema, the readers of the tool's own files and the
trainer's checks all ask here.

    python -c "from grpo_ablate.core.bounds import BOUNDS; print(BOUNDS['num_generations'])"

A range checked in one place and not another was a hang (`num_generations: {low: 2, high: 1e8}`
made validate enumerate 10^8 values), a silent wrong answer (a reward of 1e308 overflowed the
group mean and was logged as "no reward", exit 0), an impossible point read back from probe.json
(G=0, NaN seconds) or a ZeroDivisionError (a model named "...-0B"). So each range is a `Bound`
here; `Field(...)`-annotated types carry it into pydantic (the study schema, probe.json,
advise.json, summary.json), and `Bound.problem` into plain code (the reward wrapper, cost).
Stdlib and pydantic only, at the bottom floor beside vocab: config, files, cost and the trainer
all import it (inside config/ it would close a circle: config reads probe.json through files/).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Callable

from pydantic import Field

__all__ = ["Bound", "BOUNDS", "Generations", "BatchSize", "Seconds", "Megabytes", "Rate", "Fraction", "Finite",
           "Steps", "Temperature", "TrialSteps", "Completions", "Tokens", "Prompts", "PromptTokens", "Workers", "Trials",
           "Retries", "Processes", "Gpus", "MAX_SEARCHED_VALUES", "REWARD_ROWS_NEEDED", "flag_value"]


@dataclass(frozen=True)
class Bound:
    """A closed range [low, high] of finite numbers (an integer one when `integer`); why it is that."""

    low: float
    high: float
    why: str
    integer: bool = False

    def problem(self, value: Any) -> str | None:
        """Why `value` is outside the range (or not a number), or None when it is inside."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"is not a number (got {value!r:.40})"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, got {value}"
        if self.integer and not float(value).is_integer():
            return f"must be a whole number, got {value}"
        if not self.low <= value <= self.high:
            got = f"{value:g}" if isinstance(value, float) else str(value)
            return f"must lie in [{self.low:g}, {self.high:g}] ({self.why}), got {got}"
        return None

    def field(self) -> Any:
        """The pydantic constraint for an annotated type (`Annotated[int, b.field()]`)."""
        if self.integer:
            return Field(ge=int(self.low), le=int(self.high))
        return Field(ge=self.low, le=self.high, allow_inf_nan=False)


BOUNDS: dict[str, Bound] = {
    # TRL needs two completions per group for a spread; no GPU holds 65536 completions of one prompt
    "num_generations": Bound(2, 65536, "completions per prompt: TRL needs 2, no GPU holds more", integer=True),
    "generation_batch_size": Bound(1, 2**24, "completions generated per round", integer=True),
    "max_steps": Bound(1, 10**9, "optimizer steps per trial", integer=True),
    "seconds": Bound(0, 10**9, "a duration in seconds"),
    "megabytes": Bound(0, 2**40, "a memory size in MiB"),
    "rate": Bound(0, 1e15, "a throughput"),
    "fraction": Bound(0, 1, "a share"),
    "temperature": Bound(1e-6, 1e3, "a sampling temperature"),
    # |r| <= 1e12: the group's mean and variance (squares, summed over G) stay far from overflow
    "reward": Bound(-1e12, 1e12, "a reward value; beyond it the group's mean and variance overflow"),
    "parameters": Bound(1e3, 1e14, "a model's parameter count"),
    # Counts a user types into a study file. Past these bounds a value can only be a typo (an exponent
    # too many): a billion steps is centuries of training, a billion prompts more than any dataset a
    # study samples from, and the plan, the price and the loaders would take the number at its word.
    "completions": Bound(1, 10**15, "completions generated per trial", integer=True),
    "tokens": Bound(1, 10**15, "tokens processed per trial", integer=True),
    "prompts": Bound(1, 10**9, "prompts in a dataset or a held-out set", integer=True),
    "prompt_tokens": Bound(1, 10**7, "tokens in one prompt", integer=True),
    "workers": Bound(1, 1024, "parallel trials on one machine", integer=True),
    "trials": Bound(1, 10**6, "trials in one study", integer=True),
    "retries": Bound(0, 1000, "retries or failures in a row", integer=True),
    "processes": Bound(1, 65536, "processes of one trial", integer=True),
    "gpus": Bound(0, 65536, "GPUs of one trial", integer=True),
}

def flag_value(bound: str, *, low: float | None = None) -> Callable[[str], int]:
    """An argparse `type` for a command-line count checked against BOUNDS[bound] (at least `low` when given):
    argparse then refuses the value with the flag's name, the range and why (exit 2), as the schema does a key."""
    import argparse  # here: only the commands' parsers need it

    b = BOUNDS[bound]
    if low is not None:
        b = Bound(low, b.high, b.why, b.integer)

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r:.40}") from None
        if (problem := b.problem(value)) is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = bound  # argparse names the type in its messages
    return parse


# the values a searched range may enumerate (`num_generations: {low, high, step}`): every value is
# a feasible-space check and an Optuna choice; real studies search a handful
MAX_SEARCHED_VALUES = 4096

Generations = Annotated[int, BOUNDS["num_generations"].field()]
BatchSize = Annotated[int, BOUNDS["generation_batch_size"].field()]
Steps = Annotated[int, Field(ge=0, le=10**9)]
TrialSteps = Annotated[int, BOUNDS["max_steps"].field()]
Completions = Annotated[int, BOUNDS["completions"].field()]
Tokens = Annotated[int, BOUNDS["tokens"].field()]
Prompts = Annotated[int, BOUNDS["prompts"].field()]
PromptTokens = Annotated[int, BOUNDS["prompt_tokens"].field()]
Workers = Annotated[int, BOUNDS["workers"].field()]
Trials = Annotated[int, BOUNDS["trials"].field()]
Retries = Annotated[int, BOUNDS["retries"].field()]
Processes = Annotated[int, BOUNDS["processes"].field()]
Gpus = Annotated[int, BOUNDS["gpus"].field()]
Seconds = Annotated[float, BOUNDS["seconds"].field()]
Megabytes = Annotated[float, BOUNDS["megabytes"].field()]
Rate = Annotated[float, BOUNDS["rate"].field()]
Fraction = Annotated[float, BOUNDS["fraction"].field()]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Temperature = Annotated[float, BOUNDS["temperature"].field()]

# Reward rows (steps that generated) a metric needs, from metrics.py's formulas: a gain compares
# two windows, the stability variance a moving average over three rows. With fewer, the metric is
# None and every trial of a study optimising it fails. How many a budget logs: space.Rounds.generating_steps.
REWARD_ROWS_NEEDED = {"reward_gain": 2, "reward_per_hour": 2, "reward_per_million_tokens": 2,
                      "stability_variance": 3}

