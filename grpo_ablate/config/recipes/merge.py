"""The merge: a study with its recipe's keys translated into its sections (the study's own keys win),
the notes saying what was done with each key, and the problems found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_ablate.core.attention import AUTO
from grpo_ablate.config.recipes.defaults import anchor_baseline, implicit_keys
from grpo_ablate.config.recipes.file import Recipe, RecipeDifference, RecipeNote, read_recipe
from grpo_ablate.config.recipes.keys import (FLASH_ATTENTION, OTHER_TOOL_KEYS, REMOVED_KEYS, SCRIPT_KEYS,
                                             STUDY_OWNED_KEYS, TRAINING_OWNED_KEYS, UNSUPPORTED_KEYS, matches)
from grpo_ablate.config.recipes.registry import OPEN_R1_REWARDS
from grpo_ablate.config.recipes.rewards import recipe_rewards
from grpo_ablate.config.recipes.sharding import sharding_note
from grpo_ablate.config.trainer_fields import cast_like_trl
from grpo_ablate.trl_facts.fields import trainer_field_names, trl_default
from grpo_ablate.core.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.core.vocab import SEARCHED_KEYS

__all__ = ["merge_recipe"]


def _as_trl_reads(recipe: Recipe, key: str, value: Any, notes: list[RecipeNote]) -> Any:
    """A recipe value as TRL's parser reads it (`learning_rate: 2e-4` is text under YAML 1.1 and a float to
    `trl grpo --config`); a value it would refuse stays, for validate to report with the key's path."""
    try:
        cast = cast_like_trl(key, value)
    except ValueError:
        return value
    if cast is not value and (cast != value or type(cast) is not type(value)):
        notes.append(RecipeNote(f"{recipe.at(key)}: {key}: {echo(value)} read as {echo(cast)}, as TRL's own "
                                f"parser reads the recipe"))
    return cast


def _full_run(recipe: Recipe, raw: dict[str, Any], trainer: dict[str, Any], notes: list[RecipeNote]) -> None:
    """budget.full_run: the recipe's own run length, for the prefix learning-rate schedule and plan's share."""
    budget = raw.get("budget")
    if budget is None:
        budget = raw["budget"] = {"max_steps": 100}  # the schema's default budget, written out to add full_run
    if not isinstance(budget, dict):
        return
    steps = recipe.values.get("max_steps")
    full: dict[str, Any] = {}
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        full["max_steps"] = steps
    else:
        epochs = recipe.values.get("num_train_epochs", trl_default("num_train_epochs"))
        if isinstance(epochs, (int, float)) and not isinstance(epochs, bool) and epochs > 0:
            full["num_train_epochs"] = epochs
    g = recipe.values.get("num_generations", trl_default("num_generations"))
    if isinstance(g, int) and not isinstance(g, bool):
        full["num_generations"] = g
    given = budget.get("full_run")
    if not full or (given is not None and not isinstance(given, dict)):
        return  # anything else stays, for the schema to report
    if given and ("max_steps" in given or "num_train_epochs" in given):
        full.pop("max_steps", None)
        full.pop("num_train_epochs", None)  # the study's own length wins over the recipe's
    budget["full_run"] = {**full, **(given or {})}
    schedule = budget.get("lr_schedule") or "prefix"
    kind = trainer.get("lr_scheduler_type", trl_default("lr_scheduler_type"))
    warmup = trainer.get("warmup_steps") or 0
    what = f"{kind} learning-rate schedule{f' with warmup {warmup}' if warmup else ''}"
    if schedule == "prefix":
        notes.append(RecipeNote(f"{recipe.path.name}: the {what} is computed for the recipe's full run and each trial is "
                                f"its first steps (budget.lr_schedule: prefix): step k has the full run's rate at step k"))
    else:
        notes.append(RecipeDifference(
            f"{recipe.path.name}: the {what} is compressed into each trial (budget.lr_schedule: compressed): it warms "
            f"up and anneals within the trial's steps, where the full run at that step is still near its peak"))


