"""The rows of a local prompt file, checked before anything trains on them (stdlib only).

    python -c "import sys; from grpo_ablate.core.prompt_file import prompt_file_problem as p; print(p(sys.argv[1], 'prompt'))" data.jsonl

`datasets` reads a JSON-lines file without complaint when a prompt is null (the trial then
trains on the text "None"), fails on a blank one deep inside tokenization, and reports a
broken line or an empty file without saying where. `validate` and the trainer's data loading
both ask this module instead, which names the file, the line (or row) and what is wrong there.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator

from grpo_ablate.core.errors import StudyError
from grpo_ablate.core.safe_read import MB, kind_problem, open_regular, read_text, text_stream

__all__ = ["prompt_file_problem", "CHECKED_SUFFIXES", "MAX_REPORTED"]

CHECKED_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
MAX_REPORTED = 5  # bad rows named in the message; the rest are counted
MAX_JSON_BYTES = 512 * MB  # a .json file is read whole


class _Unreadable(Exception):
    """The file itself cannot be read as its kind: one line saying where."""


def _jsonl_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with open_regular(path, "data file") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue  # datasets skips blank lines too
            try:
                yield f"line {number}", json.loads(raw)
            except UnicodeDecodeError:
                raise _Unreadable(f"line {number} is not UTF-8 text") from None
            except json.JSONDecodeError as e:
                raise _Unreadable(f"line {number} is not valid JSON ({e.msg} at column {e.colno})") from None


def _json_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """A .json file: one array of rows, or (as `datasets` also accepts) JSON lines."""
    text = read_text(path, "data file", MAX_JSON_BYTES)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise _Unreadable(f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        yield from ((f"row {i}", row) for i, row in enumerate(rows, start=1))
        return
    if stripped.startswith("{") and "\n{" not in stripped.strip():
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as e:
            raise _Unreadable(f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        if isinstance(whole, dict) and all(isinstance(v, list) for v in whole.values()) and whole:
            columns = list(whole)  # a dict of columns
            n = max(len(v) for v in whole.values())
            yield from ((f"row {i + 1}", {c: whole[c][i] if i < len(whole[c]) else None for c in columns})
                        for i in range(n))
            return
        yield "line 1", whole
        return
    yield from _jsonl_rows(path)


def _csv_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with text_stream(path, "data file") as f:  # Excel's byte-order mark dropped, as `datasets` drops it
        reader = csv.DictReader(f)
        for row in reader:
            yield f"line {reader.line_num}", row


def _parquet_rows(path: Path, column: str) -> Iterator[tuple[str, Any]]:
    import pyarrow.parquet as pq  # lazy: pyarrow only for a parquet file

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow's ArrowInvalid and friends: not a parquet file
        raise _Unreadable(f"is not a readable parquet file ({type(e).__name__})") from None
    if column not in table.column_names:
        yield "row 1", {name: None for name in table.column_names}
        return
    for i, value in enumerate(table.column(column).to_pylist(), start=1):
        yield f"row {i}", {column: value}


def _row_problem(row: Any, column: str) -> str | None:
    if not isinstance(row, dict):
        return f"is a JSON {type(row).__name__}, not an object with a {column!r} key"
    if column not in row:
        return f"has no {column!r} key"
    value = row[column]
    if value is None:
        return f"{column} is null"
    if isinstance(value, str):
        return f"{column} is blank" if not value.strip() else None
    if isinstance(value, list):  # chat messages
        if not value:
            return f"{column} is an empty list of messages"
        if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in value):
            return f"{column} is a list that is not chat messages ({{role, content}} objects)"
        if not any(m["content"].strip() for m in value):
            return f"{column} holds only blank messages"
        return None
    return f"{column} is a {type(value).__name__}, not text or a list of chat messages"


def prompt_file_problem(path: str | Path, column: str = "prompt", max_rows: int | None = None) -> str | None:
    """What is wrong with a local prompt file, in one line naming the file and its bad rows; None
    when every row (the first `max_rows`, as data.max_samples uses) has a usable prompt, or when
    the file is not a kind this module reads."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in CHECKED_SUFFIXES or not path.exists() or path.is_dir():  # a folder: load_from_disk's
        return None
    if (kind := kind_problem(path)) is not None:  # a FIFO or a device: reading it would hang or never end
        return f"data file {path} {kind}"
    if suffix == ".jsonl":
        rows = _jsonl_rows(path)
    elif suffix == ".json":
        rows = _json_rows(path)
    elif suffix == ".csv":
        rows = _csv_rows(path)
    else:
        rows = _parquet_rows(path, column)
    bad: list[str] = []
    n_bad = n_rows = 0
    missing_everywhere = True
    keys: set[str] = set()
    try:
        for where, row in rows:
            n_rows += 1
            problem = _row_problem(row, column)
            if isinstance(row, dict):
                keys.update(map(str, row))
                missing_everywhere &= column not in row
            else:
                missing_everywhere = False
            if problem:
                n_bad += 1
                if len(bad) < MAX_REPORTED:
                    bad.append(f"{where} {problem}")
            if max_rows is not None and n_rows >= max_rows:
                break
    except _Unreadable as e:
        also = f"; also {'; '.join(bad)}" if bad else ""
        return f"data file {path}: {e}{also}; fix that line"
    except StudyError as e:
        return e.problems[0].message
    except (UnicodeDecodeError, csv.Error, OSError) as e:
        return f"data file {path} cannot be read: {type(e).__name__}: {str(e)[:200]}"
    if n_rows == 0:
        return f"data file {path} has no rows; give it one prompt per row in a {column!r} field"
    if missing_everywhere:
        shown = sorted(keys)[:20]
        return (f"prompt_column {column!r} is not a column of data file {path}: no row has it (fields: {shown}); "
                "set data.prompt_column")
    if n_bad:
        more = f" (and {n_bad - len(bad)} more)" if n_bad > len(bad) else ""
        return (f"data file {path}: {n_bad} of {n_rows} rows have no usable prompt: {'; '.join(bad)}{more}; "
                f"fix or remove those rows")
    return None
