"""Custom rewards for the trainer-core tests, loaded as `trainer_rewards:<name>` (tests/ on PYTHONPATH)."""

from __future__ import annotations


def solution_length(prompts, completions, **kwargs):
    """A well-behaved custom reward: reads a dataset column, returns one float per completion."""
    return [float(len(str(s))) / 10 for s in kwargs["solution"]]


async def async_exact(prompts, completions, **kwargs):
    """An async reward: TRL runs these concurrently; the wrapper must keep it async."""
    return [1.0 if str(c).strip() == str(a) else 0.0 for c, a in zip(completions, kwargs["answer"])]


async def async_short(prompts, completions, **kwargs):
    return [0.0]


def all_none(prompts, completions, **kwargs):
    """Abstains on everything: fine beside a reward that scores, a broken trial alone."""
    return [None] * len(completions)


def all_nan(prompts, completions, **kwargs):
    return [float("nan")] * len(completions)


def one_inf(prompts, completions, **kwargs):
    return [1.0] * (len(completions) - 1) + [float("inf")]


async def async_all_none(prompts, completions, **kwargs):
    return [None] * len(completions)
