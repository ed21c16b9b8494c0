"""Where a study reads and writes: its run folder, its storage, and the local files it names.

Checked before anything runs, so that `run` never fails half-way on a path: a run folder that
is a file or read-only, a storage URL with a bad port, a database driver that is not installed,
or a typo of a database scheme (which would otherwise become a journal file of that name).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from grpo_ablate.errors import Problem, StudyError, echo
from grpo_ablate.config.hardware import accelerate_processes
from grpo_ablate.config.schema import StudyFile
from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.safe_read import kind_problem
from grpo_ablate.storage_url import DATABASE_SCHEMES, JOURNAL_PREFIX, is_rdb_url, url_problem

__all__ = ["check_places", "check_storage", "writable_dir_problem", "DATABASE_SCHEMES", "is_local_dataset"]

# the `+driver` of a URL (postgresql+psycopg://) -> its module, where the names differ
_DRIVER_MODULES = {"mysqldb": "MySQLdb", "mysqlconnector": "mysql.connector", "mariadbconnector": "mariadb",
                   "pysqlite": "sqlite3", "cx_oracle": "cx_Oracle"}
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
        if (kind := kind_problem(path)) is not None:
            return f"the journal file {echo(str(path))} {kind}"
        if path.exists() and not os.access(path, os.W_OK):
            return f"cannot write the journal file {echo(str(path))} (read-only or no permission)"
    except (OSError, ValueError) as e:
        return f"cannot use the journal file {echo(str(path))}: {getattr(e, 'strerror', None) or e}"
    return writable_dir_problem(path.parent)


def check_storage(url: str, key: str = "study.storage") -> list[Problem]:
    """A database URL that can be opened (parses, scheme, driver), or a writable journal file path.

    The syntax is storage.url_problem's (the same check `open_storage` makes), so what passes
    here is what opens there; every message shows the URL masked.
    """
    problem = url_problem(url)
    if problem:
        return [Problem(path=key, message=problem)]
    if not is_rdb_url(url):
        problem = _journal_problem(Path(url.removeprefix(JOURNAL_PREFIX)))
        return [Problem(path=key, message=problem)] if problem else []
    dialect, _, driver = url.partition(":")[0].lower().partition("+")
    problems: list[Problem] = []
    if not _installed("sqlalchemy"):
        problems.append(Problem(path=key, message="database storage needs SQLAlchemy: pip install sqlalchemy"))
    modules = (_DRIVER_MODULES.get(driver, driver),) if driver else DATABASE_SCHEMES[dialect]
    if not any(_installed(mod) for mod in modules):
        extra = " (pip install 'grpo-ablate[postgres]')" if dialect in ("postgresql", "postgres") else ""
        problems.append(Problem(path=key, message=(
            f"the {dialect} storage needs the database driver {' or '.join(modules)}, which is not installed{extra}")))
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
    elif ds and Path(ds).exists() and not Path(ds).is_dir() and (kind := kind_problem(ds)) is not None:
        problems.append(Problem(path="data.dataset", message=f"{echo(ds)} {kind}; give a data file or folder"))
    return problems
