"""Where a study lives: Optuna storage from a URL, and the artifact store beside it.

    python -c 'import sys; from grpo_ablate.storage.store import open_storage; open_storage(sys.argv[1])' "$URL"

- a plain path (the default, `<output_dir>/study.journal`): Optuna's journal file, for many
  processes on one host. A journal with a torn or broken line (disk full, a crash mid-write)
  is repaired before anything appends to it, the original kept beside it; a file that is not
  a journal is refused and left untouched.
- `sqlite:///...`: one process only (parallel writers hit "database is locked"); an existing
  file that is not an SQLite database is refused.
- `postgresql://user:pass@host/db`: workers on several hosts; the only kind with heartbeats.

A storage that cannot be opened raises `StudyError` with one line naming the masked URL.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn, TypeVar

from grpo_ablate.core.safe_read import kind_problem, open_regular
from grpo_ablate.storage.journal import Scan, TolerantJournalBackend, looks_like_journal, scan
from grpo_ablate.storage.url import (
    DATABASE_SCHEMES,
    JOURNAL_PREFIX,
    Location,
    canonical_url,
    is_rdb_url,
    local_file,
    locate,
    mask_url,
    normalize_url,
    url_problem,
)
from grpo_ablate.core.errors import Problem, StudyError, database_fault

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

# the URL functions live in storage_url; re-exported here, where callers have always found them
__all__ = ["open_storage", "open_artifact_store", "patiently", "normalize_url", "is_rdb_url", "mask_url", "url_problem",
           "canonical_url", "local_file", "DATABASE_SCHEMES", "JOURNAL_PREFIX", "repair_journal", "check_foreign_file",
           "read_existing", "Location", "locate"]


def _refuse(where: Location, why: str, exc: BaseException | None = None) -> NoReturn:
    """One line, password masked, raised as the StudyError every command turns into exit 2."""

    detail = ""
    if exc is not None:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        detail = where.scrub(f": {type(exc).__name__}: {first[:300]}")
    raise StudyError([Problem(path="", message=f"cannot open the storage {where.masked} ({why}){detail}")]) from None


def open_storage(
    url: str,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    stale_trial_callback: "Callable[[optuna.Study, FrozenTrial], None] | None" = None,
) -> "optuna.storages.BaseStorage":
    """Open (creating where needed) the storage a URL names; StudyError when it cannot be opened.

    Heartbeat settings apply to RDB storages only; without them a dead worker's trial stays
    RUNNING forever, so `run` always passes them, with study/ledger.py's requeue as the
    `stale_trial_callback` (Optuna's heartbeat_stale_trial_callback).
    """
    import optuna  # lazy: Optuna only when a storage is opened; every command imports storage.py
    from optuna.storages import JournalStorage

    # Optuna's INFO lines ("Skipping enqueue." from every worker that queues a plan already
    # queued, "A new study created") are noise beside our own console; its warnings still show.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    problem = url_problem(url)
    if problem:
        raise StudyError([Problem(path="study.storage", message=problem)])
    where = locate(url)
    if where.database:
        kwargs: dict[str, object] = {}
        if heartbeat_interval:
            kwargs["heartbeat_interval"] = heartbeat_interval
            kwargs["grace_period"] = grace_period or 3 * heartbeat_interval
            if stale_trial_callback is not None:
                kwargs["heartbeat_stale_trial_callback"] = stale_trial_callback
        check_foreign_file(where)
        try:
            if where.file is not None:  # SQLite creates the file, not its folder
                where.file.parent.mkdir(parents=True, exist_ok=True)
            return _rdb_with_retry(normalize_url(where.url), kwargs)
        except Exception as exc:  # connection refused, no such database, bad port, no driver
            _refuse(where, "is the server up and the URL right?", exc)
    path = Path(where.url.removeprefix(JOURNAL_PREFIX))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _repair(path, where)
        backend = TolerantJournalBackend(str(path))
    except OSError as exc:
        _refuse(where, "a journal file needs a writable folder", exc)
    return JournalStorage(backend)  # type: ignore[arg-type]  # duck-typed: journal.py stays free of optuna


def read_existing(url: str) -> "optuna.storages.BaseStorage | None":
    """A local storage (journal or SQLite file) that exists, opened to read: nothing is created,
    migrated or repaired (`plan` must not change a study). None when there is no such file or the
    URL names a server; StudyError for a SQLite file that is not Optuna's (check_foreign_file)."""
    import optuna  # lazy: Optuna only when a storage is opened; every command imports storage.py

    where = locate(url)
    path = where.file
    if path is None or not path.is_file() or not path.stat().st_size:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    check_foreign_file(where)  # RDBStorage writes Optuna's tables into any SQLite file it opens
    if where.database:
        return optuna.storages.RDBStorage(url, skip_compatibility_check=True)  # a SQLite file: local_file found it
    # the journal's own reader: a torn or damaged line is skipped, not a traceback
    return optuna.storages.JournalStorage(TolerantJournalBackend(str(path)))  # type: ignore[arg-type]


SQLITE_HEAD = b"SQLite format 3\x00"
_HEAD_BYTES = 1 << 20  # enough of a file to find a journal entry among its first lines


def check_foreign_file(where: Location) -> None:
    """Refuse (StudyError, file untouched) an existing file that is not the storage the URL says.

    `--storage notes.txt` must not turn someone's notes into a journal, nor a `sqlite:///` URL
    another application's database into Optuna's: a non-empty file is used as a journal only
    when an Optuna entry is among its first lines (journal.looks_like_journal: the first line
    may be the damaged one), and an SQLite file only when it holds no table that is not Optuna's.
    Anything that is not a regular file (a FIFO, a device, a folder) is refused before it is read.
    """
    if where.database:
        if where.file is None or not where.sqlite:
            return
        path, kind = where.file, "an SQLite database"
    else:
        path, kind = Path(where.url.removeprefix(JOURNAL_PREFIX)), "an Optuna journal"
    if (problem := kind_problem(path)) is not None:
        _refuse(where, f"{path} {problem}; point --storage (study.storage) at a file")
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        with open_regular(path, kind) as f:
            head = f.read(_HEAD_BYTES)
            whole = not f.read(1)
    except OSError:
        return  # opening it says why, in its own words
    if kind == "an SQLite database":
        if not head.startswith(SQLITE_HEAD):
            _refuse(where, f"{path} exists and is not {kind}; it was left untouched. Point --storage (study.storage) at "
                         "a new file or at the study's own storage")
        foreign = _foreign_tables(path)
        if foreign:
            _refuse(where, f"{path} is another application's SQLite database (tables {', '.join(foreign[:5])}); "
                         "it was left untouched. Point --storage (study.storage) at a new file or at the study's own storage")
        return
    if not looks_like_journal(head, whole):
        _refuse(where, f"{path} exists and is not {kind}; it was left untouched. Point --storage (study.storage) at "
                     "a new file or at the study's own storage")


def _foreign_tables(path: Path) -> list[str]:
    """The tables of an SQLite file that Optuna did not create, read through a read-only connection."""
    # lazy: Optuna only when a storage is opened; every command imports storage.py
    from optuna.storages._rdb import models

    ours = set(models.BaseModel.metadata.tables) | {"alembic_version"}
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        finally:
            con.close()
    except sqlite3.Error:
        return []  # opening it says why, in its own words
    return sorted(n for n in names if n not in ours and not n.startswith("sqlite_"))


def repair_journal(path: Path) -> bool:
    """Make a damaged journal readable again, keeping the original; True when it changed the file.

    Every line is parsed and checked against what Optuna's replay needs for its operation
    (journal.py); every entry that passes is kept, wherever it is. A complete last entry that
    lacks only its newline gets one; a byte-order mark is dropped; a fragment with a whole entry
    appended keeps the entry; a study's creation line damaged but still naming the study is
    rebuilt; what is left (torn or garbage lines, entries replay cannot apply) is dropped and
    named on stderr. The original is copied to `<journal>.corrupt-<time>` first and the new file
    replaces it atomically. Checked under the journal's own lock, so a write in progress is never
    mistaken for a torn one. When the copy cannot be written the file is left as it is and a
    StudyError says what to do. A file that is not a journal is refused first (check_foreign_file).
    """
    return _repair(path, locate(str(path)))


def _repair(path: Path, where: Location) -> bool:
    """repair_journal on the journal `where` names (its file: `path`)."""
    # lazy: Optuna only when a storage is opened; every command imports storage.py
    from optuna.storages.journal import JournalFileSymlinkLock

    check_foreign_file(where)  # first: a FIFO is refused before anything opens it
    if not path.exists() or path.stat().st_size == 0:
        return False
    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        with open_regular(path, "journal") as f:
            found = scan(f.read())
        if found.sound:
            return False
        return _recover(path, found, where)
    finally:
        lock.release()


def _recover(path: Path, found: Scan, where: Location) -> bool:
    """Rewrite the journal with its entries (atomically), the original copied aside first."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.corrupt-{stamp}")
    tmp = path.with_name(f".{path.name}.recovered-{os.getpid()}")
    good = found.recovered()
    try:
        shutil.copy2(path, backup)
        with tmp.open("wb") as f:
            f.write(good)
            f.flush()
            os.fsync(f.fileno())
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        backup.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
        _refuse(where, (
            f"it needs repair ({found.summary()}), and no copy could be written to recover it; free some space "
            f"next to it and run again, or copy it somewhere safe and keep only its readable lines"), exc)
    print(f"grpo-ablate: {path} was damaged (a crash, a full disk or an edit): {found.summary()}; "
          f"the original is kept as {backup}", file=sys.stderr)
    return True


def _rdb_with_retry(url: str, kwargs: dict[str, object]) -> "optuna.storages.RDBStorage":
    """Workers that start together all try to create the tables; the losers retry and find them.

    A server that cannot be reached at all is not retried: that answer will not change.
    """
    import sqlalchemy.exc  # lazy: SQLAlchemy and Optuna only for a server storage; every command imports storage.py
    from optuna.storages import RDBStorage

    engine: dict[str, object] = {"pool_pre_ping": True}  # a connection the server dropped (a restart) is replaced
    if url.startswith("postgresql") and "connect_timeout" not in url:
        # a host that does not answer (a partition) fails a connect in seconds instead of the OS's minutes
        engine["connect_args"] = {"connect_timeout": 10}
    for attempt in range(6):
        try:
            return RDBStorage(url, engine_kwargs=engine, **kwargs)  # type: ignore[arg-type]
        except sqlalchemy.exc.DBAPIError as exc:
            if attempt == 5 or "connection" in str(exc).splitlines()[0].lower():
                raise
            time.sleep(0.5 + random.random() * (attempt + 1))
    raise AssertionError("unreachable")


T = TypeVar("T")


def patiently(call: "Callable[[], T]", *, seconds: float, what: str, say: Callable[[str], None] | None = None) -> T:
    """`call()`, tried again with backoff (0.5 s, doubling to 10 s) while the study's database is unavailable
    (errors.database_fault: a server stopped or restarting, a locked SQLite file), for up to `seconds`; then the
    last error is raised, for the caller to say what is kept. Any other error is raised at once. `say` hears one
    line when the first try fails. A write retried here must be one that may be repeated."""
    deadline = time.monotonic() + max(0.0, seconds)
    delay = 0.5
    told = False
    while True:
        try:
            return call()
        except Exception as exc:
            fault = database_fault(exc)
            if fault is None or time.monotonic() + delay > deadline:
                raise
            if say is not None and not told:
                say(f"the study's storage is unavailable while {what} ({fault[:200]}); trying again for up to "
                    f"{seconds:.0f} s")
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def open_artifact_store(output_dir: Path) -> "optuna.artifacts.FileSystemArtifactStore":
    # lazy: Optuna only when a storage is opened; every command imports storage.py
    from optuna.artifacts import FileSystemArtifactStore

    base = Path(output_dir) / "artifacts"
    base.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(base))
