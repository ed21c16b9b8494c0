"""The software a recipe was written for (its TRL release), and what a key it leaves out meant there.

A recipe's missing keys mean what its own TRL said (Open R1: TRL 0.18), not what the installed TRL
says; the defaults of both come from config/trl_defaults.json (config/trl_releases.py).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Any

from grpo_ablate.config.recipes.registry import OPEN_R1_ONLY_KEYS, OPEN_R1_REWARDS
from grpo_ablate.config.trainer_fields import trainer_field_names, trl_default
from grpo_ablate.config.trl_releases import release_defaults, release_entries, release_of

__all__ = ["TargetStack", "OPEN_R1_STACK", "recipe_stack", "stack_default", "installed_trl", "installed_fields"]


@dataclass(frozen=True)
class TargetStack:
    """The software a recipe was written for, where it is known: what the keys it leaves out meant there.

    `trl` is a release of config/trl_defaults.json (read from that release's own source), so `defaults`
    holds every GRPOConfig field's default there; a recipe that leaves one out ran with that value.
    """

    name: str
    trl: str
    source: str

    @property
    def defaults(self) -> dict[str, Any]:
        return release_defaults(self.trl)


# Open R1 pins trl[vllm]==0.18.0 and transformers==4.52.3 (its setup.py).
OPEN_R1_STACK = TargetStack(name="Open R1", trl="0.18.0", source="Open R1 pins trl[vllm]==0.18.0")


def recipe_stack(values: dict[str, Any], recipe_trl: Any = None) -> TargetStack | None:
    """The stack a recipe was written for, when known: the study's `recipe_trl` (a TRL release of the
    defaults table), else Open R1's when the recipe's keys say so (its reward names or its own keys)."""
    if isinstance(recipe_trl, str) and release_of(recipe_trl):
        version = release_of(recipe_trl) or recipe_trl
        return TargetStack(name=f"TRL {version}", trl=version, source=f"recipe_trl: {recipe_trl}")
    rewards = values.get("reward_funcs")
    names = [rewards] if isinstance(rewards, str) else rewards if isinstance(rewards, list) else []
    if any(isinstance(n, str) and n in OPEN_R1_REWARDS for n in names) or any(k in values for k in OPEN_R1_ONLY_KEYS):
        return OPEN_R1_STACK
    return None


def stack_default(values: dict[str, Any], key: str, recipe_trl: Any = None) -> Any:
    """What a key the recipe leaves out meant on its own stack: that TRL's default, else the installed TRL's."""
    stack = recipe_stack(values, recipe_trl)
    if stack is not None and key in stack.defaults:
        return stack.defaults[key]
    return trl_default(key)


def installed_trl() -> str:
    try:
        return importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def installed_fields() -> dict[str, dict[str, Any]]:
    """The installed TRL's fields as the table holds them: the table's release when it is the installed one,
    else read from the installed GRPOConfig (declared defaults; run benchmarks/trl_defaults.py to add it)."""
    version = release_of(installed_trl())
    if version:
        return release_entries(version)
    return {k: {"default": trl_default(k)} for k in trainer_field_names()}
