"""Where a study lives: Optuna storage from a URL, and the artifact store beside it.

- a plain path (the default, `<output_dir>/study.journal`): Optuna's journal file. Safe for
  many worker processes on one host (file lock), readable by optuna-dashboard.
- `sqlite:///...`: one process only (parallel writers hit "database is locked").
- `postgresql://user:pass@host/db` (or `postgres://`): for workers on several hosts. The only
  kind with heartbeats: a trial whose worker died is failed after the grace period and
  retried with the same params (`study.max_retry` times).
"""

from __future__ import annotations

import importlib.util
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna

__all__ = ["open_storage", "open_artifact_store", "normalize_url", "is_rdb_url", "mask_url"]

_RDB_PREFIXES = ("postgresql", "postgres", "mysql", "sqlite", "oracle", "mssql")


def is_rdb_url(url: str) -> bool:
    return url.split(":", 1)[0].split("+", 1)[0] in _RDB_PREFIXES and "://" in url


def mask_url(url: str) -> str:
    """The URL as it may be shown or stored: any password replaced by ***.

    Every place that prints, logs or stores a storage URL goes through this (stdout, the
    study's attributes the dashboard shows, the report). Stdlib only: no SQLAlchemy import on
    the paths that merely print.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{hostport}{slash}{tail}"


def normalize_url(url: str) -> str:
    """Make a PostgreSQL URL name a driver that is installed (psycopg 3 unless psycopg2 is there)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        if importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg") is not None:
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def open_storage(
    url: str,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    max_retry: int | None = None,
) -> "optuna.storages.BaseStorage":
    """Open (creating where needed) the storage a URL names.

    Heartbeat settings apply to RDB storages only; without them a dead worker's trial stays
    RUNNING forever, so `run` always passes them.
    """
    import optuna
    from optuna.storages import JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
    from optuna.storages.journal import JournalFileBackend

    if is_rdb_url(url):
        kwargs: dict[str, object] = {}
        if heartbeat_interval:
            kwargs["heartbeat_interval"] = heartbeat_interval
            kwargs["grace_period"] = grace_period or 3 * heartbeat_interval
            if max_retry:
                kwargs["heartbeat_stale_trial_callback"] = RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        return _rdb_with_retry(normalize_url(url), kwargs)
    path = Path(url.removeprefix("journal:"))
    path.parent.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return JournalStorage(JournalFileBackend(str(path)))


def _rdb_with_retry(url: str, kwargs: dict[str, object]) -> "optuna.storages.RDBStorage":
    """Workers that start together all try to create the tables; the losers retry and find them."""
    import sqlalchemy.exc
    from optuna.storages import RDBStorage

    for attempt in range(6):
        try:
            return RDBStorage(url, **kwargs)  # type: ignore[arg-type]
        except sqlalchemy.exc.DBAPIError:
            if attempt == 5:
                raise
            time.sleep(0.5 + random.random() * (attempt + 1))
    raise AssertionError("unreachable")


def open_artifact_store(output_dir: Path) -> "optuna.artifacts.FileSystemArtifactStore":
    from optuna.artifacts import FileSystemArtifactStore

    base = Path(output_dir) / "artifacts"
    base.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(base))
