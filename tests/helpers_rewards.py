"""Reward functions used by the end-to-end tests as `helpers_rewards:<name>` (tests/ is on PYTHONPATH).

They are real rewards run by the real trainer; they only misbehave on purpose.
"""

from __future__ import annotations


def oom_for_large_groups(prompts, completions, **kwargs):
    """Raises MemoryError when groups hold 8 or more completions, as a too-large G would on a GPU."""
    group = len(prompts) // max(1, len({str(p) for p in prompts}))
    if group >= 8:
        raise MemoryError(f"simulated: {len(completions)} completions in groups of {group} do not fit")
    return [0.0] * len(completions)


def always_raises(prompts, completions, **kwargs):
    raise ValueError("always_raises: this reward is broken on purpose")


def wrong_length(prompts, completions, **kwargs):
    return [0.0] * (len(completions) + 1)



def raises_for_large_batches(prompts, completions, **kwargs):
    """A reward that breaks on generation batches above 16 completions (not a memory error)."""
    if len(completions) > 16:
        raise ValueError(f"raises_for_large_batches: {len(completions)} completions is more than it handles")
    return [0.0] * len(completions)
