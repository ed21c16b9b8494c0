"""Where a study lives: Optuna storage from a URL, and the artifact store beside it.

    python -c 'import sys; from grpo_ablate.storage import open_storage; open_storage(sys.argv[1])' "$URL"

- a plain path (the default, `<output_dir>/study.journal`): Optuna's journal file, for many
  processes on one host. A journal whose last line is torn (disk full, a crash mid-write) is
  repaired before anything appends to it, with a backup kept.
- `sqlite:///...`: one process only (parallel writers hit "database is locked").
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
from typing import TYPE_CHECKING, NoReturn

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

if TYPE_CHECKING:
    import optuna

# the URL functions live in storage_url; re-exported here, where callers have always found them
__all__ = ["open_storage", "open_artifact_store", "normalize_url", "is_rdb_url", "mask_url", "url_problem",
           "canonical_url", "local_file", "DATABASE_SCHEMES", "JOURNAL_PREFIX", "repair_journal"]


def _refuse(url: str, why: str, exc: BaseException | None = None) -> NoReturn:
    """One line, password masked, raised as the StudyError every command turns into exit 2."""
    from grpo_ablate.config import Problem, StudyError

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
    max_retry: int | None = None,
) -> "optuna.storages.BaseStorage":
    """Open (creating where needed) the storage a URL names; StudyError when it cannot be opened.

    Heartbeat settings apply to RDB storages only; without them a dead worker's trial stays
    RUNNING forever, so `run` always passes them.
    """
    import optuna
    from optuna.storages import JournalStorage, RetryHeartbeatStaleTrialCallback
    from optuna.storages.journal import JournalFileBackend

    problem = url_problem(url)
    if problem:
        from grpo_ablate.config import Problem, StudyError

        raise StudyError([Problem(path="study.storage", message=problem)])
    url = canonical_url(url)
    if is_rdb_url(url):
        kwargs: dict[str, object] = {}
        if heartbeat_interval:
            kwargs["heartbeat_interval"] = heartbeat_interval
            kwargs["grace_period"] = grace_period or 3 * heartbeat_interval
            if max_retry:
                kwargs["heartbeat_stale_trial_callback"] = RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
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
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return JournalStorage(backend)


def repair_journal(path: Path) -> bool:
    """Cut a torn last line off a journal file, keeping a backup; True when it repaired one.

    Optuna's reader skips an incomplete last line, but the next append lands right after it and
    from then on no reader can parse the file. Checked under the journal's own lock, so a write
    in progress is never mistaken for a torn one. When the backup cannot be written the file is
    left as it is and a StudyError says what to do.
    """
    from optuna.storages.journal import JournalFileSymlinkLock

    if not path.exists() or path.stat().st_size == 0:
        return False
    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        good = _last_good_offset(path)
        size = path.stat().st_size
        if good == size:
            return False
        if good is None:
            _refuse(str(path), "its last megabyte holds no valid journal line; restore it from a backup")
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
    finally:
        lock.release()


def _last_good_offset(path: Path) -> int | None:
    """The byte offset just after the last line that is complete, valid JSON (None: not found)."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 1_000_000))  # journal lines are small; the tail decides
        tail = f.read()
    base = size - len(tail)
    end = len(tail)
    while end > 0:
        start = tail.rfind(b"\n", 0, end - 1) + 1  # where the line that ends at `end` begins
        line = tail[start:end]
        if line.endswith(b"\n"):
            try:
                json.loads(line)
                return base + end
            except (json.JSONDecodeError, UnicodeDecodeError):
                pass
        if start == 0:
            break
        end = start
    return 0 if base == 0 else None


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
