"""The trainer section's keys, documented from the installed TRL's own GRPOConfig: `explain trainer.<field>`.

    grpo-ablate explain trainer.beta           # type, default, help; other TRL releases' defaults where they differ
    grpo-ablate explain trainer.max_prompt_length   # a field an older TRL had: its default there, and what to do now

The study file's `trainer:` section is GRPOConfig's keyword arguments, verbatim, so its keys are documented where
TRL documents them: each dataclass field's annotation, default and `metadata["help"]` (the text `trl grpo --help`
prints), read from the installed TRL (trl_facts/fields.py, cached per TRL version). A recipe written for
another TRL leaves keys at *that* release's defaults (trl_facts/trl_defaults.json, read from each release's source),
so a field whose default differs there says so; fields only an older release has are explained from the table.
What the study itself does with a key (searched, overridden, removed) comes from the rules that enforce it.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from typing import Any

from grpo_ablate.config.keys import KeyDoc
from grpo_ablate.config.recipes.keys import REMOVED_KEYS, STUDY_OWNED_KEYS
from grpo_ablate.config.recipes.stack import OPEN_R1_STACK, installed_fields
from grpo_ablate.config.trainer_fields import OWNED_TRAINER_KEYS, REMOVED_TRAINER_KEYS
from grpo_ablate.trl_facts.releases import FieldDrift, drift_between, known_releases, release_entries, release_of, \
    release_types
from grpo_ablate.trl_facts.fields import installed_trl_version, trainer_field_docs
from grpo_ablate.core.vocab import SEARCHED_KEYS

__all__ = ["PREFIX", "trainer_key_docs", "find_trainer_key", "trainer_section_note"]

PREFIX = "trainer."

# Who runs a release's defaults, where a known stack pins it (config/recipes/stack.py).
_PINNED_BY = {OPEN_R1_STACK.trl: "Open R1's recipes run it"}


@functools.lru_cache(maxsize=1)
def trainer_key_docs() -> tuple[KeyDoc, ...]:
    """Every key the trainer section may hold: the installed GRPOConfig's fields in its order, then the fields
    only another release of trl_facts/trl_defaults.json has (a recipe written for it may carry them)."""
    docs = trainer_field_docs()
    now = installed_fields()
    drifts = {r: {d.name: d for d in drift_between(release_entries(r), now)} for r in _other_releases()}
    out = [_installed_doc(name, field, drifts) for name, field in docs.items()]
    gone = sorted({name for by in drifts.values() for name, d in by.items() if d.then_has and not d.now_has
                   and name not in docs} | ((set(REMOVED_TRAINER_KEYS) | set(REMOVED_KEYS)) - set(docs)))
    return (*out, *(_gone_doc(name, drifts) for name in gone))


def find_trainer_key(key: str) -> KeyDoc:
    """The documentation of `trainer.<field>`; KeyError naming the closest fields when TRL has no such field."""
    name = key.strip()[len(PREFIX):] if key.strip().startswith(PREFIX) else key.strip()
    docs = {d.key: d for d in trainer_key_docs()}
    if PREFIX + name in docs:
        return docs[PREFIX + name]
    close = difflib.get_close_matches(name, [k[len(PREFIX):] for k in docs], n=3, cutoff=0.6)
    hint = (f"; did you mean {', '.join(PREFIX + c for c in close)}?" if close else
            "; `grpo-ablate explain trainer` says where the fields come from")
    raise KeyError(f"{key!r} is no GRPOConfig field of the installed TRL {installed_trl_version()}{hint}")


def trainer_section_note() -> str:
    """One line under `explain trainer`: how many fields, from which TRL, and how to ask for one."""
    return (f"fields: the {len(trainer_field_docs())} GRPOConfig fields of the installed TRL {installed_trl_version()}, "
            f"each with TRL's own help: `grpo-ablate explain trainer.<field>`, e.g. trainer.learning_rate")


def _other_releases() -> list[str]:
    installed = release_of(installed_trl_version())
    return [r for r in known_releases() if r != installed]


def _release_name(release: str) -> str:
    pinned = _PINNED_BY.get(release)
    return f"TRL {release}" + (f" ({pinned})" if pinned else "")


def _value(v: Any) -> str:
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


def _elsewhere(name: str, drifts: dict[str, dict[str, FieldDrift]]) -> list[str]:
    """Where another release's default differs: "TRL 0.18.0 (Open R1's recipes run it): 0.04"."""
    out = []
    for release, by in drifts.items():
        d = by.get(name)
        if d is not None:
            out.append(f"{_release_name(release)}: {_value(d.then)}" if d.then_has else
                       f"{_release_name(release)}: no such field (added since)")
    if not out:
        return []
    return ["default elsewhere (a recipe written for that TRL runs with it): " + "; ".join(out)]


def _study_notes(name: str) -> list[str]:
    """What the study does with the key, from the rules that enforce it."""
    out = []
    if name in SEARCHED_KEYS:
        out.append(f"in the trainer section: searched by the study (search.{name}); a value here is refused while "
                   f"search.{name} is given")
    if name in OWNED_TRAINER_KEYS:
        out.append(f"in the trainer section: {OWNED_TRAINER_KEYS[name]}")
    if name in REMOVED_TRAINER_KEYS:
        out.append(f"in the trainer section: {name} {REMOVED_TRAINER_KEYS[name]}")
    if name in STUDY_OWNED_KEYS and name not in OWNED_TRAINER_KEYS:
        out.append(f"in a trainer_from recipe: overridden ({STUDY_OWNED_KEYS[name]})")
    if name in REMOVED_KEYS:
        out.append(f"in a trainer_from recipe: {REMOVED_KEYS[name]}")
    return out


def _installed_doc(name: str, field: dict[str, str], drifts: dict[str, dict[str, FieldDrift]]) -> KeyDoc:
    return KeyDoc(PREFIX + name, field["type"], field["default"], field["allowed"],
                  field["help"] or f"(TRL {installed_trl_version()} gives this field no help text)",
                  notes=(f"from: GRPOConfig of the installed TRL {installed_trl_version()}",
                         *_elsewhere(name, drifts), *_study_notes(name)))


def _gone_doc(name: str, drifts: dict[str, dict[str, FieldDrift]]) -> KeyDoc:
    """A field the installed TRL lacks: its type and default in the newest release of the table that has it."""
    had = [r for r in reversed(known_releases()) if name in release_entries(r)]
    if had:
        entry = release_entries(had[0])[name]
        type_text = re.sub(r"\b(?:None|NoneType)\b", "null", release_types(had[0])[name])
        default = _value(entry.get("resolved", entry.get("default")))
        where = f"a field of {', '.join('TRL ' + r for r in had)}"
    else:
        type_text, default, where = "-", "-", "a field of older TRL releases"
    return KeyDoc(PREFIX + name, type_text, default, "",
                  f"Not a GRPOConfig field of the installed TRL {installed_trl_version()}: {where}. The study's trainer "
                  f"section refuses it, and so does a trainer_from recipe unless a line above says what it becomes.",
                  notes=(f"from: trl_facts/trl_defaults.json ({', '.join('TRL ' + r for r in had) or 'no release'})",
                         *_study_notes(name)))
