"""From a study file to a validated Study: read, merge the trainer_from recipe, apply `--set`.

    grpo-ablate validate studies/tiny-cpu.yaml --set num_generations=[2,4] --set study.n_trials=4

A recipe (an Open R1 / `trl grpo` script config, as published) fills the trainer section;
config/recipes.py translates its keys and notes what it did; the study's own keys win. Relative file paths mean: beside
the study file, else from the current directory.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from grpo_ablate.errors import Problem, StudyError, echo
from grpo_ablate.config.places import is_local_dataset
from grpo_ablate.config.recipes import RecipeNote, merge_recipe
from grpo_ablate.config.schema import SearchSection, StudyFile, StudySection
from grpo_ablate.config.study import Study
from grpo_ablate.config.validate import validate_dict
from grpo_ablate.config.yaml_io import YamlLimitError, parse_yaml, read_yaml_file
from grpo_ablate.vocab import SEARCHED_KEYS

__all__ = ["load_study", "apply_overrides", "parse_override"]

def load_study(path: str | os.PathLike[str], overrides: list[str] | None = None) -> Study:
    """Read, apply `--set` overrides, merge the recipe, validate. Raises StudyError."""
    p = Path(path)
    raw = read_yaml_file(p, what="study file")
    if not isinstance(raw, dict):
        raise StudyError([Problem(path="", message=(
            f"expected a mapping of sections at the top level, got {type(raw).__name__}"))], str(p))
    problems: list[Problem] = []
    notes: list[RecipeNote] = []
    raw = copy.deepcopy(raw)
    if overrides:  # before the recipe: the study's keys win over it, and its notes see the final hardware
        try:
            raw = apply_overrides(raw, overrides)
        except ValueError as e:
            problems.append(Problem(path="--set", message=str(e)))
    if raw.get("trainer_from"):
        raw, notes, recipe_problems = merge_recipe(raw, p.parent)
        problems += recipe_problems
    _resolve_paths(raw, p.parent)
    study = validate_dict(raw, source=str(p), problems=problems)
    study.path = p
    study.warnings[:0] = notes
    return study


# ---------------------------------------------------------------- overrides


def parse_override(item: str) -> tuple[list[str], Any]:
    """`key=value` as (key path, value); the value is YAML. Raises ValueError with one line.

    Bare keys find their section: searched keys go to search, study keys to study, the rest
    to trainer (GRPOConfig keywords).
    """
    key, sep, text = item.partition("=")
    if not sep:
        raise ValueError(f"expected key=value, got {echo(item)}")
    parts = key.strip().split(".")
    if not all(parts):
        raise ValueError(f"expected a dotted key before '=', got {echo(key)}")
    try:
        value = parse_yaml(text) if text.strip() else None
    except YamlLimitError as e:
        raise ValueError(f"{echo(key.strip())}: the value {echo(text)} is not valid: {e}") from None
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string; a number was meant
        try:
            value = float(value)
        except ValueError:
            pass
    if len(parts) == 1 and parts[0] not in StudyFile.model_fields:
        if parts[0] in SEARCHED_KEYS or parts[0] in SearchSection.model_fields:
            parts = ["search", parts[0]]
        elif parts[0] in StudySection.model_fields:
            parts = ["study", parts[0]]
        else:
            parts = ["trainer", parts[0]]
    return parts, value


def apply_overrides(raw: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """Apply `--set key=value` items to a raw study mapping (a copy). Raises ValueError."""
    out = copy.deepcopy(raw)
    for item in sets:
        parts, value = parse_override(item)
        node = out
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        node[parts[-1]] = value
    return out


# ---------------------------------------------------------------- recipe and paths


def _resolve_path(value: Any, base: Path | None) -> Any:
    if not isinstance(value, str) or not value or os.path.isabs(value) or base is None:
        return value
    try:
        beside = base / value
        if beside.exists():
            return str(beside.resolve())
        return str(Path(value).resolve()) if Path(value).exists() else value
    except (OSError, ValueError):  # a name too long, a NUL: validation says what is wrong
        return value


def _resolve_paths(raw: dict[str, Any], base: Path | None) -> None:
    hw = raw.get("hardware")
    if isinstance(hw, dict) and hw.get("accelerate_config"):
        hw["accelerate_config"] = _resolve_path(hw["accelerate_config"], base)
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("dataset"), str) and is_local_dataset(data["dataset"]):
        data["dataset"] = _resolve_path(data["dataset"], base)
    rewards = raw.get("rewards")
    if isinstance(rewards, list) and base is not None:
        for i, r in enumerate(rewards):
            if isinstance(r, dict) and isinstance(r.get("name"), str):
                r["name"] = _resolve_reward(r["name"], base)
            elif isinstance(r, str):
                rewards[i] = _resolve_reward(r, base)


def _resolve_reward(name: str, base: Path) -> str:
    """`my_rewards:fn` whose module lies beside the study file becomes `/that/folder/my_rewards:fn`.

    A reward module beside the study file wins over one of the same name in the current directory,
    wherever the user runs the command from (trainer/rewards.py imports the folder form).
    """
    module, sep, function = name.partition(":")
    top = module.split(".")[0]
    if not sep or "/" in module or not top.isidentifier():
        return name
    try:
        folder = base.resolve()
        beside = (folder / f"{top}.py").is_file() or (folder / top / "__init__.py").is_file()
    except OSError:
        return name
    return f"{folder}/{module}:{function}" if beside else name

