"""Optuna's journal file, read the way Optuna's replay reads it: every line parsed and checked.

    python -c 'import sys; from grpo_ablate.storage.journal import scan; print(scan(open(sys.argv[1], "rb").read()).summary())' study.journal

A journal is one JSON object per line, each an operation (`op_code`) that Optuna's replay
(optuna/storages/journal/_storage.py, JournalStorageReplayResult) applies in order. A crash,
a full disk or another process dying mid-write leaves lines that replay cannot apply: a torn
fragment, a fragment with a whole entry appended after it, garbage, a flipped digit, a byte-order
mark an editor added. Replay then stops every command with a traceback. So nothing here guesses
from a line's shape: each line is parsed and checked against the fields its operation needs
(`entry_problem`), every entry that passes is kept wherever it is, and a complete entry is never
dropped (a last entry lacking only its newline gets one). Two readers use the same rules:

- `scan` + `recovered`: the whole file before a command appends to it (storage.repair_journal);
- `TolerantJournalBackend`: a live run's own reads and appends, so a line another process tears
  while this one runs is skipped (and named once on stderr) instead of killing the run, and the
  next append starts on a fresh line instead of merging into the fragment.

Stdlib at import; Optuna only when an entry's distribution or state is checked.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterator

__all__ = ["JOURNAL_HEAD", "BOM", "entry_problem", "parse_line", "scan", "Scan", "looks_like_journal",
           "TolerantJournalBackend"]

JOURNAL_HEAD = b'{"op_code":'  # how Optuna writes every entry (compact JSON, op_code first)
BOM = b"\xef\xbb\xbf"

# op_code -> (the id it addresses, the other keys its replay reads unconditionally)
_CREATE_STUDY, _DISCARD_TRIALS = 0, 10
_FIELDS: dict[int, tuple[str | None, tuple[str, ...]]] = {
    0: (None, ("study_name", "directions")),
    1: ("study_id", ()),
    2: ("study_id", ("user_attr",)),
    3: ("study_id", ("system_attr",)),
    4: ("study_id", ("datetime_start",)),
    5: ("trial_id", ("param_name", "param_value_internal", "distribution")),
    6: ("trial_id", ("state", "values")),
    7: ("trial_id", ("step", "intermediate_value")),
    8: ("trial_id", ("user_attr",)),
    9: ("trial_id", ("system_attr",)),
    10: (None, ()),  # DISCARD_TRIALS: replay skips it
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)  # NaN and inf included: Optuna writes them


def _time_problem(v: Any, key: str) -> str | None:
    if not isinstance(v, str):
        return f"{key} is not a time"
    try:
        datetime.fromisoformat(v)
    except ValueError:
        return f"{key} {v[:40]!r} is not a time"
    return None


def _distribution_problem(text: Any, value: Any | None = None) -> str | None:
    # lazy: Optuna only when an entry is checked (module docstring)
    from optuna.distributions import json_to_distribution

    if not isinstance(text, str):
        return "a distribution is not JSON text"
    try:
        dist = json_to_distribution(text)
        if value is not None:
            dist.to_external_repr(value)
    except Exception as e:  # ValueError, KeyError, IndexError: anything replay would raise
        return f"a distribution or its value does not load ({type(e).__name__})"
    return None


def _state_problem(state: Any) -> str | None:
    from optuna.trial import TrialState  # lazy: Optuna only when an entry is checked (module docstring)

    if not _is_int(state):
        return "state is not a number"
    try:
        TrialState(state)
    except ValueError:
        return f"state {state} is not a trial state"
    return None


def _values_problem(values: Any) -> str | None:
    if values is None:
        return None
    if not isinstance(values, list) or not all(_is_number(v) for v in values):
        return "values is not a list of numbers"
    return None


def _one_attr(entry: dict[str, Any], key: str) -> str | None:
    attr = entry[key]
    if not isinstance(attr, dict) or len(attr) != 1:
        return f"{key} is not one name and its value"
    return None


def _create_trial_problem(entry: dict[str, Any]) -> str | None:
    dists = entry.get("distributions", {})
    params = entry.get("params", {})
    if not isinstance(dists, dict) or not isinstance(params, dict):
        return "distributions or params is not a mapping"
    for name, value in params.items():
        if name not in dists:
            return f"param {name[:40]!r} has no distribution"
        if (p := _distribution_problem(dists[name], value)) is not None:
            return p
    for text in dists.values():
        if (p := _distribution_problem(text)) is not None:
            return p
    if entry["datetime_start"] is not None and (p := _time_problem(entry["datetime_start"], "datetime_start")):
        return p
    if "datetime_complete" in entry and (p := _time_problem(entry["datetime_complete"], "datetime_complete")):
        return p
    if "state" in entry and (p := _state_problem(entry["state"])):
        return p
    for key in ("user_attrs", "system_attrs", "intermediate_values"):
        if not isinstance(entry.get(key, {}), dict):
            return f"{key} is not a mapping"
    try:
        [int(k) for k in entry.get("intermediate_values", {})]
    except ValueError:
        return "an intermediate value's step is not a number"
    if entry.get("value") is not None and entry.get("values") is not None:
        return "both value and values are set"
    if entry.get("value") is not None and not _is_number(entry["value"]):
        return "value is not a number"
    return _values_problem(entry.get("values"))


def entry_problem(entry: Any) -> str | None:
    """Why Optuna's replay could not apply `entry` (a parsed line), or None when it can.

    Mirrors JournalStorageReplayResult's `_apply_*` methods field by field: the keys each reads
    unconditionally, their types (an int that is not a bool), states, times and distributions
    that must load. A check too loose lets replay raise later; one too strict drops a good entry,
    so each rule is one replay makes.
    """
    if not isinstance(entry, dict):
        return "not a JSON object"
    op = entry.get("op_code")
    if not _is_int(op) or op not in _FIELDS:
        return f"unknown operation {str(op)[:20]!r}"
    if not isinstance(entry.get("worker_id"), str):
        return "no worker_id"
    id_key, keys = _FIELDS[op]
    if id_key is not None and not _is_int(entry.get(id_key)):
        return f"no {id_key}"
    missing = [k for k in keys if k not in entry]
    if missing:
        return f"missing {', '.join(missing)}"
    if op == _CREATE_STUDY:
        if not isinstance(entry["study_name"], str):
            return "study_name is not text"
        d = entry["directions"]
        if not isinstance(d, list) or not d or not all(_is_int(x) and x in (0, 1, 2) for x in d):
            return "directions is not a list of 0, 1, 2"
        return None
    if op in (2, 3, 8, 9):
        return _one_attr(entry, "user_attr" if op in (2, 8) else "system_attr")
    if op == 4:
        return _create_trial_problem(entry)
    if op == 5:
        if not isinstance(entry["param_name"], str) or not _is_number(entry["param_value_internal"]):
            return "param_name or its value has the wrong type"
        return _distribution_problem(entry["distribution"], entry["param_value_internal"])
    if op == 6:
        if p := _state_problem(entry["state"]):
            return p
        from optuna.trial import TrialState  # lazy: Optuna only when an entry is checked (module docstring)

        state = TrialState(entry["state"])
        if state == TrialState.RUNNING and (p := _time_problem(entry.get("datetime_start"), "datetime_start")):
            return p
        if state.is_finished() and (p := _time_problem(entry.get("datetime_complete"), "datetime_complete")):
            return p
        return _values_problem(entry["values"])
    if op == 7:
        if not _is_int(entry["step"]) or not (entry["intermediate_value"] is None or _is_number(entry["intermediate_value"])):
            return "step or intermediate_value has the wrong type"
    return None


def _load(text: bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, a nest too deep
        return None


@dataclass
class Line:
    """One line of a journal, and what became of it."""

    number: int  # 1-based
    raw: bytes
    entry: dict[str, Any] | None = None  # the entry kept from it
    how: str = "ok"  # ok, bom, unterminated (kept, newline added), salvaged, study (creation rebuilt), torn, broken
    why: str = ""


_STUDY_NAME = re.compile(rb'"study_name"\s*:\s*("(?:[^"\\]|\\.)*")')
_DIRECTIONS = re.compile(rb'"directions"\s*:\s*(\[[0-9,\s]*\])')


def _rebuilt_study(raw: bytes) -> dict[str, Any] | None:
    """A study's creation entry from a damaged line that still names the study and its directions.

    The first line of a journal creates the study; without it replay skips every trial of the
    study. Its two fields are enough to create it again.
    """
    name, dirs = _STUDY_NAME.search(raw), _DIRECTIONS.search(raw)
    if name is None or dirs is None:
        return None
    entry = {"op_code": _CREATE_STUDY, "worker_id": "recovered", "study_name": _load(name[1]),
             "directions": _load(dirs[1])}
    return entry if entry_problem(entry) is None else None


def _without_bom(raw: bytes) -> bytes:
    """`raw` without the byte-order marks before it (an editor may add one more at every save)."""
    text = raw
    while text.startswith(BOM):
        text = text[len(BOM):]
    return text


def parse_line(raw: bytes, number: int = 1) -> Line:
    """One line as the journal readers see it (`raw` with its newline, if it has one)."""
    line = Line(number, raw)
    text = _without_bom(raw)
    if text is not raw:
        line.how = "bom"
    terminated = text.endswith(b"\n")
    entry = _load(text)
    why = entry_problem(entry)
    if why is None:
        line.entry = entry
        if not terminated:
            line.how = "unterminated"
        return line
    if isinstance(entry, dict) and entry.get("op_code") != _CREATE_STUDY and "study_name" in entry:
        rebuilt = _rebuilt_study(text)  # a creation entry whose op_code was damaged
        if rebuilt is not None:
            line.entry, line.how = rebuilt, "study"
            return line
    cut = text.find(JOURNAL_HEAD, 1)  # a torn fragment, then another writer's whole entry
    while cut > 0:
        salvaged = _load(text[cut:])
        if entry_problem(salvaged) is None:
            line.entry, line.how = salvaged, "salvaged"
            return line
        cut = text.find(JOURNAL_HEAD, cut + 1)
    rebuilt = _rebuilt_study(text)
    if rebuilt is not None:
        line.entry, line.how = rebuilt, "study"
        return line
    line.how, line.why = ("broken" if terminated else "torn"), (why or "")
    return line


@dataclass
class Scan:
    """A whole journal, line by line."""

    lines: list[Line] = field(default_factory=list)

    @property
    def kept(self) -> list[dict[str, Any]]:
        return [x.entry for x in self.lines if x.entry is not None]

    @property
    def sound(self) -> bool:
        """Every line an entry, as Optuna wrote it: nothing to rewrite."""
        return all(x.how == "ok" for x in self.lines)

    def numbers(self, *hows: str) -> list[int]:
        return [x.number for x in self.lines if x.how in hows]

    def recovered(self) -> bytes:
        """The journal with every kept entry, one per line, in the order they were written."""
        out = []
        for x in self.lines:
            if x.entry is None:
                continue
            out.append(_without_bom(x.raw).rstrip(b"\n") + b"\n" if x.how in ("ok", "bom", "unterminated")
                       else json.dumps(x.entry, separators=(",", ":")).encode() + b"\n")
        return b"".join(out)

    def summary(self) -> str:
        parts = []
        for how, what in (("bom", "a byte-order mark removed from line(s) {}"),
                          ("unterminated", "a complete last entry given its missing newline (line {})"),
                          ("salvaged", "the whole entry kept after a torn fragment on line(s) {}"),
                          ("study", "the study's creation rebuilt from damaged line(s) {}"),
                          ("broken", "dropped unreadable line(s) {}"), ("torn", "dropped a torn last line (line {})")):
            found = self.numbers(how)
            if found:
                shown = ", ".join(map(str, found[:10])) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
                parts.append(what.format(shown))
        return f"kept {len(self.kept)} of {len(self.lines)} line(s); " + "; ".join(parts)


def _split(data: bytes) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def scan(data: bytes) -> Scan:
    return Scan([parse_line(raw, n) for n, raw in enumerate(_split(data), start=1)])


def looks_like_journal(head: bytes, whole: bool, lines: int = 16) -> bool:
    """Whether a file starting with `head` is an Optuna journal: an entry among its first lines.

    Not only the first line: that is the one a crash or an editor's byte-order mark may have
    damaged. A file with no entry there (notes, a dataset, a database) is someone else's.
    """
    return any(parse_line(raw, n).entry is not None
               for n, raw in zip(range(1, lines + 1), _split(head)) if whole or raw.endswith(b"\n"))


class TolerantJournalBackend:
    """Optuna's journal file backend (JournalFileBackend's format and lock), with this module's reader.

    Optuna's own reader raises on the first line it cannot decode, so a line torn by another
    process while this one runs kills the run. Here a line that yields no entry is skipped and
    named once on stderr; log numbers count entries, not lines, so replay stays in step. An
    append, made under the journal's lock (no writer is mid-line then), first ends a torn last
    line, so the new entry never merges into it.
    """

    def __init__(self, file_path: str) -> None:
        # lazy: Optuna only when an entry is checked (module docstring)
        from optuna.storages.journal import JournalFileSymlinkLock

        self._file_path = file_path
        self._lock = JournalFileSymlinkLock(file_path)
        if not os.path.exists(file_path):
            open(file_path, "ab").close()
        self._offsets: dict[int, int] = {0: 0}  # entry number -> byte offset of the line that holds it
        self._named: set[int] = set()

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        start = max((n for n in self._offsets if n <= log_number_from), default=0)
        with open(self._file_path, "rb") as f:
            size = os.fstat(f.fileno()).st_size  # what another process appends meanwhile waits for the next read
            offset = self._offsets[start]
            f.seek(offset)
            number = start
            for raw in f:
                if offset + len(raw) > size or not raw.endswith(b"\n"):
                    break  # a line being written (or torn, until an append ends it)
                line = parse_line(raw, 0)
                if line.entry is None:
                    if offset not in self._named:
                        self._named.add(offset)
                        print(f"grpo-ablate: {self._file_path}: skipped an unreadable line at byte {offset} "
                              f"(another process died mid-write?); the next command repairs the file",
                              file=sys.stderr)
                    offset += len(raw)
                    continue
                offset += len(raw)
                self._offsets[number + 1] = offset
                if number >= log_number_from:
                    yield line.entry
                number += 1

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        # lazy: Optuna only when an entry is checked (module docstring)
        from optuna.storages.journal._file import get_lock_file

        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode("utf-8")
        with get_lock_file(self._lock):
            with open(self._file_path, "ab") as f:
                size = f.seek(0, os.SEEK_END)
                if size:
                    with open(self._file_path, "rb") as r:
                        r.seek(size - 1)
                        if r.read(1) != b"\n":
                            text = b"\n" + text  # a torn line another writer left: end it first
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