def merge_recipe(raw: dict[str, Any], base: Path) -> tuple[dict[str, Any], list[RecipeNote], list[Problem]]:
    """The study with its recipe merged in: the study's own keys win. Returns (raw, notes, problems)."""
    if not isinstance(raw["trainer_from"], str):
        return raw, [], [Problem(path="trainer_from", message=f"expected a file path, got {echo(raw['trainer_from'])}")]
    rp = Path(raw["trainer_from"])
    if not rp.is_absolute():
        rp = base / rp
    try:
        recipe = read_recipe(rp)
    except StudyError as e:
        return raw, [], [Problem(path="trainer_from", message=e.problems[0].message)]
    notes: list[RecipeNote] = []
    problems: list[Problem] = []
    for key, (lines, same) in recipe.repeated.items():
        where = ", ".join(str(n) for n in lines)
        if same:
            notes.append(RecipeNote(f"{recipe.path.name}: {key} is given {len(lines)} times (lines {where}) with the same "
                                    f"value; read once"))
        elif key in STUDY_OWNED_KEYS or matches(key, OTHER_TOOL_KEYS):  # no value of it reaches a trial
            notes.append(RecipeNote(f"{recipe.path.name}: {key} is given {len(lines)} times (lines {where}) with "
                                    f"different values; neither is used: the study or another tool decides it"))
        else:
            problems.append(recipe.problem(key, (
                f"given {len(lines)} times (lines {where}) with different values; YAML keeps the last one, as TRL's "
                f"parser would, but which was meant cannot be told: keep one")))
    fields = trainer_field_names()
    own = given if isinstance(given := raw.get("trainer"), dict) else {}
    search = searched if isinstance(searched := raw.get("search"), dict) else {}
    trainer: dict[str, Any] = {}
    ignored: list[str] = []

    def section(name: str) -> dict[str, Any]:
        sec = raw.get(name)
        if sec is None:
            sec = raw[name] = {}
        return sec if isinstance(sec, dict) else {}  # anything else stays, for the schema to report

    reward_list = recipe.values.get("reward_funcs")
    reward_args = {k for n in (reward_list if isinstance(reward_list, list) else [reward_list])
                   if isinstance(n, str) and n in OPEN_R1_REWARDS for k in OPEN_R1_REWARDS[n][1].values()}
    evaluation = raw.get("evaluation")
    for key, value in recipe.values.items():
        if key in reward_args:
            continue  # an argument of a reward the recipe names: the reward's note shows it
        if key == "dataset_test_split" and isinstance(evaluation, dict) and isinstance(value, str) \
                and not evaluation.get("split") and not evaluation.get("dataset"):
            evaluation["split"] = value  # the study evaluates: on the recipe's own test split
            notes.append(RecipeNote(f"{recipe.at(key)}: dataset_test_split {value!r} became evaluation.split"))
            continue
        if key in SCRIPT_KEYS:
            name, field = SCRIPT_KEYS[key]
            sec = section(name)
            if name == "data" and "task" in sec:
                continue  # the study chose a built-in task; the recipe's dataset does not apply
            if key == "torch_dtype" and value is not None:
                value = str(value)
            if key == "attn_implementation" and value in FLASH_ATTENTION and field not in sec:
                # Open R1 recipes all say flash_attention_2; without the flash_attn package transformers
                # would fetch a kernel from the hub. `auto` keeps flash attention where it is installed.
                notes.append(RecipeNote(f"{recipe.at(key)}: attn_implementation {value} -> auto (flash_attention_2 "
                                        f"where flash_attn imports, else sdpa; never a kernel from the hub)"))
                value = AUTO
            sec.setdefault(field, value)
        elif key in ("reward_funcs", "reward_weights"):
            continue
        elif key == "report_to":
            trainer[key] = value
            notes.append(RecipeNote(f"{recipe.at(key)}: report_to {echo(value)} stays on in every trial, each run named by "
                                    f"its arm and seed and grouped by the study (study.trackers: [] turns it off)"))
        elif key == "dataset_configs":  # older Open R1 scripts: a list holding one config name
            names = value if isinstance(value, list) else [value]
            if len(names) == 1 and isinstance(names[0], str):
                if "task" not in section("data"):
                    section("data").setdefault("config_name", names[0])
                notes.append(RecipeNote(f"{recipe.at(key)}: dataset_configs {echo(names)} became data.config_name"))
            else:
                problems.append(recipe.problem(key, f"expected one config name, got {echo(value)}; "
                                                    f"set data.config_name in the study"))
        elif key == "max_prompt_length":
            if value is not None:
                section("data").setdefault("max_prompt_tokens", value)
            notes.append(RecipeDifference(f"{recipe.at(key)}: max_prompt_length {REMOVED_KEYS[key]}, where the "
                                          f"recipe's TRL cut them from the left"))
        elif key == "warmup_ratio":
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
                    and not recipe.values.get("warmup_steps"):
                trainer["warmup_steps"] = float(value)
            notes.append(RecipeNote(f"{recipe.at(key)}: warmup_ratio {REMOVED_KEYS[key]}"))
        elif key in REMOVED_KEYS:
            notes.append(RecipeNote(f"{recipe.at(key)}: {key} {REMOVED_KEYS[key]}"))
        elif key in STUDY_OWNED_KEYS:
            if key not in own:
                kind = RecipeDifference if key in TRAINING_OWNED_KEYS else RecipeNote
                notes.append(kind(f"{recipe.at(key)}: {key}: {echo(value)} overridden; {STUDY_OWNED_KEYS[key]}"))
        elif matches(key, OTHER_TOOL_KEYS):
            ignored.append(f"{key} (line {recipe.lines.get(key, '?')})")
        elif matches(key, UNSUPPORTED_KEYS):
            if value in (None, False, [], {}, "") or isinstance(raw.get("script"), dict):  # a script applies its own
                ignored.append(f"{key} (line {recipe.lines.get(key, '?')})")
            else:
                problems.append(recipe.problem(key, (
                    f"{echo(value)} is not supported by grpo-ablate trials (PEFT, quantisation, reward models and "
                    f"dataset mixtures change what trains); remove it or set it off")))
        elif key not in fields and isinstance(raw.get("script"), dict):
            ignored.append(f"{key} (line {recipe.lines.get(key, '?')}: the script's own key)")
        elif key not in fields:
            problems.append(recipe.problem(key, f"not a GRPOConfig field of the installed TRL, nor a known script key"
                                                f"{did_you_mean(key, sorted(fields))}"))
        elif key in SEARCHED_KEYS and key in search:
            anchored = anchor_baseline(raw, key, value, search[key])
            notes.append(RecipeDifference(f"{recipe.at(key)}: {key}: {echo(value)} is searched (search.{key}); "
                                          f"each arm uses its own value{anchored}"))
        else:
            trainer[key] = _as_trl_reads(recipe, key, value, notes)
    if ignored:
        notes.append(RecipeNote(f"{recipe.path.name}: ignored (read by other tools, or left off): {', '.join(ignored)}"))
    implicit_keys(recipe, raw, trainer, own, search, notes)
    _full_run(recipe, raw, trainer, notes)
    sharding = sharding_note(recipe, raw.get("hardware"))
    if sharding:
        notes.append(sharding)
    if isinstance(raw.get("script"), dict):
        # a command trial: the script builds the recipe's rewards itself, on its own stack; the study's `rewards`
        # only score the held-out evaluation, so a name this package cannot build is the script's, not a problem
        found: list[Problem] = []
        rewards = recipe_rewards(recipe, notes, found, raw)
        if found:
            notes.append(RecipeNote(f"{recipe.path.name}: reward_funcs are the script's own (script.command builds "
                                    f"them); the held-out evaluation scores with the study's `rewards`"))
            rewards = []
    else:
        rewards = recipe_rewards(recipe, notes, problems, raw)
    if rewards and not raw.get("rewards"):
        raw["rewards"] = rewards
    if raw.get("trainer") is None or isinstance(raw.get("trainer"), dict):
        trainer.update(own or {})
        raw["trainer"] = trainer
    return raw, notes, problems
