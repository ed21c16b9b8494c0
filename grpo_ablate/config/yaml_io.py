"""Reading YAML from users safely: bounded size, bounded alias expansion, one-line errors.

Anchors and aliases are fine (`<<: *defaults` is common); a document whose aliases expand to
more values than any study holds (the "billion laughs" bomb) is refused before anything walks
it. Sizes are counted on the composed node graph, where an alias is a shared node, so the
check costs time in the document's written size, not its expansion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from grpo_ablate.core.errors import MAX_ECHO, Problem, StudyError
from grpo_ablate.core.safe_read import read_bytes

__all__ = ["MAX_FILE_BYTES", "MAX_VALUES", "read_yaml_file", "parse_yaml", "YamlLimitError"]

MAX_FILE_BYTES = 1_000_000  # a study, recipe or accelerate file; real ones are a few kB
MAX_VALUES = 10_000  # values after expanding aliases; real studies hold a few hundred


class YamlLimitError(ValueError):
    """A document over the size or expansion limit, or malformed: the message is one line."""


def _expanded_size(root: Node) -> int:
    """Values in the document once every alias is expanded; stops counting past the limit."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise YamlLimitError("an alias refers to its own anchor (a recursive structure); write the values out")
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            for child in node.value:
                total += size(child)
                if total > MAX_VALUES:
                    break
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
                if total > MAX_VALUES:
                    break
        active.discard(key)
        sizes[key] = total
        return total

    return size(root)


def parse_yaml(text: str) -> Any:
    """One YAML document, with the limits above. Raises YamlLimitError (one line)."""
    if len(text) > MAX_FILE_BYTES:
        raise YamlLimitError(f"more than {MAX_FILE_BYTES} characters of YAML; a study is a few kB")
    try:
        loader = yaml.SafeLoader(text)  # checks the characters: a control character raises here
    except yaml.YAMLError as e:
        raise YamlLimitError(f"malformed YAML: {(str(e).splitlines() or ['?'])[0][:MAX_ECHO]}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_VALUES:
            raise YamlLimitError(f"its aliases expand to more than {MAX_VALUES} values (a YAML alias bomb?); "
                                 "write the values out")
        return loader.construct_document(node)
    except RecursionError:
        raise YamlLimitError("nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or (str(e).splitlines() or ["?"])[0]
        raise YamlLimitError(f"malformed YAML{where}: {problem[:MAX_ECHO]}") from None
    finally:
        loader.dispose()


def read_yaml_file(p: Path, what: str) -> Any:
    """A YAML file's content, or StudyError with one line saying what is wrong with the file."""

    def fail(message: str) -> StudyError:
        return StudyError([Problem(path="", message=message)], str(p))

    if not p.exists():
        raise fail(f"{what} not found: {p}")
    if p.is_dir():
        raise fail(f"{what} is a folder, expected a YAML file: {p}")
    try:
        data = read_bytes(p, what, MAX_FILE_BYTES)
    except StudyError as e:
        raise fail(e.problems[0].message) from None
    except OSError as e:
        raise fail(f"cannot read {what}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")  # YAML allows a byte-order mark
    except UnicodeDecodeError:
        raise fail(f"{what} is not UTF-8 text") from None
    if not text.strip():
        raise fail(f"{what} is empty")
    try:
        content = parse_yaml(text)
    except YamlLimitError as e:
        raise fail(str(e)) from None
    if content is None:
        raise fail(f"{what} holds no settings")
    return content
