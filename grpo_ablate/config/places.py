"""Where a study reads and writes: its run folder, its storage, and the local files it names.

Checked before anything runs, so that `run` never fails half-way on a path: a run folder that
is a file or read-only, a storage URL with a bad port, a database driver that is not installed,
or a typo of a database scheme (which would otherwise become a journal file of that name).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from grpo_ablate.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.config.hardware import accelerate_processes
from grpo_ablate.config.schema import StudyFile
from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.storage import mask_url

__all__ = ["check_places", "check_storage", "writable_dir_problem", "DATABASE_SCHEMES", "is_local_dataset"]

JOURNAL_PREFIX = "journal:"  # forces a journal file, e.g. for a file name with a colon

# database scheme -> the driver modules SQLAlchemy may use by default (any one will do).
# The schemes are those storage.is_rdb_url opens as a database; anything else would be a journal file.
DATABASE_SCHEMES: dict[str, tuple[str, ...]] = {
    "postgresql": ("psycopg", "psycopg2"),
    "postgres": ("psycopg", "psycopg2"),
    "sqlite": ("sqlite3",),
    "mysql": ("MySQLdb",),
    "oracle": ("oracledb", "cx_Oracle"),
    "mssql": ("pyodbc",),
}
_SUGGESTED_SCHEMES = [s for s in DATABASE_SCHEMES if s != "postgres"]  # one spelling in hints
# the `+driver` of a URL (postgresql+psycopg://) -> its module, where the names differ
_DRIVER_MODULES = {"mysqldb": "MySQLdb", "mysqlconnector": "mysql.connector", "mariadbconnector": "mariadb",
                   "pysqlite": "sqlite3", "cx_oracle": "cx_Oracle"}
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?P<rest>.*)$", re.DOTALL)
_LOCAL_DATASET_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def is_local_dataset(name: str) -> bool:
    return name.startswith((".", "/")) or name.endswith(_LOCAL_DATASET_SUFFIXES)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing
        return False


def writable_dir_problem(path: Path) -> str | None:
    """Why a folder could not be created or written here, or None."""
    try:
        if path.exists() and not path.is_dir():
            return f"{echo(str(path))} is a file, not a folder"
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"{echo(str(existing))} is a file, so {echo(str(path))} cannot be created"
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"cannot write in {echo(str(existing))} (read-only or no permission)"
    except (OSError, ValueError) as e:
        return f"cannot use {echo(str(path))}: {getattr(e, 'strerror', None) or e}"
    return None


def _journal_problem(path: Path) -> str | None:
    try:
        if path.is_dir():
            return f"the journal file {echo(str(path))} is a folder"
        if path.exists() and not os.access(path, os.W_OK):
            return f"cannot write the journal file {echo(str(path))} (read-only or no permission)"
    except (OSError, ValueError) as e:
        return f"cannot use the journal file {echo(str(path))}: {getattr(e, 'strerror', None) or e}"
    return writable_dir_problem(path.parent)


def check_storage(url: str, key: str = "study.storage") -> list[Problem]:
    """A database URL that can be opened (scheme, port, driver), or a writable journal file path."""
    shown = echo(mask_url(url))
    if url.startswith(JOURNAL_PREFIX):
        problem = _journal_problem(Path(url[len(JOURNAL_PREFIX):]))
        return [Problem(path=key, message=problem)] if problem else []
    m = _SCHEME.match(url)
    if m is None or len(m["scheme"]) == 1:  # a plain path (or a Windows drive letter)
        problem = _journal_problem(Path(url))
        return [Problem(path=key, message=problem)] if problem else []
    scheme, rest = m["scheme"].lower(), m["rest"]
    dialect, _, driver = scheme.partition("+")
    if dialect not in DATABASE_SCHEMES:
        return [Problem(path=key, message=(
            f"unknown storage scheme {dialect!r} in {shown}{did_you_mean(dialect, _SUGGESTED_SCHEMES)}; "
            f"use postgresql://user@host/db, sqlite:///FILE, or a journal file path "
            f"({JOURNAL_PREFIX}NAME for a file name with a colon)"))]
    if not rest.startswith("//"):
        return [Problem(path=key, message=f"{shown} is not a database URL: write {dialect}://...")]
    try:
        urlsplit(url).port
    except ValueError as e:
        return [Problem(path=key, message=f"bad port in {shown}: {e}")]
    problems: list[Problem] = []
    if not _installed("sqlalchemy"):
        problems.append(Problem(path=key, message="database storage needs SQLAlchemy: pip install sqlalchemy"))
    modules = (_DRIVER_MODULES.get(driver, driver),) if driver else DATABASE_SCHEMES[dialect]
    if not any(_installed(mod) for mod in modules):
        extra = " (pip install 'grpo-ablate[postgres]')" if dialect in ("postgresql", "postgres") else ""
        problems.append(Problem(path=key, message=(
            f"{shown} needs the database driver {' or '.join(modules)}, which is not installed{extra}")))
    return problems


def _check_name(name: str) -> list[Problem]:
    bad = (name in ("", ".", "..") or os.path.isabs(name) or any(c in name for c in ("/", "\\", "\0"))
           or name != name.strip())
    if not bad:
        return []
    return [Problem(path="study.name", message=(
        f"must be a plain name (no path separators, '.', '..' or surrounding spaces): it names the run "
        f"folder runs/<name>; got {echo(name)}. Set study.output_dir to write elsewhere"))]


def check_places(sf: StudyFile) -> list[Problem]:
    problems = _check_name(sf.study.name)
    name_ok = not problems
    out = sf.study.output_dir
    if out is not None or name_ok:
        folder = Path(out) if out is not None else Path("runs") / sf.study.name
        problem = writable_dir_problem(folder)
        if problem:
            problems.append(Problem(path="study.output_dir", message=f"{problem}; choose another study.output_dir"))
    if sf.study.storage is not None:
        problems += check_storage(sf.study.storage)
    acc = sf.hardware.accelerate_config
    if acc:
        try:
            read_yaml_file(Path(acc), what="accelerate config")
        except StudyError as e:
            problems.append(Problem(path="hardware.accelerate_config", message=e.problems[0].message))
        else:
            if accelerate_processes(acc) is None and not sf.hardware.num_processes:
                problems.append(Problem(path="hardware.accelerate_config",
                                        message="has no num_processes; set it there or in hardware.num_processes"))
    ds = sf.data.dataset
    if ds and is_local_dataset(ds) and not Path(ds).exists():
        problems.append(Problem(path="data.dataset", message=f"local dataset file not found: {echo(ds)}"))
    return problems
