"""The GRPOConfig fields a recipe leaves out: set to what its own TRL ran where the installed TRL changed
the default, or listed (a RecipeDifference) where the study cannot make them agree.
"""

from __future__ import annotations

from typing import Any

from grpo_ablate.config.recipes.file import FieldList, Recipe, RecipeDifference, RecipeNote
from grpo_ablate.config.recipes.keys import HARDWARE_KEYS, STUDY_OWNED_KEYS
from grpo_ablate.config.recipes.stack import (OPEN_R1_STACK, TargetStack, installed_fields, installed_trl,
                                              recipe_date, recipe_stack)
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.trl_facts.releases import (drift_between, known_releases, release_defaults, release_entries,
                                              release_of)
from grpo_ablate.core.errors import echo
from grpo_ablate.core.vocab import SEARCHED_KEYS

__all__ = ["DRIFTING_KEYS", "IMPLIED_BEFORE_THE_FIELD", "NEW_LOSS_SWITCHES", "anchor_baseline", "implicit_keys",
           "recipe_target"]


# The loss keys `init` writes out for a recipe whose TRL is not known (their defaults moved between TRL
# releases: trl_defaults.json); on a known stack every field is resolved from the table instead.
DRIFTING_KEYS = ("beta", "loss_type", "temperature")


# Switches added after TRL 0.18 that change the loss when on, and the value that computes the loss as a
# release without them did (read in TRL 1.16's grpo_trainer.py: each multiplies a term that 0.18 used
# unweighted), with why.
NEW_LOSS_SWITCHES: dict[str, tuple[Any, str]] = {
    "vllm_importance_sampling_correction": (False, "off, as the recipe's TRL weighted no token by the ratio of the "
                                                   "trainer's to vLLM's sampling probability"),
    "use_bias_correction_kl": (False, "off, as the recipe's TRL estimated the KL term (k3) without the "
                                      "importance-ratio weight"),
}


# What a release computed where it had no field for it yet, read in its trl/trainer/grpo_trainer.py: TRL 0.14 and
# 0.15 averaged each completion's token losses, then the completions (`((l * mask).sum(1) / mask.sum(1)).mean()`:
# today's loss_type "grpo") and always divided advantages by the group's std (scale_rewards on); 0.16 summed over
# every token of the local batch (`(l * mask).sum() / mask.sum()`: "bnpo"). loss_type came with 0.17.
IMPLIED_BEFORE_THE_FIELD: dict[str, dict[str, Any]] = {
    "0.14.0": {"loss_type": "grpo", "scale_rewards": True},
    "0.15.2": {"loss_type": "grpo", "scale_rewards": True},
    "0.16.1": {"loss_type": "bnpo"},
}


def recipe_target(recipe: Recipe, raw: dict[str, Any]) -> TargetStack | None:
    """The stack the recipe ran on: recipe_trl, else (Open R1) by the recipe's date (stack.recipe_date)."""
    date, source = recipe_date(recipe.path, raw.get("recipe_date")) if raw.get("recipe_trl") is None else (None, "")
    stack = recipe_stack(recipe.values, raw.get("recipe_trl"), date, source)
    if stack is OPEN_R1_STACK and date is None:  # the pin is assumed: say from what
        return TargetStack(name=stack.name, trl=stack.trl, family=stack.family,
                           source=f"{stack.source} since 2025-05-28; the recipe's date is not known ({source}): "
                                  "set recipe_date for a recipe older than that")
    return stack


def anchor_baseline(raw: dict[str, Any], key: str, value: Any, searched: Any) -> str:
    """The recipe's own value of a searched key becomes the ablation's baseline (the run one would make
    without the study), when the study names no baseline value and searches that value; words for the note."""
    study = raw.get("study")
    if not isinstance(study, dict) or not isinstance(searched, list) or value not in searched:
        return ""
    baseline = study.setdefault("baseline", {})
    if not isinstance(baseline, dict) or key in baseline:
        return ""
    baseline[key] = value
    return f", and {echo(value)} is the baseline's"


def _loss_switch_note(name: str, stack: TargetStack) -> str:
    return f"{name}: {NEW_LOSS_SWITCHES[name][1]} (TRL {stack.trl} has no such switch)"


def _unknown_stack(recipe: Recipe, raw: dict[str, Any], own: dict[str, Any], search: dict[str, Any],
                   notes: list[RecipeNote], installed: str) -> None:
    """A recipe whose TRL is not known: the installed TRL's defaults apply; say which loss keys that decides."""
    given = raw.get("recipe_trl")
    if given is not None:
        notes.append(RecipeDifference(
            f"{recipe.path.name}: recipe_trl {echo(given)} is not a release of the defaults table "
            f"(known: {known_releases()}); add it with `python tools/trl_defaults.py --release "
            f"{given}=<its transformers>`"))
    old = release_defaults(OPEN_R1_STACK.trl)
    for key in DRIFTING_KEYS:
        if key in recipe.values or key in own:
            continue
        now = trl_default(key)
        searched = key in SEARCHED_KEYS and key in search
        baseline = raw["study"].get("baseline") if isinstance(raw.get("study"), dict) else None
        if searched and isinstance(baseline, dict) and key in baseline:
            continue  # the study names its baseline value: it said what it meant
        where = f"study.baseline.{key}" if searched else f"trainer.{key}"
        lead = (f"the baseline is the searched value nearest TRL {installed}'s default {echo(now)}" if searched
                else f"TRL {installed}'s default {echo(now)} applies")
        notes.append(RecipeDifference(
            f"{recipe.path.name}: {key} not set: {lead}; the TRL this recipe was written for may have meant another "
            f"(TRL {OPEN_R1_STACK.trl}: {echo(old.get(key))}): set recipe_trl to that TRL's version, or set {where}"))


