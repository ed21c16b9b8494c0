"""Where a study lives: Optuna storage from a URL, and the artifact store beside it.

    python -c 'import sys; from grpo_ablate.storage import open_storage; open_storage(sys.argv[1])' "$URL"

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

import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

from grpo_ablate.storage_url import (
    DATABASE_SCHEMES,
    JOURNAL_PREFIX,
    canonical_url,
    is_rdb_url,
    local_file,
    mask_url,
    normalize_url,
    secrets_in,
    url_problem,
)
from grpo_ablate.errors import Problem, StudyError

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

# the URL functions live in storage_url; re-exported here, where callers have always found them
__all__ = ["open_storage", "open_artifact_store", "normalize_url", "is_rdb_url", "mask_url", "url_problem",
           "canonical_url", "local_file", "DATABASE_SCHEMES", "JOURNAL_PREFIX", "repair_journal", "check_foreign_file",
           "read_existing"]


def _refuse(url: str, why: str, exc: BaseException | None = None) -> NoReturn:
    """One line, password masked, raised as the StudyError every command turns into exit 2."""

    detail = ""
    if exc is not None:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        detail = f": {type(exc).__name__}: {first[:300]}"
        for secret in secrets_in(url):
            detail = detail.replace(secret, "***")
        detail = mask_url(detail)
    raise StudyError([Problem(path="", message=f"cannot open the storage {mask_url(url)} ({why}){detail}")]) from None


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
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    # Optuna's INFO lines ("Skipping enqueue." from every worker that queues a plan already
    # queued, "A new study created") are noise beside our own console; its warnings still show.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    problem = url_problem(url)
    if problem:
        raise StudyError([Problem(path="study.storage", message=problem)])
    url = canonical_url(url)
    if is_rdb_url(url):
        kwargs: dict[str, object] = {}
        if heartbeat_interval:
            kwargs["heartbeat_interval"] = heartbeat_interval
            kwargs["grace_period"] = grace_period or 3 * heartbeat_interval
            if stale_trial_callback is not None:
                kwargs["heartbeat_stale_trial_callback"] = stale_trial_callback
        check_foreign_file(url)
        try:
            if (db_file := local_file(url)) is not None:  # SQLite creates the file, not its folder
                db_file.parent.mkdir(parents=True, exist_ok=True)
            return _rdb_with_retry(normalize_url(url), kwargs)
        except Exception as exc:  # connection refused, no such database, bad port, no driver
            _refuse(url, "is the server up and the URL right?", exc)
    path = Path(url.removeprefix("journal:"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_journal(path)
        backend = JournalFileBackend(str(path))
    except OSError as exc:
        _refuse(url, "a journal file needs a writable folder", exc)
    return JournalStorage(backend)


def read_existing(url: str) -> "optuna.storages.BaseStorage | None":
    """A local storage (journal or SQLite file) that exists, opened to read: nothing is created,
    migrated or repaired (`plan` must not change a study). None when there is no such file or the
    URL names a server."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = local_file(url)
    if path is None or not path.is_file() or not path.stat().st_size:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if is_rdb_url(url):
        return optuna.storages.RDBStorage(url, skip_compatibility_check=True)  # a SQLite file: local_file found it
    return JournalStorage(JournalFileBackend(str(path)))


JOURNAL_HEAD = b'{"op_code":'  # how Optuna's JournalStorage writes every log line (compact JSON, op_code first)
SQLITE_HEAD = b"SQLite format 3\x00"


def check_foreign_file(url: str) -> None:
    """Refuse (StudyError, file untouched) an existing file that is not the storage the URL says.

    `--storage notes.txt` must not turn someone's notes into a journal: a non-empty file is used
    as a journal only when its first line is an Optuna journal line, and a `sqlite:///` path
    only when it holds an SQLite database.
    """
    if is_rdb_url(url):
        if not url.lower().startswith("sqlite:///"):
            return
        path, kind, head = Path(url[len("sqlite:///"):].split("?", 1)[0]), "an SQLite database", SQLITE_HEAD
    else:
        path, kind, head = Path(url.removeprefix("journal:")), "an Optuna journal", JOURNAL_HEAD
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        with path.open("rb") as f:
            start = f.read(len(head))
            first = start + f.readline(1_000_000) if head is JOURNAL_HEAD else start
    except OSError:
        return  # opening it says why, in its own words
    if start == head and (head is SQLITE_HEAD or not first.endswith(b"\n") or _journal_entry(first)):
        return
    _refuse(url, f"{path} exists and is not {kind}; it was left untouched. Point --storage (study.storage) at "
                 "a new file or at the study's own storage")


def _journal_entry(line: bytes) -> bool:
    """A complete line Optuna's journal reader accepts: a JSON object with an integer op_code."""
    if not line.endswith(b"\n"):
        return False
    try:
        entry = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(entry, dict) and isinstance(entry.get("op_code"), int)


def _sound(path: Path) -> bool:
    """The whole file at once, in C: every line begins with one entry's head and ends its object.

    The common case (nothing torn) then costs a few byte counts rather than a parse per line.
    """
    data = path.read_bytes()
    lines = data.count(b"\n")
    return (data.endswith(b"}\n") and data.startswith(JOURNAL_HEAD) and b"\x00" not in data
            and data.count(JOURNAL_HEAD) == lines and data.count(b"\n" + JOURNAL_HEAD) == lines - 1
            and data.count(b"}\n") == lines)


def _looks_whole(line: bytes) -> bool:
    """A fast test that passes Optuna's own lines without parsing them (a large journal is opened often).

    Inside a JSON string a quote is escaped, so `{"op_code":` begins an entry and occurs nowhere
    else: a line with it twice is a torn fragment with an entry appended. Anything this does not
    pass is parsed (_journal_entry).
    """
    return (line.startswith(JOURNAL_HEAD) and line.endswith(b"}\n") and line.count(JOURNAL_HEAD) == 1
            and b"\x00" not in line)


