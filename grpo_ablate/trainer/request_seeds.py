"""vLLM request seeds: one per prompt, so that no two prompts share their random draws.

vLLM seeds a request's k samples seed, seed+1, ..., seed+k-1 from the request's own seed. One
seed for a whole batch of prompts therefore gives every prompt the same draws, and prompts with
similar next-token distributions then make the same choices: advise's zero-spread share counted
24 of 64 prompts where transformers' single random stream, on the same model, counted 12 (the
prompts were not 64 independent draws). advise's sampler and the colocate evaluator seed each
prompt here.
"""

from __future__ import annotations

__all__ = ["prompt_seeds"]


def prompt_seeds(call_seed: int, prompts: int, k: int) -> list[int]:
    """A vLLM request seed per prompt of one call, k apart, so no two prompts' samples share a seed
    (vLLM seeds a request's samples seed, seed+1, ..., seed+k-1); calls' seeds differ by at least 1,
    so a call's block of 10**6 seeds never meets another's."""
    if prompts * k > 10**6:
        raise ValueError(f"{prompts} prompts x {k} samples in one call: more than the 10**6 seeds a call has")
    return [call_seed * 10**6 + j * k for j in range(prompts)]
