"""A recipe's reward_funcs as study rewards: Open R1's registry names (its own functions where open_r1
imports, else built-ins that score as they do), `trl grpo`'s names and dotted paths, and the weights.
"""

from __future__ import annotations

from typing import Any

from grpo_ablate.config.names import module_findable
from grpo_ablate.config.recipes.file import Recipe, RecipeNote
from grpo_ablate.config.recipes.registry import (OPEN_R1_ACCURACY_CHANGED, OPEN_R1_DEFAULT_REWARDS, OPEN_R1_EARLY_ACCURACY,
                                                 OPEN_R1_MODULE, OPEN_R1_REWARDS, OPEN_R1_SCRIPT_DEFAULTS,
                                                 OPEN_R1_STAND_INS, TRL_REWARDS)
from grpo_ablate.config.recipes.defaults import recipe_target
from grpo_ablate.config.recipes.stack import TargetStack, is_open_r1
from grpo_ablate.core.errors import Problem, did_you_mean, echo
from grpo_ablate.core.vocab import reward_names

__all__ = ["recipe_rewards", "stand_in_for"]


def _open_r1_reward(recipe: Recipe, name: str, notes: list[RecipeNote], stack: TargetStack | None = None) -> dict[str, Any]:
    """An Open R1 registry name as a study reward: Open R1's own function where open_r1 is importable
    (factories called with the recipe's arguments), else the built-in that stands in, or Open R1's
    path for the trial machine to import."""
    key = "reward_funcs"
    function, params = OPEN_R1_REWARDS[name]
    path = f"{OPEN_R1_MODULE}:{function}"
    args = {p: recipe.values.get(k, OPEN_R1_SCRIPT_DEFAULTS.get(k)) for p, k in params.items()}
    spec: dict[str, Any] = {"name": path, **({"args": args} if args else {})}
    called = f"{path}({', '.join(f'{p}={v!r}' for p, v in args.items())})" if args else path
    if module_findable(OPEN_R1_MODULE):
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} is Open R1's own {called}, as its registry builds it"))
        return spec
    if name in OPEN_R1_STAND_INS:
        stand_in, why = stand_in_for(name, stack)
        notes.append(RecipeNote(
            f"{recipe.at(key)}: reward {name!r}: open_r1 is not installed here, so {stand_in!r} stands in for Open R1's "
            f"{path}: {why}; install open-r1 to use its own"))
        return {"name": stand_in}
    notes.append(RecipeNote(
        f"{recipe.at(key)}: reward {name!r} is Open R1's {called}; open_r1 is not installed here, so it cannot be "
        f"checked on this machine: the trial machine needs the open-r1 package (and the code sandbox its rewards "
        f"call), or write rewards: [{{name: 'my_module:function'}}] with a module you provide"))
    return spec


def _reward_name(recipe: Recipe, name: Any, open_r1: bool, notes: list[RecipeNote],
                 problems: list[Problem], stack: TargetStack | None = None) -> dict[str, Any] | None:
    """A recipe's reward name as a study reward ({name, args}), or None with a problem."""
    key = "reward_funcs"
    if not isinstance(name, str) or not name:
        problems.append(recipe.problem(key, f"expected reward names, got {echo(name)}"))
        return None
    if name in OPEN_R1_REWARDS and (open_r1 or name not in reward_names()):
        return _open_r1_reward(recipe, name, notes, stack)
    if name in reward_names() or ":" in name:
        return {"name": name}
    if name in TRL_REWARDS:
        target = TRL_REWARDS[name]
        if target is None:
            problems.append(recipe.problem(key, (
                f"{name!r} is a factory in trl.rewards that needs arguments; name it as "
                f"{{name: 'trl.rewards:{name}', args: {{...}}}} in rewards")))
            return None
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} resolves to {target}"))
        return {"name": target}
    if "." in name:  # `trl grpo` takes dotted import paths: my_lib.rewards.custom_reward
        module, _, function = name.rpartition(".")
        target = f"{module}:{function}"
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} is the import path {target}"))
        return {"name": target}
    known = sorted({*reward_names(), *TRL_REWARDS, *OPEN_R1_REWARDS})
    problems.append(recipe.problem(key, f"unknown reward {echo(name)}{did_you_mean(name, known)}; "
                                        f"known: {known}, or package.module:function"))
    return None


def stand_in_for(name: str, stack: TargetStack | None) -> tuple[str, str]:
    """The stand-in for Open R1's reward `name` on the recipe's stack: `accuracy` by the recipe's date (its rule
    changed on OPEN_R1_ACCURACY_CHANGED), the others one rule."""
    if name == "accuracy" and stack is not None and stack.date is not None and stack.date < OPEN_R1_ACCURACY_CHANGED:
        return OPEN_R1_EARLY_ACCURACY
    return OPEN_R1_STAND_INS[name]


def recipe_rewards(recipe: Recipe, notes: list[RecipeNote], problems: list[Problem],
                   raw: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    names = recipe.values.get("reward_funcs")
    stack = recipe_target(recipe, raw or {})
    open_r1 = is_open_r1(stack)
    if names is None:
        if not open_r1:
            return []
        names = list(OPEN_R1_DEFAULT_REWARDS)
        notes.append(RecipeNote(f"{recipe.path.name}: names no reward_funcs; Open R1's default {names} apply"))
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        problems.append(recipe.problem("reward_funcs", f"expected a list of names, got {echo(names)}"))
        return []
    weights = recipe.values.get("reward_weights")
    if weights is None:
        weights = [1.0] * len(names)
    if not isinstance(weights, list) or len(weights) != len(names):
        problems.append(recipe.problem("reward_weights", (
            f"expected one weight per reward ({len(names)}), got {echo(weights)}")))
        return []
    out = []
    for n, w in zip(names, weights):
        resolved = _reward_name(recipe, n, open_r1, notes, problems, stack)
        if resolved is not None:
            out.append({**resolved, "weight": w})
    return out
