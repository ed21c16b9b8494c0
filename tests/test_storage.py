"""Storages from URLs: journal file (default), SQLite, and a real PostgreSQL server with heartbeats."""

from __future__ import annotations

import time

import optuna
import pytest

from grpo_ablate.storage import is_rdb_url, normalize_url, open_storage


def test_url_kinds():
    assert is_rdb_url("postgresql://u@h/db") and is_rdb_url("sqlite:///x.db") and is_rdb_url("postgresql+psycopg://h/d")
    assert not is_rdb_url("runs/x/study.journal")
    assert normalize_url("postgres://u@h/db").startswith("postgresql")


def test_journal_file_is_shared_by_two_handles(tmp_path):
    path = str(tmp_path / "deep" / "study.journal")
    a = optuna.create_study(study_name="s", storage=open_storage(path))
    a.enqueue_trial({"x": 1})
    b = optuna.load_study(study_name="s", storage=open_storage(path))
    assert len(b.get_trials()) == 1


@pytest.mark.slow
def test_postgres_heartbeat_fails_and_retries_a_silent_trial(fresh_pg_db):
    storage = open_storage(fresh_pg_db, heartbeat_interval=1, grace_period=2, max_retry=1)
    study = optuna.create_study(study_name="hb", storage=storage)
    trial = study.ask({"g": optuna.distributions.CategoricalDistribution([2, 4])})
    storage.record_heartbeat(trial._trial_id)
    time.sleep(3)  # the worker "died": no heartbeat within the grace period
    optuna.storages.fail_stale_trials(study)
    states = [t.state for t in study.get_trials()]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    retry = study.get_trials()[1]
    assert retry.params == trial.params  # same settings, run again by the next free worker


@pytest.mark.slow
def test_workers_starting_together_create_the_tables_once(fresh_pg_db):
    """Several hosts opening a new database at the same moment: every one gets a working storage."""
    import subprocess
    import sys

    code = ("import sys; from grpo_ablate.storage import open_storage; "
            "open_storage(sys.argv[1], heartbeat_interval=5); print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code, fresh_pg_db], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err[-500:] for _, err in results]
