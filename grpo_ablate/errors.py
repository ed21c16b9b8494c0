"""What a study error says: each problem's key path and message, every echoed value cut short.

The bottom layer: stdlib and pydantic only, so config, storage and every reader of the tool's
own files can raise the same error without importing one another (tests/test_layering.py).
A study file is user input, and a value echoed into an error can be anything (a 2 GB alias
expansion once was): `echo` shows a bounded repr, and a Problem caps its own text.
"""

from __future__ import annotations

import difflib
import reprlib
from typing import Any

from pydantic import BaseModel, field_validator

__all__ = ["Problem", "StudyError", "echo", "did_you_mean", "MAX_ECHO"]

MAX_ECHO = 200  # characters of a user's value shown in a message
_MAX_MESSAGE = 1000  # a whole problem's message, a last guard

_repr = reprlib.Repr()
_repr.maxlevel = 3
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 8
_repr.maxstring = _repr.maxother = MAX_ECHO


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + f"... ({len(text)} chars)"


def echo(value: Any) -> str:
    """A user's value as shown in a message: its repr, bounded in depth, items and length."""
    return _cut(_repr.repr(value), MAX_ECHO)


def did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word[:MAX_ECHO], options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Problem(BaseModel):
    """One thing wrong with a study: where (a dotted key path, or "" for the whole file) and why."""

    path: str
    message: str

    @field_validator("path")
    @classmethod
    def _short_path(cls, v: str) -> str:
        # a key is the user's text: a line break or control character in it is shown escaped, so a
        # problem stays one line (and a terminal shows what the key really holds)
        return _cut("".join(c if c.isprintable() else repr(c)[1:-1] for c in v), MAX_ECHO)

    @field_validator("message")
    @classmethod
    def _short_message(cls, v: str) -> str:
        return _cut(" ".join(v.splitlines()), _MAX_MESSAGE)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class StudyError(Exception):
    """An invalid study: every problem found. One problem is one line; several, one line each."""

    def __init__(self, problems: list[Problem], source: str = ""):
        self.problems = problems
        self.source = _cut(source, MAX_ECHO)
        head = f"{self.source}: " if self.source else ""
        if len(problems) == 1:
            super().__init__(f"{head}{problems[0]}")
        else:
            lines = "\n".join(f"  - {p}" for p in problems)
            super().__init__(f"{head}the study is not valid, {len(problems)} problems:\n{lines}")
