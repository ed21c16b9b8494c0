"""A report written elsewhere (`report --out DIR/report.html`) only reads the study's folder.

A study on a read-only mount (or another user's folder) can still be reported: its local storage
file (a journal, or a SQLite database) is read into a private copy, because opening Optuna's
journal backend opens the file for appending and a SQLite connection may write its journal beside
the database. The note and the artifact in optuna-dashboard are writes into the study, so a
report written elsewhere leaves them as they were (`grpo-ablate report` without --out updates them).
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from grpo_ablate.storage.url import is_rdb_url, local_file

__all__ = ["storage_snapshot", "writes_into_study"]


def writes_into_study(html_path: Path, output_dir: Path) -> bool:
    """Whether a report at html_path lands in the study's own folder (then it also publishes)."""
    return Path(html_path).resolve().parent == Path(output_dir).resolve()


@contextmanager
def storage_snapshot(url: str) -> Iterator[str]:
    """The URL of a private copy of the storage's local file, for as long as the block runs; a server
    database's URL as it is (reading it writes nothing into the study's folder)."""
    path = local_file(url)
    if path is None or not path.exists():  # a server database; a missing file is load_trials' error to give
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="grpo-report-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)  # reads only; the copy is ours to open for writing
        yield f"sqlite:///{copy}" if is_rdb_url(url) else str(copy)
