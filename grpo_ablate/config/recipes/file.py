"""A recipe file as read: its top-level keys with their lines, and the notes the merge writes about them.

Every note and every error names the recipe file and the line of the key (`Recipe.at`, `Recipe.problem`).
A key given twice (Open R1's config_codeforces repeats `do_eval: false`) is legal to PyYAML, which keeps the
last value, as TRL's parser does: `repeated` records it, and the merge notes it when the values agree (or
when no value of the key reaches a trial: one the study owns, or another tool reads) and refuses the recipe
when differing values would train differently (one of the two was not meant, and the study cannot tell which).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.core.errors import Problem, StudyError, echo

__all__ = ["RecipeNote", "RecipeDifference", "FieldList", "Recipe", "read_recipe"]


class RecipeNote(str):
    """What the study did with a recipe key, e.g. "recipe.yaml:12: max_prompt_length -> data.max_prompt_tokens".

    A str, so it travels in StudyConfig.warnings; `plan` and `validate` print it as a note.
    """


class RecipeDifference(RecipeNote):
    """A value a trial uses that differs from what the recipe's own run used: plan lists these together."""


class FieldList(RecipeDifference):
    """A difference that lists dozens of TRL fields (every field one release has and the other lacks, ~2,000
    characters): `plan` and `validate` print `brief()`, one line, and `plan --verbose` the whole list."""

    head: str = ""
    fields: tuple[str, ...] = ()

    @classmethod
    def listing(cls, head: str, fields: list[str]) -> "FieldList":
        note = cls(f"{head}: {', '.join(fields)}")
        note.head, note.fields = head, tuple(fields)
        return note

    def brief(self) -> str:
        return f"{self.head}: {len(self.fields)} field{'' if len(self.fields) == 1 else 's'} (`grpo-ablate plan --verbose` lists them)"


@dataclass
class Recipe:
    path: Path
    values: dict[str, Any]
    lines: dict[str, int]
    # top-level keys given more than once: key -> (every line it is on, whether every value is the same)
    repeated: dict[str, tuple[list[int], bool]] = field(default_factory=dict)

    def at(self, key: str) -> str:
        line = self.lines.get(key)
        return f"{self.path.name}:{line}" if line else self.path.name

    def problem(self, key: str, message: str) -> Problem:
        return Problem(path=f"trainer_from {self.path}:{self.lines.get(key, '?')}", message=f"{key}: {message}")


def read_recipe(path: Path) -> Recipe:
    """The recipe's top-level keys with their line numbers (from PyYAML's nodes). Raises StudyError."""
    values = read_yaml_file(path, what="trainer_from recipe")
    if not isinstance(values, dict):
        raise StudyError([Problem(path="trainer_from", message=(
            f"{echo(str(path))} must be a mapping of keys, got {type(values).__name__}"))])
    lines: dict[str, int] = {}
    node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)  # size-checked above
    given: dict[str, list[tuple[int, Any]]] = {}
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode):
                lines.setdefault(str(k.value), k.start_mark.line + 1)
                given.setdefault(str(k.value), []).append((k.start_mark.line + 1, v))
    repeated = {key: ([line for line, _ in seen], len({yaml.serialize(v) for _, v in seen}) == 1)
                for key, seen in given.items() if len(seen) > 1}
    return Recipe(path=path, values={str(k): v for k, v in values.items()}, lines=lines, repeated=repeated)
