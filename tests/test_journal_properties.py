"""Journal damage as a class, not as instances: generated mutations of a real Optuna journal.

A real study (finished, failed and running trials, params of three distributions, attributes,
intermediate values) is written through Optuna, then damaged the ways a crash, a full disk, a
second writer or an editor damages a file: bit flips, truncations, inserted garbage and torn
fragments, byte-order marks, missing fields, wrong operations, reordered entries, a damaged
first line. The invariants (grpo_ablate/storage/journal.py, storage.repair_journal):

- no traceback: whatever the bytes, opening the storage gives a StudyError or a storage whose
  studies and trials Optuna can list, and the live reader (TolerantJournalBackend) replays it;
- no finished trial lost: when the damage spares the lines that hold a finished trial (its
  creation, params and final state), every finished trial comes back with its state, values
  and params.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import optuna
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_ablate.core.errors import StudyError
from grpo_ablate.storage.journal import BOM, TolerantJournalBackend, entry_problem, parse_line, scan
from grpo_ablate.storage.store import open_storage

_HUNT = int(os.environ.get("GRPO_PROPERTY_EXAMPLES", "0"))
SETTINGS = settings(max_examples=_HUNT or 60, deadline=None, derandomize=not _HUNT,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
ESSENTIAL_OPS = (0, 4, 5, 6)  # what a finished trial is made of: the study, the trial, its params, its state


@functools.lru_cache(maxsize=1)
def base_journal() -> bytes:
    """A real journal written by Optuna: 3 finished trials, 1 failed, 1 running, attrs after them."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.journal"
        storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
        study = optuna.create_study(study_name="s", storage=storage, directions=["maximize"])
        for i in range(5):
            trial = study.ask()
            trial.suggest_int("G", 2, 16, step=2)
            trial.suggest_float("temperature", 0.5, 1.5)
            trial.suggest_categorical("batch", [4, 8, 16])
            trial.set_user_attr("note", f"trial {i}")
            trial.report(0.1 * i, step=1)
            if i < 3:
                study.tell(trial, 0.5 + i)
            elif i == 3:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
        for key in ("a", "b", "c"):  # the last lines: what a truncation may take
            study.set_user_attr(key, key * 30)
        return path.read_bytes()


def finished(trials: list[optuna.trial.FrozenTrial]) -> list[tuple[Any, ...]]:
    return sorted((t.number, t.state, t.values, t.params) for t in trials if t.state.is_finished())


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def essential(line: bytes) -> bool:
    return json.loads(line)["op_code"] in ESSENTIAL_OPS


# ------------------------------------------------------------------ mutations


def _flip(lines: list[bytes], i: int, pos: int, bit: int) -> None:
    body = bytearray(lines[i])
    at = pos % max(1, len(body) - 1)  # not the newline: that is the "inserted line" class
    body[at] ^= 1 << bit
    lines[i] = bytes(body)


def _drop_key(lines: list[bytes], i: int, which: int) -> None:
    entry = json.loads(lines[i])
    keys = [k for k in entry]
    del entry[keys[which % len(keys)]]
    lines[i] = json.dumps(entry, separators=(",", ":")).encode() + b"\n"


_WRONG_OPS: list[Any] = ["8", 99, -1, 4.5, None, True, [2]]


def _wrong_op(lines: list[bytes], i: int, which: int) -> None:
    entry = json.loads(lines[i])
    entry["op_code"] = _WRONG_OPS[which % len(_WRONG_OPS)]
    lines[i] = json.dumps(entry, separators=(",", ":")).encode() + b"\n"


def _insert(lines: list[bytes], at: int, payload: bytes, glued: bool) -> None:
    """A garbage line, or a fragment torn off another line, alone or glued before the next entry."""
    payload = payload.replace(b"\n", b"")
    at %= len(lines) + 1
    if glued and at < len(lines):
        lines[at] = payload + lines[at]
    else:
        lines.insert(at, payload + b"\n")


