"""A fault of the machine is known by its type and errno through the exception chain, never by message text (issue 43).

The full disk is real (a tmpfs filled up, where root may mount one): safetensors' own writer fails there with a
Rust error that carries no errno, and the trial process still knows it as a full disk (by a write probe's errno).
"""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys

import pytest
from helpers import fill_disk, tmpfs

from grpo_ablate.core.errors import exception_chain, machine_fault, write_probe
from grpo_ablate.trainer.worker import classify_exception
from grpo_ablate.core.vocab import Outcome


def _raised(make):
    try:
        make()
    except BaseException as e:  # noqa: BLE001 - the test builds chains
        return e
    raise AssertionError("nothing raised")


def _cause(inner: BaseException, outer: BaseException) -> BaseException:
    def make():
        raise outer from inner
    return _raised(make)


def _context(inner: BaseException, outer: BaseException) -> BaseException:
    def make():
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 - the implicit context is what is under test
    return _raised(make)


@pytest.mark.parametrize("code,name", [(errno.ENOSPC, "ENOSPC"), (errno.EIO, "EIO"), (errno.EROFS, "EROFS"),
                                       (errno.EDQUOT, "EDQUOT")])
def test_a_storage_errno_is_found_anywhere_in_the_chain(code, name):
    disk = OSError(code, "whatever the library says")
    for exc in (disk, _cause(disk, RuntimeError("saving failed")), _context(disk, ValueError("cleanup failed")),
                _cause(_cause(disk, KeyError("k")), RuntimeError("outer"))):
        found = machine_fault(exc)
        assert found is not None and found.startswith(name), (exc, found)
    if sys.version_info >= (3, 11):
        group = ExceptionGroup("two", [ValueError("x"), _cause(disk, RuntimeError("y"))])  # noqa: F821
        assert machine_fault(group).startswith(name)


def test_words_are_not_evidence_and_other_errnos_are_the_cells():
    assert machine_fault(RuntimeError("[Errno 28] No space left on device")) is None
    assert machine_fault(RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")) is None
    assert machine_fault(FileNotFoundError(errno.ENOENT, "no such file")) is None  # a wrong path is the study's
    assert machine_fault(PermissionError(errno.EACCES, "denied")) is None
    loop = RuntimeError("a")
    loop.__context__ = RuntimeError("b")
    loop.__context__.__context__ = loop  # a cycle ends
    assert [type(e) for e in exception_chain(loop)] == [RuntimeError, RuntimeError]


def test_a_locked_or_gone_study_storage_is_a_storage_fault(tmp_path):
    db = tmp_path / "s.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        other = sqlite3.connect(db, timeout=0.1)
        locked = _raised(lambda: other.execute("INSERT INTO t VALUES (1)"))
        other.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert isinstance(locked, sqlite3.OperationalError)
    found = machine_fault(_cause(locked, RuntimeError("optuna could not write")))
    assert found is not None and "SQLite" in found


def test_a_trial_process_error_on_a_full_disk_is_interrupted_not_failed(tmp_path):
    disk = tmp_path / "disk"
    with tmpfs(disk, "1m"):
        fill_disk(disk)
        probed = write_probe(disk)
        assert probed is not None and probed.errno == errno.ENOSPC  # the disk's own answer
        assert not list(disk.glob(".grpo-ablate-write-probe-*"))  # the probe cleans up after itself

        import torch
        from safetensors.torch import save_file

        lost_errno = _raised(lambda: save_file({"w": torch.zeros(256, 256)}, str(disk / "model.safetensors")))
        assert machine_fault(lost_errno) is None  # safetensors' error carries no errno: only the probe can tell
        outcome, reason = classify_exception(_cause(lost_errno, RuntimeError("checkpoint failed")), disk)
        assert outcome is Outcome.INTERRUPTED and "ENOSPC" in reason, reason

        outcome, reason = classify_exception(OSError(errno.ENOSPC, "No space left on device"))
        assert outcome is Outcome.INTERRUPTED and "disk full" in reason
        (disk / "filler").unlink()
        assert write_probe(disk) is None
        assert classify_exception(ValueError("a bug in a reward"), disk)[0] is Outcome.FAILED  # room again: the cell's fault


@pytest.mark.slow
def test_a_full_disk_while_a_checkpoint_is_written_is_retried_and_a_rerun_after_freeing_space_trains_the_cell(
        tmp_path, study_here):
    """Round 5's variant of round 4's class: the trial's folder on a real tmpfs with room for the trial's files but not
    for its first checkpoint's weights (safetensors' error carries no errno; a 64 KB probe fitted, so the cell failed
    for good). The probe now asks for the weights' size: interrupted, retried until the retries are spent; a rerun
    once the disk has room queues the cell again and trains it."""
    import optuna

    from grpo_ablate.records import trial_record as record
    from grpo_ablate.storage.store import open_storage

    disk, journal = tmp_path / "disk", tmp_path / "study.journal"
    args = ["run", "studies/tiny-cpu.yaml", "--no-report", "--set", "temperature=1.0", "--set", "study.name=full",
            "--set", f"study.output_dir={disk / 'out'}", "--set", f"study.storage={journal}", "--set", "num_generations=[2]",
            "--set", "study.baseline={}", "--set", "study.seeds=[0]", "--set", "study.workers=1",
            "--set", "budget.max_steps=8", "--set", "study.checkpoint_steps=2", "--set", "study.max_retry=1",
            "--set", "trainer.per_device_train_batch_size=8", "--set", "data.num_prompts=200"]
    with tmpfs(disk, "2000k"):
        first = study_here(*args)
        trials = optuna.load_study(study_name="full", storage=open_storage(str(journal))).get_trials()
        outcomes = [record.outcome(t).value for t in trials]
        assert outcomes == ["interrupted", "failed"] and record.faulted_out(trials[-1]), (outcomes, first.stdout[-3000:])
        assert "ENOSPC" in (record.reason(trials[-1]) or ""), record.reason(trials[-1])
        assert first.returncode == 1
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)  # space freed
        again = study_here(*args)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "whose retries were all spent on faults of the machine" in again.stdout
        trials = optuna.load_study(study_name="full", storage=open_storage(str(journal))).get_trials()
        assert [record.outcome(t).value for t in trials] == ["interrupted", "failed", "completed"]
