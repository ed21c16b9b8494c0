"""From a study file to a validated StudyConfig: read, merge the trainer_from recipe, apply `--set`.

    grpo-ablate validate studies/tiny-cpu.yaml --set num_generations=[2,4] --set study.n_trials=4

A recipe (an Open R1 / `trl grpo` script config, as published) fills the trainer section;
config/recipes/ translates its keys and notes what it did; the study's own keys win. A relative
path in the study file means from the study file's folder; one given with `--set` or `--storage`,
from the current directory (load_study says why).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from grpo_ablate.core.errors import Problem, StudyError, echo
from grpo_ablate.config.places import is_local_dataset
from grpo_ablate.config.recipes import RecipeNote, merge_recipe
from grpo_ablate.config.schema import SearchSection, StudyFile, StudySection
from grpo_ablate.config.study import StudyConfig
from grpo_ablate.config.validate import validate_dict
from grpo_ablate.config.yaml_io import YamlLimitError, parse_yaml, read_yaml_file
from grpo_ablate.storage.url import JOURNAL_PREFIX, canonical_url, is_rdb_url, url_problem
from grpo_ablate.core.vocab import SEARCHED_KEYS

__all__ = ["load_study", "apply_overrides", "parse_override", "resolve_paths"]

def load_study(path: str | os.PathLike[str], overrides: list[str] | None = None, *, reads_only: bool = False) -> StudyConfig:
    """Read, apply `--set` overrides, merge the recipe, validate. Raises StudyError.

    One path rule: a relative path written in the study file (storage, output_dir, dataset,
    trainer_from, accelerate config, reward modules) means from the study file's folder, so every
    command finds the same files from wherever it is run; a relative path given on the command
    line (`--set`, `--storage`) means from the current directory, as a shell path does. The
    overrides apply before the recipe merges, so `--set trainer_from=RECIPE` merges that recipe,
    and the study's own keys (overrides included) win over the recipe's. `reads_only`: the command only reads
    the study's folder and storage, which may then be on a read-only mount (`report --out` elsewhere).
    """
    p = Path(path)
    raw = read_yaml_file(p, what="study file")
    if not isinstance(raw, dict):
        raise StudyError([Problem(path="", message=(
            f"expected a mapping of sections at the top level, got {type(raw).__name__}"))], str(p))
    problems: list[Problem] = []
    notes: list[RecipeNote] = []
    raw = copy.deepcopy(raw)
    base = _folder(p)
    resolve_paths(raw, base)
    if overrides:  # before the recipe: the study's keys win over it, and its notes see the final hardware
        try:
            raw = apply_overrides(raw, overrides)
        except ValueError as e:
            problems.append(Problem(path="--set", message=str(e)))
        resolve_paths(raw, Path.cwd(), rewards=False)  # only what --set gave is still relative
    script = raw.get("script")
    if isinstance(script, dict) and script.get("cwd") is None:
        script["cwd"] = os.fspath(base)  # a command runs where its study file is, unless script.cwd says
    # what the study file itself sets (overrides included): a command trial passes these, never the recipe's
    own_keys = sorted(raw["trainer"]) if isinstance(raw.get("trainer"), dict) else []
    if raw.get("trainer_from"):
        raw, notes, recipe_problems = merge_recipe(raw, base)
        problems += recipe_problems
        resolve_paths(raw, base)  # what the recipe added (a dataset file, a reward module), beside the study
    study = validate_dict(raw, source=str(p), problems=problems, reads_only=reads_only)
    study.path = p
    study.own_trainer_keys = tuple(own_keys) if raw.get("trainer_from") else None
    study.warnings[:0] = notes
    return study


def _folder(study_file: Path) -> Path:
    try:
        return study_file.parent.resolve()
    except (OSError, RuntimeError):  # a symlink loop: validation says what is wrong
        return study_file.parent.absolute()


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


def _resolve_path(value: Any, base: Path) -> Any:
    """`value` joined to `base` when it is a relative path; anything else as it is."""
    if not isinstance(value, str) or not value or "\0" in value or os.path.isabs(value) or value.startswith("~"):
        return value
    return os.path.normpath(base / value)


def _resolve_storage(url: Any, base: Path) -> Any:
    """A journal path or an SQLite file joined to `base`; a server URL, or one that does not parse, as it is."""
    if not isinstance(url, str) or not url or url_problem(url) is not None:
        return url
    if not is_rdb_url(url):
        prefix = JOURNAL_PREFIX if url.startswith(JOURNAL_PREFIX) else ""
        return prefix + _resolve_path(url[len(prefix):], base)
    canonical = canonical_url(url)
    scheme, sep, rest = canonical.partition(":///")
    if not sep or scheme.partition("+")[0] != "sqlite" or not rest or rest.startswith((":memory:", "?", "file:")):
        return url
    file, q, query = rest.partition("?")
    return f"{scheme}:///{_resolve_path(file, base)}{q}{query}"


def resolve_paths(raw: dict[str, Any], base: Path, *, rewards: bool = True) -> None:
    """Every relative path of a raw study mapping, from `base` (in place)."""
    study = raw.get("study")
    if isinstance(study, dict):
        if "output_dir" in study:
            study["output_dir"] = _resolve_path(study["output_dir"], base)
        if "storage" in study:
            study["storage"] = _resolve_storage(study["storage"], base)
    if isinstance(raw.get("trainer_from"), str):
        raw["trainer_from"] = _resolve_path(raw["trainer_from"], base)
    hw = raw.get("hardware")
    if isinstance(hw, dict) and hw.get("accelerate_config"):
        hw["accelerate_config"] = _resolve_path(hw["accelerate_config"], base)
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("dataset"), str):
        name = data["dataset"]
        try:  # a hub name (org/name) stays one unless a file or folder of that name is there
            beside = is_local_dataset(name) or (base / name).exists()
        except (OSError, ValueError):
            beside = False
        if beside:
            data["dataset"] = _resolve_path(name, base)
    evaluation = raw.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("dataset"), str) and \
            (base / evaluation["dataset"]).exists():  # a file beside the study, as data.dataset; a hub id stays one
        evaluation["dataset"] = _resolve_path(evaluation["dataset"], base)
    script = raw.get("script")
    if isinstance(script, dict):  # the script's folder and interpreter; a bare `python` is looked up on PATH
        if isinstance(script.get("cwd"), str):
            script["cwd"] = _resolve_path(script["cwd"], base)
        if isinstance(script.get("python"), str) and os.sep in script["python"]:
            script["python"] = _resolve_path(script["python"], base)
    entries = raw.get("rewards")
    if rewards and isinstance(entries, list):
        for i, r in enumerate(entries):
            if isinstance(r, dict) and isinstance(r.get("name"), str):
                r["name"] = _resolve_reward(r["name"], base)
            elif isinstance(r, str):
                entries[i] = _resolve_reward(r, base)


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
        beside = os.path.lexists(folder / f"{top}.py") or (folder / top / "__init__.py").is_file()  # a FIFO too:
        # config/names.py then says what it is
    except OSError:
        return name
    return f"{folder}/{module}:{function}" if beside else name