def repair_journal(path: Path) -> bool:
    """Make a damaged journal readable again, keeping the original; True when it changed the file.

    Two kinds of damage, both from a crash or a full disk mid-write:
    - a torn last line: Optuna's reader skips it, but the next append lands right after it.
      It is cut off (the original kept as `<journal>.bak-<time>`);
    - a broken line inside the file (a torn line another process appended after): every reader
      stops there. The readable lines are kept, and where a line is a torn fragment with a
      whole entry appended to it, that entry is kept too; the original is kept as
      `<journal>.corrupt-<time>` and stderr names the lines dropped.
    Checked under the journal's own lock, so a write in progress is never mistaken for a torn
    one. When the copy cannot be written the file is left as it is and a StudyError says what
    to do. A file that is not a journal is refused first (check_foreign_file).
    """
    from optuna.storages.journal import JournalFileSymlinkLock

    if not path.exists() or path.stat().st_size == 0:
        return False
    check_foreign_file(str(path))
    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        if _sound(path):
            return False
        scan = _scan_journal(path)
        if not scan.broken and scan.tail == 0:
            return False
        if not scan.broken:
            return _cut_torn_tail(path, scan.size - scan.tail, scan.size)
        return _recover(path, scan)
    finally:
        lock.release()


class _Scan:
    """A journal read line by line: the lines to keep, and what is broken."""

    def __init__(self) -> None:
        self.kept: list[bytes] = []
        self.broken: list[int] = []  # 1-based line numbers that are not journal entries
        self.salvaged: list[int] = []  # of those, lines whose appended whole entry was kept
        self.dropped_bytes = 0
        self.tail = 0  # bytes of a torn last line (no newline)
        self.size = 0


def _scan_journal(path: Path) -> _Scan:
    scan = _Scan()
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            scan.size += len(line)
            if not line.endswith(b"\n"):
                scan.tail = len(line)
                scan.dropped_bytes += len(line)
                break
            if _looks_whole(line) or _journal_entry(line):
                scan.kept.append(line)
                continue
            scan.broken.append(number)
            cut = line.find(JOURNAL_HEAD, 1)
            while cut > 0 and not _journal_entry(line[cut:]):
                cut = line.find(JOURNAL_HEAD, cut + 1)
            if cut > 0:  # the fragment a crashed writer left, then another process's whole entry
                scan.kept.append(line[cut:])
                scan.salvaged.append(number)
                scan.dropped_bytes += cut
            else:
                scan.dropped_bytes += len(line)
    return scan


def _cut_torn_tail(path: Path, good: int, size: int) -> bool:
    backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        shutil.copy2(path, backup)
    except OSError as exc:
        backup.unlink(missing_ok=True)
        _refuse(str(path), (
            f"its last {size - good} byte(s) are a torn line, and no backup could be written to repair it; "
            f"free some space, copy the file somewhere safe, then cut it to its first {good} bytes "
            f"(truncate -s {good} {path})"), exc)
    os.truncate(path, good)
    print(f"grpo-ablate: {path} ended in a torn line ({size - good} byte(s), from a crash or a full disk); "
          f"cut it off, the original is kept as {backup}", file=sys.stderr)
    return True


def _recover(path: Path, scan: _Scan) -> bool:
    """Rewrite the journal with its readable lines (atomically), the original copied aside first."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.corrupt-{stamp}")
    tmp = path.with_name(f".{path.name}.recovered-{os.getpid()}")
    try:
        shutil.copy2(path, backup)
        with tmp.open("wb") as f:
            f.writelines(scan.kept)
            f.flush()
            os.fsync(f.fileno())
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        backup.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
        _refuse(str(path), (
            f"line(s) {_numbers(scan.broken)} are broken (a crash mid-write), and no copy could be written to "
            "recover the rest; free some space next to it and run again"), exc)
    dropped = [n for n in scan.broken if n not in scan.salvaged]
    parts = [f"{len(scan.broken)} broken line(s) ({_numbers(scan.broken)}) from a crash or a full disk mid-write"]
    if scan.salvaged:
        parts.append(f"kept the whole entry appended after the torn fragment on line(s) {_numbers(scan.salvaged)}")
    parts.append(f"dropped {len(dropped)} unreadable line(s)" + (f" ({_numbers(dropped)})" if dropped else "")
                 + (" and a torn last line" if scan.tail else "") + f", {scan.dropped_bytes} byte(s) in all")
    print(f"grpo-ablate: {path} had {'; '.join(parts)}; kept {len(scan.kept)} readable line(s); "
          f"the original is kept as {backup}", file=sys.stderr)
    return True


def _numbers(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:10]))
    return shown + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")


def _rdb_with_retry(url: str, kwargs: dict[str, object]) -> "optuna.storages.RDBStorage":
    """Workers that start together all try to create the tables; the losers retry and find them.

    A server that cannot be reached at all is not retried: that answer will not change.
    """
    import sqlalchemy.exc
    from optuna.storages import RDBStorage

    for attempt in range(6):
        try:
            return RDBStorage(url, **kwargs)  # type: ignore[arg-type]
        except sqlalchemy.exc.DBAPIError as exc:
            if attempt == 5 or "connection" in str(exc).splitlines()[0].lower():
                raise
            time.sleep(0.5 + random.random() * (attempt + 1))
    raise AssertionError("unreachable")


def open_artifact_store(output_dir: Path) -> "optuna.artifacts.FileSystemArtifactStore":
    from optuna.artifacts import FileSystemArtifactStore

    base = Path(output_dir) / "artifacts"
    base.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(base))
