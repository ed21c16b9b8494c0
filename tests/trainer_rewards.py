"""Custom rewards for the trainer-core tests, loaded as `trainer_rewards:<name>` (tests/ on PYTHONPATH)."""

from __future__ import annotations


def solution_length(prompts, completions, **kwargs):
    """A well-behaved custom reward: reads a dataset column, returns one float per completion."""
    return [float(len(str(s))) / 10 for s in kwargs["solution"]]
