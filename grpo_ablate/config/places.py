"""Where a study reads and writes: its run folder, its storage, and the local files it names.

Checked before anything runs, so that `run` never fails half-way on a path: a run folder that
is a file or read-only, a storage URL with a bad port, a database driver that is not installed,
or a typo of a database scheme (which would otherwise become a journal file of that name).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from grpo_ablate.core.errors import Problem, StudyError, echo
from grpo_ablate.config.hardware import accelerate_processes
from grpo_ablate.config.schema import StudyFile
from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.core.safe_read import kind_problem
from grpo_ablate.storage.url import DATABASE_SCHEMES, JOURNAL_PREFIX, is_rdb_url, url_problem

__all__ = ["check_places", "check_storage", "writable_dir_problem", "readable_dir_problem", "read_only_mount",
           "DATABASE_SCHEMES", "is_local_dataset"]

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


def read_only_mount(path: Path) -> bool:
    """Whether the file system holding `path` is mounted read-only (statvfs's ST_RDONLY: the kernel's own flag)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _write_refused(folder: Path) -> OSError | None:
    """The kernel's answer to creating a file in `folder` (created and removed at once), None when it may.

    Permission bits say nothing for root (chmod 0555 does not stop root; a read-only mount does), and
    access(2) judges by the real, not the effective, ids: trying is the one answer that holds for
    every user on every mount."""
    try:
        fd, name = tempfile.mkstemp(prefix=".grpo-ablate-write-check-", dir=folder)
    except OSError as e:
        return e
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:
        pass
    return None


def writable_dir_problem(path: Path) -> str | None:
    """Why a folder could not be created or written here, or None: the nearest existing folder on the way is
    asked as the kernel would be (a read-only mount by statvfs, then a real file created and removed)."""
    try:
        if path.exists() and not path.is_dir():
            return f"{echo(str(path))} is a file, not a folder"
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"{echo(str(existing))} is a file, so {echo(str(path))} cannot be created"
        if read_only_mount(existing):
            return f"cannot write in {echo(str(existing))} (a read-only file system)"
        refused = _write_refused(existing)
        if refused is not None:
            return f"cannot write in {echo(str(existing))} ({refused.strerror or refused})"
    except (OSError, ValueError) as e:
        return f"cannot use {echo(str(path))}: {getattr(e, 'strerror', None) or e}"
    return None


def readable_dir_problem(path: Path) -> str | None:
    """Why a folder that is only read (`report --out` elsewhere) cannot be: it is a file, or cannot be listed."""
    try:
        if path.exists() and not path.is_dir():
            return f"{echo(str(path))} is a file, not a folder"
        if path.is_dir():
            os.listdir(path)
    except (OSError, ValueError) as e:
        return f"cannot read {echo(str(path))}: {getattr(e, 'strerror', None) or e}"
    return None


def _journal_problem(path: Path, *, reads_only: bool = False) -> str | None:
    try:
        if path.is_dir():
            return f"the journal file {echo(str(path))} is a folder"
        if (kind := kind_problem(path)) is not None:
            return f"the journal file {echo(str(path))} {kind}"
        if reads_only:
            return None  # read into a private copy (report/snapshot.py): nothing is written beside it
        if path.exists():
            if read_only_mount(path):
                return f"cannot write the journal file {echo(str(path))} (a read-only file system)"
            try:  # opened for appending and closed: the kernel's answer, nothing written
                open(path, "ab").close()
            except OSError as e:
                return f"cannot write the journal file {echo(str(path))} ({e.strerror or e})"
    except (OSError, ValueError) as e:
        return f"cannot use the journal file {echo(str(path))}: {getattr(e, 'strerror', None) or e}"
    return writable_dir_problem(path.parent)


def check_storage(url: str, key: str = "study.storage", *, reads_only: bool = False) -> list[Problem]:
    """A database URL that can be opened (parses, scheme, driver), or a writable journal file path.

    The syntax is storage.url_problem's (the same check `open_storage` makes), so what passes
    here is what opens there; every message shows the URL masked.
    """
    problem = url_problem(url)
    if problem:
        return [Problem(path=key, message=problem)]
    if not is_rdb_url(url):
        problem = _journal_problem(Path(url.removeprefix(JOURNAL_PREFIX)), reads_only=reads_only)
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


def check_places(sf: StudyFile, *, reads_only: bool = False) -> list[Problem]:
    """The run folder and storage as the command uses them: written (every command that writes into the study), or
    only read (`reads_only`: `report --out` elsewhere, which may report a study on a read-only mount)."""
    problems = _check_name(sf.study.name)
    name_ok = not problems
    out = sf.study.output_dir
    if out is not None or name_ok:
        folder = Path(out) if out is not None else Path("runs") / sf.study.name
        problem = readable_dir_problem(folder) if reads_only else writable_dir_problem(folder)
        if problem:
            problems.append(Problem(path="study.output_dir", message=f"{problem}; choose another study.output_dir"))
    if sf.study.storage is not None:
        problems += check_storage(sf.study.storage, reads_only=reads_only)
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
