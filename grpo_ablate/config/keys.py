"""The study file's keys, documented from the schema's own field descriptions.

    grpo-ablate explain budget.max_steps     # one key: type, default, allowed values, description
    grpo-ablate explain                      # every key
    grpo-ablate schema --out study.schema.json

The schema (config/schema.py) is the one place a key is documented; `explain`, the JSON Schema
for editors and the key table of docs/study-file.md ("Every key") are all read from it here, so they
cannot drift apart. Allowed values the schema cannot hold come in from the caller as `choices`
(dotted key to names): `hardware.launcher`'s are the launcher registry's (launch/registry.py), a
floor above config, so the commands pass them in (commands/common.py's key_choices). A section (a nested model) is a key of its own and its fields are keys below
it; a list of sections (`study.objectives`, `rewards`) names its items' keys with `[]`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from typing import Any, Literal, Mapping, Sequence

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from grpo_ablate.config.schema import StudyFile

__all__ = ["Choices", "KeyDoc", "key_docs", "find_key", "json_schema", "key_table", "explain_text"]

Choices = Mapping[str, Sequence[str]]  # a dotted key's allowed values, given by the caller (e.g. the launcher registry's names)

_BOUNDS = ((annotated_types.Gt, "gt", ">"), (annotated_types.Ge, "ge", ">="),
           (annotated_types.Lt, "lt", "<"), (annotated_types.Le, "le", "<="))


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    """One key of the study file as its schema defines it."""

    key: str  # dotted, e.g. budget.max_steps; items of a list of sections as study.objectives[].metric
    type: str  # the annotation in words, e.g. "int | null"
    default: str  # "required", or the default as YAML would write it
    allowed: str  # the allowed values or bounds ("" when any value of the type is allowed)
    description: str
    notes: tuple[str, ...] = ()  # what else holds for the key (a trainer field: other TRL releases' defaults)


def key_docs(choices: Choices | None = None) -> list[KeyDoc]:
    """Every key of the study file, sections before their fields, in the schema's order.

    `choices` gives keys their allowed values where the schema takes any string; a key it names that the
    schema lacks is a ValueError (a renamed key must not silently lose its choices)."""
    docs = list(_walk(StudyFile, ""))
    given = dict(choices or {})
    unknown = sorted(set(given) - {d.key for d in docs})
    if unknown:
        raise ValueError(f"choices given for keys the study file does not have: {unknown}")
    return [dataclasses.replace(d, allowed=_choices_text(given[d.key])) if d.key in given else d for d in docs]


def find_key(key: str, choices: Choices | None = None) -> KeyDoc:
    """The documentation of one dotted key (`[]` optional); KeyError naming the closest keys when unknown."""
    docs = {d.key: d for d in key_docs(choices)}
    plain = {k.replace("[]", ""): k for k in docs}
    wanted = key.strip().replace("[]", "")
    if wanted in plain:
        return docs[plain[wanted]]
    close = difflib.get_close_matches(wanted, list(plain), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(plain[c] for c in close)}?" if close else "; `grpo-ablate explain` lists every key"
    raise KeyError(f"{key!r} is no key of the study file{hint}")


def explain_text(doc: KeyDoc) -> str:
    """One key for a terminal: its name, type, default, allowed values, then the description."""
    lines = [doc.key, f"  type:    {doc.type}", f"  default: {doc.default}"]
    if doc.allowed:
        lines.append(f"  allowed: {doc.allowed}")
    lines += [f"  {note}" for note in doc.notes]
    lines.append(f"  {doc.description}")
    return "\n".join(lines)


def json_schema(choices: Choices | None = None) -> dict[str, Any]:
    """The study file's JSON Schema (draft 2020-12, pydantic's), descriptions included, for editors.

    It describes the file as written, before a `trainer_from` recipe is merged in: a recipe may give the
    data section (its dataset_name), so only `study` is required here; `validate` checks the merged file.
    Each key of `choices` gets its names as an `enum`.
    """
    schema = StudyFile.model_json_schema(mode="validation")
    schema["required"] = [k for k in schema.get("required", []) if k != "data"]
    key_docs(choices)  # the same refusal of a key the schema lacks
    for key, names in (choices or {}).items():
        _property(schema, key)["enum"] = list(names)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "grpo-ablate study file", **schema}


def key_table(choices: Choices | None = None) -> str:
    """The key table of docs/study-file.md ("Every key"), one row per key, generated from the schema (and `choices`)."""
    rows = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    for d in key_docs(choices):
        cells = [f"`{d.key}`", _code(d.type), _code(d.default) if d.default != "required" else "required",
                 _code(d.allowed) if d.allowed else "", d.description]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def _code(text: str) -> str:
    return f"`{text}`"


def _choices_text(names: Sequence[str]) -> str:
    return ", ".join(json.dumps(n) for n in names)


def _property(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """The JSON Schema of one dotted key's value: the sections' models lead through `$defs` (pydantic names them so)."""
    *sections, name = key.replace("[]", "").split(".")
    model: type[BaseModel] = StudyFile
    node = schema
    for part in sections:
        sub, _ = _submodel(model.model_fields[part].annotation)
        if sub is None:
            raise ValueError(f"{key}: {part} is no section")
        model, node = sub, schema["$defs"][sub.__name__]
    prop: dict[str, Any] = node["properties"][name]
    return prop


def _walk(model: type[BaseModel], prefix: str) -> typing.Iterator[KeyDoc]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        yield _doc(key, field)
        sub, many = _submodel(field.annotation)
        if sub is not None:
            yield from _walk(sub, f"{key}[]." if many else f"{key}.")


def _doc(key: str, field: FieldInfo) -> KeyDoc:
    if not field.description:
        raise ValueError(f"{key} has no description in config/schema.py: give its Field a description=")
    return KeyDoc(key, _type_text(field.annotation), _default_text(field), _allowed_text(field),
                  " ".join(field.description.split()))


def _members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _submodel(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the section a field holds, whether a list of them) for `M`, `M | None`, `list[M]`, `list[M | str]`;
    (None, False) for a value, or for a union that mixes a section with other values (one key then)."""
    members = [m for m in _members(annotation) if m is not type(None)]
    if len(members) != 1:
        return None, False
    only = members[0]
    if _is_model(only):
        return only, False
    if typing.get_origin(only) is list:
        items = [m for m in _members(typing.get_args(only)[0]) if m is not str]
        if len(items) == 1 and _is_model(items[0]):
            return items[0], True
    return None, False