def _first_line(lines: list[bytes], which: int) -> None:
    """The study's creation line damaged, its name and directions still readable."""
    first = lines[0]
    damage = [
        lambda b: b"\x00\x00" + b,  # garbage before it
        lambda b: b.replace(b'"op_code":0', b'"op_code":8', 1),  # a flipped digit
        lambda b: b.replace(b'"op_code":0', b'"op_code":"0"', 1),  # op_code as a string
        lambda b: b[: b.rindex(b"]") + 1] + b"\n",  # its closing brace lost
        lambda b: b.replace(b'"worker_id"', b'"worker-id"', 1),  # a key damaged
    ]
    lines[0] = damage[which % len(damage)](first)


_editable = st.integers(min_value=0, max_value=10**6)


def mutation(anywhere: bool) -> st.SearchStrategy[tuple[Any, ...]]:
    """One damage; `anywhere`: also on the lines a finished trial is made of."""
    garbage = st.binary(max_size=40) | st.sampled_from([b'{"op_code":', b'{"op_code":6,"worker_id":"w","tri',
                                                        b"\x00" * 8, b"{}", b'{"op_code":4}', b"]]]"])
    return st.one_of(
        st.tuples(st.just("flip"), _editable, _editable, st.integers(0, 7), st.just(anywhere)),
        st.tuples(st.just("drop_key"), _editable, _editable, st.just(anywhere)),
        st.tuples(st.just("wrong_op"), _editable, _editable, st.just(anywhere)),
        st.tuples(st.just("insert"), _editable, garbage, st.booleans()),
        st.tuples(st.just("torn_copy"), _editable, _editable, _editable, st.booleans()),
        st.tuples(st.just("swap"), _editable, st.just(anywhere)),
        st.tuples(st.just("first"), _editable),
        st.just(("bom",)),
    )


def _pick(lines: list[bytes], i: int, anywhere: bool) -> int | None:
    """The `i`-th line (mod) the mutation may touch, None when there is none."""
    allowed = [n for n, line in enumerate(lines) if n > 0 and (anywhere or not _is_essential(line))]
    return allowed[i % len(allowed)] if allowed else None


def _is_essential(line: bytes) -> bool:
    line = line.removeprefix(BOM)
    parsed = parse_line(line)
    return parsed.entry is not None and parsed.entry["op_code"] in ESSENTIAL_OPS


def apply(data: bytes, mutations: list[tuple[Any, ...]], tail_cut: int, newline: bool) -> bytes:
    lines = lines_of(data)
    for m in mutations:
        kind = m[0]
        if kind == "flip" and (i := _pick(lines, m[1], m[4])) is not None:
            _flip(lines, i, m[2], m[3])
        elif kind in ("drop_key", "wrong_op") and (i := _pick(lines, m[1], m[3])) is not None:
            if parse_line(lines[i]).entry is not None:
                (_drop_key if kind == "drop_key" else _wrong_op)(lines, i, m[2])
        elif kind == "insert":
            _insert(lines, m[1], m[2], m[3])
        elif kind == "torn_copy":  # a fragment of a real line: what a writer killed mid-line leaves
            source = lines[m[1] % len(lines)]
            _insert(lines, m[2], source[: 1 + m[3] % max(1, len(source) - 2)], m[4])
        elif kind == "swap" and (i := _pick(lines, m[1], m[2])) is not None and i + 1 < len(lines):
            if m[2] or not _is_essential(lines[i + 1]):
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif kind == "first":
            _first_line(lines, m[1])
        elif kind == "bom":
            lines[0] = BOM + lines[0]
    out = b"".join(lines)
    last = lines[-1] if lines else b""
    if tail_cut and not _is_essential(last):
        out = out[: len(out) - min(tail_cut, len(last) - 1)]  # a torn last line, never the whole line
    if not newline and out.endswith(b"\n"):
        out = out[:-1]  # a complete last entry lacking only its newline
    return out


