"""A reward module that registers, at import, with a registry that refuses a repeat (torch's pytree).

In a fresh process its import succeeds; imported again in the same process it raises. A warm
session forgets a trial's modules and imports them again for the next trial: the case
tests/test_launch_fresh.py checks is settled by a fresh process.
"""

from __future__ import annotations

import argparse

import torch.utils._pytree as pytree

pytree.register_pytree_node(
    argparse.Namespace,
    lambda ns: (list(vars(ns).values()), list(vars(ns))),
    lambda values, keys: argparse.Namespace(**dict(zip(keys, values))),
)


def registered(prompts, completions, **kwargs):
    return [0.5] * len(completions)
