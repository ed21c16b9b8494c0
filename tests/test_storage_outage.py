"""A finished result survives a storage outage (issue 43): kept on disk until the storage recorded it, recorded by the
next run instead of trained again, and the outage said in one paragraph, not a traceback.

The outage is real: the study's SQLite file is locked for writing (BEGIN IMMEDIATE by another connection) from the
trial's first training step until the run gave up, so the trial trains and finishes and only its recording fails.
With a pruner on (round 5's variant): its reports during the outage fail too, and used to kill the trial mid-way,
so the rerun trained the cell again from scratch; a report that fails now is skipped and the trial trains on.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import optuna
import pytest

from grpo_ablate.storage.store import open_storage
from grpo_ablate.contract import checkpoints
from grpo_ablate.records import trial_record as record
from grpo_ablate.core.vocab import LOG_FILE, METRICS_FILE, RESULT_FILE

EVENT_WAIT_S = 600


@pytest.mark.slow
def test_a_result_finished_during_a_storage_outage_is_kept_and_recorded_by_the_next_run(study_here, tmp_path):
    out, db = tmp_path / "outage", tmp_path / "study.db"
    args = ["run", "studies/tiny-cpu.yaml", "--no-report", "--set", "temperature=1.0", "--set", "study.name=outage",
            "--set", f"study.output_dir={out}", "--set", f"study.storage=sqlite:///{db}", "--set", "study.pruner=median",
            "--set", "num_generations=[2]", "--set", "study.baseline={}", "--set", "study.seeds=[0]",
            "--set", "study.workers=1", "--set", "budget.max_steps=8", "--set", "study.checkpoint_steps=2",
            "--set", "study.grace_period=1"]  # an outage longer than the grace period stops the run (shorter: waited out,
    # tests/test_postgres_faults.py); SQLite's own 5 s busy wait is longer, so this one stops at its first refusal
    first = out / "trials" / "00000"
    locked, done = threading.Event(), threading.Event()

    def lock_when_training() -> None:
        deadline = time.monotonic() + EVENT_WAIT_S
        while not ((first / METRICS_FILE).exists() and (first / METRICS_FILE).read_text().strip()):
            if done.wait(0.05) or time.monotonic() > deadline:
                return
        holder = sqlite3.connect(db, isolation_level=None, timeout=60)
        holder.execute("BEGIN IMMEDIATE")  # no other connection may write until the run has given up
        locked.set()
        done.wait(EVENT_WAIT_S)
        holder.execute("ROLLBACK")
        holder.close()

    locker = threading.Thread(target=lock_when_training, daemon=True)
    locker.start()
    try:
        res = study_here(*args)
    finally:
        done.set()
        locker.join(timeout=120)
    assert locked.is_set(), "the lock came after the run ended: the test proved nothing"
    text = res.stdout + res.stderr
    assert res.returncode != 0, text
    assert "could not record it" in text and "records this trial from its files" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert json.loads((first / RESULT_FILE).read_text())["outcome"] == "completed"
    assert checkpoints.latest(first) is not None  # the last checkpoint stays until the storage recorded the result
    trained = (first / METRICS_FILE).read_text()

    again = study_here(*args)  # the storage is back
    assert again.returncode == 0, again.stdout + again.stderr
    assert "recorded from" in again.stdout + again.stderr
    trials = optuna.load_study(study_name="outage", storage=open_storage(f"sqlite:///{db}")).get_trials()
    assert [record.outcome(t).value for t in trials] == ["interrupted", "completed"]
    retry = out / "trials" / "00001"
    assert (retry / METRICS_FILE).read_text() == trained  # recorded from its files: not trained again
    assert (retry / LOG_FILE).read_text() == (first / LOG_FILE).read_text()  # no trial process wrote to it again
    assert record.recorded_metrics(trials[1], ["steps"])["steps"] == 8
    assert checkpoints.latest(first) is None and checkpoints.latest(retry) is None  # recorded: removed now
