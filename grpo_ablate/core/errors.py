"""What a study error says: each problem's key path and message, every echoed value cut short; which faults are the machine's.

The bottom layer: stdlib and pydantic only, so config, storage and every reader of the tool's
own files can raise the same error without importing one another (tests/test_layering.py).
A study file is user input, and a value echoed into an error can be anything (a 2 GB alias
expansion once was): `echo` shows a bounded repr, and a Problem caps its own text.

A fault of the machine (a full disk, a broken or read-only one, an unreachable study storage) is
not the cell's fault: the trial is queued again rather than failed. `machine_fault` judges an
exception by its type and errno, through its whole chain (`raise ... from`, the exception being
handled, an ExceptionGroup's members), never by its message: a message that merely says "No space
left" is not evidence. A writer that drops the errno (safetensors' Rust error carries only text) is
judged by `write_probe`: a real write and fsync in the folder it was writing to, and that write's
own errno.
"""

from __future__ import annotations

import difflib
import errno
import os
import reprlib
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, field_validator

__all__ = ["Problem", "StudyError", "echo", "did_you_mean", "MAX_ECHO", "STORAGE_ERRNOS", "exception_chain",
           "machine_fault", "database_fault", "write_probe"]

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


# errnos that say the machine's storage, not the cell, is at fault
STORAGE_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EIO: "I/O error",
    errno.EROFS: "read-only file system",
    errno.ESTALE: "stale network file handle",
}
# study-storage (database) errors, by the qualified name of a class in the exception's MRO: the
# database went away, is locked, or timed out (this floor imports neither optuna nor SQLAlchemy)
_STORAGE_TYPES = {
    "sqlite3.OperationalError": "the SQLite database is unavailable (locked, or its file cannot be written)",
    "sqlalchemy.exc.OperationalError": "the study's database is unavailable",
    "sqlalchemy.exc.InterfaceError": "the study's database connection failed",
    "sqlalchemy.exc.DisconnectionError": "the study's database connection was lost",
    "sqlalchemy.exc.TimeoutError": "the study's database did not answer in time",
    "optuna.exceptions.StorageInternalError": "the study storage failed",
    "psycopg2.OperationalError": "the study's PostgreSQL server is unavailable",
    "psycopg.OperationalError": "the study's PostgreSQL server is unavailable",
}
_PROBE_BYTES = 1 << 16


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception behind it: its cause, its context, an ExceptionGroup's members (each once)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo.extend(e for e in (item.__cause__, item.__context__) if e is not None)
        members = getattr(item, "exceptions", None)  # an ExceptionGroup's (Python >= 3.11)
        if isinstance(members, (list, tuple)):
            todo.extend(e for e in members if isinstance(e, BaseException))


def _qualified_names(kind: type) -> Iterator[str]:
    for klass in kind.__mro__:
        yield f"{klass.__module__}.{klass.__qualname__}"


def database_fault(exc: BaseException) -> str | None:
    """What failed when `exc` (or anything in its chain) is the study database's error (unreachable, locked, timed
    out: a class of _STORAGE_TYPES), the kind of fault that passes when the server is back; None otherwise."""
    for item in exception_chain(exc):
        for name in _qualified_names(type(item)):
            if name in _STORAGE_TYPES:
                return f"{_STORAGE_TYPES[name]}: {type(item).__name__}: {str(item)[:300]}"
    return None


def machine_fault(exc: BaseException) -> str | None:
    """What of the machine failed, when `exc` (or anything in its chain) is a storage fault; None otherwise.

    By type and errno only: an OSError whose errno is one of STORAGE_ERRNOS ("ENOSPC (disk full):
    <the error>"), or a study-storage error by its class (a locked SQLite file, a PostgreSQL server
    that went away).
    """
    for item in exception_chain(exc):
        code = getattr(item, "errno", None) if isinstance(item, OSError) else None
        if isinstance(code, int) and code in STORAGE_ERRNOS:
            return f"{errno.errorcode.get(code, code)} ({STORAGE_ERRNOS[code]}): {type(item).__name__}: {item}"
        for name in _qualified_names(type(item)):
            if name in _STORAGE_TYPES:
                return f"{_STORAGE_TYPES[name]}: {type(item).__name__}: {str(item)[:300]}"
    return None


def write_probe(folder: str | os.PathLike[str], size: int = _PROBE_BYTES) -> OSError | None:
    """The OSError of a real write and fsync of a file in `folder`, when its errno is a storage fault; else None.

    For a failed write whose exception lost its errno: the disk is asked again, and its own answer
    is the evidence. `size`: as many bytes as the failed write needed, when known (a checkpoint's
    weights): the disk is asked to reserve them (posix_fallocate, no data written); a disk with room
    for a small probe but not for that write is full for the writer. The probe file is removed; a
    folder that does not exist is not a storage fault.
    """
    path = Path(folder) / f".grpo-ablate-write-probe-{os.getpid()}"
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * _PROBE_BYTES)
            f.flush()
            if size > _PROBE_BYTES and hasattr(os, "posix_fallocate"):
                try:
                    os.posix_fallocate(f.fileno(), 0, size)
                except OSError as e:
                    if e.errno in STORAGE_ERRNOS:
                        raise
                    # EOPNOTSUPP and the like (some network file systems): the small write above is the answer
            os.fsync(f.fileno())
    except OSError as e:
        return e if e.errno in STORAGE_ERRNOS else None
    finally:
        try:
            path.unlink()
        except OSError:
            pass
    return None