def implicit_keys(recipe: Recipe, raw: dict[str, Any], trainer: dict[str, Any], own: dict[str, Any],
                   search: dict[str, Any], notes: list[RecipeNote]) -> None:
    """Every GRPOConfig field the recipe leaves out whose default is not the same in its own TRL and the
    installed one (both read from the releases' source, trl_facts/releases.py): set to its TRL's value where
    the installed TRL has the field and the study does not decide it; otherwise listed with the reason.
    On an unknown stack, the loss keys the installed TRL's defaults decide are listed instead."""
    installed = installed_trl()
    stack = recipe_target(recipe, raw)
    if stack is None:
        _unknown_stack(recipe, raw, own, search, notes, installed)
        return
    then_fields = release_entries(stack.trl)
    now_fields = installed_fields()
    now_name = release_of(installed) or installed
    hardware: dict[str, Any] = hw if isinstance(hw := raw.get("hardware"), dict) else {}
    uses_vllm = bool(recipe.values.get("use_vllm", stack.defaults.get("use_vllm")))
    applied: list[str] = []
    owned: list[str] = []
    gone: list[str] = []
    new: list[str] = []
    for d in drift_between(then_fields, now_fields):
        key = d.name
        if key in recipe.values or key in own:
            continue  # the recipe or the study says: the merge handled it
        was = f"TRL {stack.trl}: {echo(d.then)}" if d.then_has else f"not a field of TRL {stack.trl}"
        if d.then_has and d.now_has and key in SEARCHED_KEYS and key in search:
            where = ("the baseline's value" if anchor_baseline(raw, key, d.then, search[key])
                     else "the baseline is the searched value nearest to it, unless study.baseline names one")
            notes.append(RecipeNote(f"{recipe.path.name}: {key} not set: {stack.name} ran it at {echo(d.then)} "
                                    f"({stack.source}; TRL {installed}'s is {echo(d.now)}): {where}"))
        elif key in STUDY_OWNED_KEYS:
            owned.append(f"{key} ({was}; {STUDY_OWNED_KEYS[key]})")
        elif key in HARDWARE_KEYS:
            vllm = hardware.get("vllm")
            mode = vllm.get("mode", "none") if isinstance(vllm, dict) else "none"
            if key == "vllm_mode" and uses_vllm and d.then_has and mode != d.then:
                notes.append(RecipeDifference(
                    f"{recipe.path.name}: vllm_mode not set: {stack.name} generated in vLLM's {echo(d.then)} mode "
                    f"({was}); here hardware.vllm.mode decides ({mode}): sampling is the same, the memory and speed are not"))
            else:
                owned.append(f"{key} ({was}; {HARDWARE_KEYS[key]})")
        elif d.then_has and d.now_has and not isinstance(d.then, dict):
            trainer[key] = d.then
            applied.append(f"{key} {echo(d.then)} (TRL {installed}: {echo(d.now)})")
        elif d.then_has and d.now_has:
            owned.append(f"{key} ({was}, computed at run time; the installed TRL's rule applies)")
        elif key == "max_prompt_length":
            notes.append(RecipeDifference(
                f"{recipe.path.name}: max_prompt_length not set: {stack.name}'s TRL cut every prompt to its last "
                f"{echo(d.then)} tokens; TRL {installed} has no such field and trains prompts whole (set "
                f"data.max_prompt_tokens: {d.then} to drop longer prompts instead)"))
        elif d.then_has:
            gone.append(f"{key} ({echo(d.then)})")
        elif key in IMPLIED_BEFORE_THE_FIELD.get(stack.trl, {}):
            value = IMPLIED_BEFORE_THE_FIELD[stack.trl][key]
            trainer[key] = value
            applied.append(f"{key} {echo(value)} (TRL {installed}: {echo(d.now)}; TRL {stack.trl} had no such field "
                           f"and computed it so)")
        elif key in NEW_LOSS_SWITCHES:
            value, _ = NEW_LOSS_SWITCHES[key]
            trainer[key] = value
            applied.append(f"{key} {echo(value)} (TRL {installed}: {echo(d.now)}; {_loss_switch_note(key, stack)})")
        else:
            new.append(f"{key} ({echo(d.now)})")
    if applied:
        notes.append(RecipeNote(
            f"{recipe.path.name}: keys the recipe leaves out whose default TRL {installed} changed, set to what "
            f"{stack.name} ran ({stack.source}): {', '.join(applied)}"))
    if owned:
        notes.append(RecipeNote(
            f"{recipe.path.name}: defaults of TRL {stack.trl} that the study decides instead: {'; '.join(owned)}"))
    if gone:
        notes.append(FieldList.listing(
            f"{recipe.path.name}: fields of TRL {stack.trl} that TRL {now_name} no longer has, so their defaults "
            f"cannot be set (at these defaults each is off or only names a backend)", gone))
    if new:
        notes.append(FieldList.listing(
            f"{recipe.path.name}: fields TRL {stack.trl} did not have, left at TRL {now_name}'s defaults (features "
            f"added since; check any the run relies on)", new))