def _type_text(annotation: Any) -> str:
    parts: list[str] = []
    for m in _members(annotation):
        text = _one_type(m)
        if text not in parts:
            parts.append(text)
    return " | ".join(parts)


def _one_type(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) is typing.Annotated:
        return _one_type(typing.get_args(tp)[0])
    if typing.get_origin(tp) is Literal:  # the choices are listed as allowed values
        return " | ".join(dict.fromkeys(type(a).__name__ for a in typing.get_args(tp)))
    if _is_model(tp):
        return "section"
    origin = typing.get_origin(tp)
    if origin is list:
        return f"list[{_type_text(typing.get_args(tp)[0])}]"
    if origin is dict:
        k, v = typing.get_args(tp)
        return f"dict[{_type_text(k)}, {_type_text(v)}]"
    if tp is Any:
        return "any"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(tp, getattr(tp, "__name__", str(tp)))


def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    elif isinstance(value, list):
        value = [v.model_dump(mode="json", exclude_none=True) if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(value)


def _allowed_text(field: FieldInfo) -> str:
    """Literal choices and numeric bounds, from the field and its annotation (Annotated ranges included)."""
    choices: list[str] = []
    bounds: list[str] = []
    metadata = list(field.metadata)
    for m in _members(field.annotation):
        for inner in [m, *(typing.get_args(m) if typing.get_origin(m) is list else ())]:
            for part in _members(inner):
                if typing.get_origin(part) is Literal:
                    choices += [json.dumps(a) for a in typing.get_args(part)]
                elif typing.get_origin(part) is typing.Annotated:
                    metadata += list(typing.get_args(part)[1:])
    for meta in metadata:
        for cls, attr, sign in _BOUNDS:
            if isinstance(meta, cls):
                text = f"{sign} {getattr(meta, attr)}"
                if text not in bounds:
                    bounds.append(text)
        if isinstance(meta, FieldInfo):
            for sub in meta.metadata:
                for cls, attr, sign in _BOUNDS:
                    if isinstance(sub, cls) and f"{sign} {getattr(sub, attr)}" not in bounds:
                        bounds.append(f"{sign} {getattr(sub, attr)}")
    return ", ".join([*dict.fromkeys(choices), *bounds])