def _open_and_list(path: Path) -> list[optuna.trial.FrozenTrial] | None:
    """What a command sees: None for a refusal (StudyError), else every trial of study "s"."""
    try:
        storage = open_storage(str(path))
    except StudyError:
        return None
    trials: list[optuna.trial.FrozenTrial] = []
    for s in storage.get_all_studies():
        found = storage.get_all_trials(s._study_id, deepcopy=False)
        if s.study_name == "s":
            trials = found
    return trials


def _live_replay(path: Path) -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.JournalStorage(TolerantJournalBackend(str(path)))
    out: list[optuna.trial.FrozenTrial] = []
    for s in storage.get_all_studies():
        out += storage.get_all_trials(s._study_id, deepcopy=False)
    return out


# ------------------------------------------------------------------ the properties


@SETTINGS
@given(mutations=st.lists(mutation(anywhere=False), max_size=4), tail_cut=st.integers(0, 60), newline=st.booleans())
def test_no_finished_trial_is_lost(mutations, tail_cut, newline, capsys):
    base = base_journal()
    expected = finished(_live_replay_bytes(base))
    damaged = apply(base, mutations, tail_cut, newline)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "study.journal"
        path.write_bytes(damaged)
        trials = _open_and_list(path)
        assert trials is not None, capsys.readouterr().err
        assert finished(trials) == expected, (damaged, capsys.readouterr().err)
        if damaged != base:  # repaired once, sound after: a second open changes nothing
            before = path.read_bytes()
            assert scan(before).sound
            _open_and_list(path)
            assert path.read_bytes() == before


@SETTINGS
@given(mutations=st.lists(mutation(anywhere=True), min_size=1, max_size=5), tail_cut=st.integers(0, 200),
       newline=st.booleans())
def test_any_damage_is_repaired_or_refused_never_a_traceback(mutations, tail_cut, newline):
    damaged = apply(base_journal(), mutations, tail_cut, newline)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "study.journal"
        path.write_bytes(damaged)
        _live_replay(path)  # a live run reading it as it is: no exception
        if _open_and_list(path) is None:
            assert path.read_bytes() == damaged  # refused: untouched


def _live_replay_bytes(data: bytes) -> list[optuna.trial.FrozenTrial]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.journal"
        path.write_bytes(data)
        return _live_replay(path)


@SETTINGS
@given(entry=st.dictionaries(st.sampled_from(["op_code", "worker_id", "study_id", "trial_id", "study_name",
                                                "directions", "state", "values", "user_attr", "system_attr",
                                                "datetime_start", "datetime_complete", "step",
                                                "intermediate_value", "param_name", "param_value_internal",
                                                "distribution", "distributions", "params"]),
                             st.none() | st.booleans() | st.integers(-3, 12) | st.floats() | st.text(max_size=8)
                             | st.lists(st.integers(-1, 3), max_size=2)
                             | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), max_size=8))
def test_an_entry_that_passes_is_one_optuna_replays(entry):
    """The checker against Optuna's own replay: what passes applies without an exception."""
    from optuna.storages.journal._storage import JournalStorageReplayResult

    if entry_problem(entry) is not None:
        return
    replay = JournalStorageReplayResult("other-")
    study = {"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [2]}
    trial = {"op_code": 4, "worker_id": "w", "study_id": 0, "datetime_start": None}
    replay.apply_logs([study, trial, entry])


def test_a_final_entry_without_its_newline_is_kept(tmp_path, capsys):
    base = base_journal()
    path = tmp_path / "study.journal"
    path.write_bytes(base[:-1])
    trials = _open_and_list(path)
    assert trials is not None and path.read_bytes() == base
    assert "missing newline" in capsys.readouterr().err


@pytest.mark.parametrize("which", range(5))
def test_a_damaged_first_line_is_rebuilt(tmp_path, which):
    lines = lines_of(base_journal())
    _first_line(lines, which)
    path = tmp_path / "study.journal"
    path.write_bytes(BOM + b"".join(lines))
    trials = _open_and_list(path)
    assert trials is not None and finished(trials) == finished(_live_replay_bytes(base_journal()))
