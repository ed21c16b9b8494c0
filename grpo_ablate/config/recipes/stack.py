"""The software a recipe was written for (its TRL release), and what a key it leaves out meant there.

A recipe's missing keys mean what its own TRL said, not what the installed TRL says; the defaults of
both come from trl_facts/trl_defaults.json (trl_facts/releases.py). Which TRL an Open R1 recipe ran on
depends on its date: Open R1 has pinned trl 0.18.0 since 2025-05-28 (OPEN_R1_PIN_DATE); before that it
ran on TRL's main of the day, whose defaults are those of the newest TRL release then (temperature 0.9
until 0.18; a per-sequence mean loss until 0.16). A recipe's date is, in this order: the study's
`recipe_date`, the date of the last commit that touched the recipe file when it lies in a git checkout
(a user's clone of open-r1), else unknown, when the pin (0.18.0) is assumed and `plan` says so.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablate.config.recipes.registry import OPEN_R1_ONLY_KEYS, OPEN_R1_REWARDS
from grpo_ablate.trl_facts.fields import trainer_field_names, trl_default
from grpo_ablate.trl_facts.releases import release_defaults, release_entries, release_of, release_on

__all__ = ["TargetStack", "OPEN_R1_STACK", "OPEN_R1_PIN_DATE", "OPEN_R1", "is_open_r1", "recipe_date", "recipe_stack",
           "stack_default", "installed_trl", "installed_fields"]

OPEN_R1 = "Open R1"
OPEN_R1_PIN_DATE = datetime.date(2025, 5, 28)  # Open R1's setup.py pins trl==0.18.0 from this commit (b806e10) on


@dataclass(frozen=True)
class TargetStack:
    """The software a recipe was written for, where it is known: what the keys it leaves out meant there.

    `trl` is a release of trl_facts/trl_defaults.json (read from that release's own source), so `defaults`
    holds every GRPOConfig field's default there; a recipe that leaves one out ran with that value.
    """

    name: str
    trl: str
    source: str
    family: str | None = None  # OPEN_R1 for Open R1's recipes, whatever their date
    date: datetime.date | None = None  # the recipe's date, where it decided the release

    @property
    def defaults(self) -> dict[str, Any]:
        return release_defaults(self.trl)


# Open R1 pins trl[vllm]==0.18.0 and transformers==4.52.3 (its setup.py).
OPEN_R1_STACK = TargetStack(name=OPEN_R1, trl="0.18.0", source="Open R1 pins trl[vllm]==0.18.0", family=OPEN_R1)


def is_open_r1(stack: TargetStack | None) -> bool:
    """An Open R1 recipe's stack, of any date."""
    return stack is not None and stack.family == OPEN_R1


def _parse_date(value: Any) -> datetime.date | None:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def recipe_date(path: str | Path | None, given: Any = None) -> tuple[datetime.date | None, str]:
    """(the recipe's date, where it came from): the study's recipe_date, else the last commit that touched the
    recipe file in its git checkout, else (None, why not)."""
    if given is not None:
        found = _parse_date(given)
        return (found, f"recipe_date {found}") if found else (None, f"recipe_date {given!r} is not a YYYY-MM-DD date")
    if path is None:
        return None, "no recipe file"
    file = Path(path)
    try:
        done = subprocess.run(["git", "-C", str(file.parent), "log", "-1", "--format=%cs", "--", file.name],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None, "no recipe_date, and git could not be asked"
    found = _parse_date(done.stdout.strip()) if done.returncode == 0 else None
    if found is None:
        return None, "no recipe_date, and the recipe file is not in a git checkout"
    return found, f"the last commit of {file.name} in its git checkout, {found}"


def recipe_stack(values: dict[str, Any], recipe_trl: Any = None, date: datetime.date | None = None,
                 date_source: str = "") -> TargetStack | None:
    """The stack a recipe was written for, when known: the study's `recipe_trl` (a TRL release of the
    defaults table), else Open R1's when the recipe's keys say so (its reward names or its own keys): by
    `date`, the TRL release of that day before Open R1's pin (OPEN_R1_PIN_DATE), else the pin."""
    if isinstance(recipe_trl, str) and release_of(recipe_trl):
        version = release_of(recipe_trl) or recipe_trl
        return TargetStack(name=f"TRL {version}", trl=version, source=f"recipe_trl: {recipe_trl}")
    rewards = values.get("reward_funcs")
    names = [rewards] if isinstance(rewards, str) else rewards if isinstance(rewards, list) else []
    if not (any(isinstance(n, str) and n in OPEN_R1_REWARDS for n in names) or any(k in values for k in OPEN_R1_ONLY_KEYS)):
        return None
    if date is None:
        return OPEN_R1_STACK
    if date >= OPEN_R1_PIN_DATE:
        return TargetStack(name=OPEN_R1, trl=OPEN_R1_STACK.trl, family=OPEN_R1, date=date,
                           source=f"{date_source}: on or after {OPEN_R1_PIN_DATE}, when Open R1 pinned trl 0.18.0")
    release, since = release_on(date)
    return TargetStack(name=f"{OPEN_R1} ({date})", trl=release, family=OPEN_R1, date=date,
                       source=(f"{date_source}: before {OPEN_R1_PIN_DATE} Open R1 pinned no TRL release and ran TRL's "
                               f"main, whose defaults were those of TRL {release} (the newest release then, since {since})"))


def stack_default(values: dict[str, Any], key: str, recipe_trl: Any = None, date: datetime.date | None = None) -> Any:
    """What a key the recipe leaves out meant on its own stack: that TRL's default, else the installed TRL's."""
    stack = recipe_stack(values, recipe_trl, date)
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
    else read from the installed GRPOConfig (declared defaults; run tools/trl_defaults.py to add it)."""
    version = release_of(installed_trl())
    if version:
        return release_entries(version)
    return {k: {"default": trl_default(k)} for k in trainer_field_names()}
