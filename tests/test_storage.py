"""Storages from URLs: journal file (default, repaired when torn), a real PostgreSQL server with heartbeats,
and the one-line refusal of a storage that cannot be opened."""

from __future__ import annotations

import os
import time

import optuna
import pytest

from helpers import fill_disk, free_port, run_cli, tmpfs
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


# ------------------------------------------------------------------ a torn journal (issue 9, B1)


def _journal_with_trials(path, n: int = 3) -> None:
    study = optuna.create_study(study_name="s", storage=open_storage(str(path)))
    for i in range(n):
        study.enqueue_trial({"x": i})


def test_torn_last_line_is_cut_with_a_backup_and_the_journal_works_again(tmp_path, capsys):
    path = tmp_path / "study.journal"
    _journal_with_trials(path)
    whole = path.read_bytes()
    os.truncate(path, len(whole) - 7)  # a crash mid-write: the last line lost its end
    torn = path.read_bytes()

    storage = open_storage(str(path))
    err = capsys.readouterr().err
    assert "torn line" in err and ".bak-" in err
    (backup,) = tmp_path.glob("study.journal.bak-*")
    assert backup.read_bytes() == torn  # the original, byte for byte
    assert path.read_bytes().endswith(b"\n") and whole.startswith(path.read_bytes())
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.params for t in study.get_trials()] == [{}, {}]  # the torn third trial is gone
    study.enqueue_trial({"x": 9})  # appending is safe again, and every reader can parse the file
    fresh = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    assert len(fresh.get_trials()) == 3
    assert "torn" not in capsys.readouterr().err  # a sound journal is left alone


def test_a_complete_but_garbled_last_line_is_cut_too(tmp_path, capsys):
    path = tmp_path / "study.journal"
    _journal_with_trials(path, 1)
    with path.open("ab") as f:
        f.write(b'{"op_code": 4, "worker_id": "x", "tri\x00\x00\n')
    study = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    study.enqueue_trial({"x": 2})
    assert len(optuna.load_study(study_name="s", storage=open_storage(str(path))).get_trials()) == 2
    assert "torn line" in capsys.readouterr().err


def test_a_torn_journal_on_a_full_disk_is_left_alone_with_instructions(tmp_path):
    """No room for the backup: nothing is cut, and the error says how to repair it by hand."""
    from grpo_ablate.config import StudyError

    disk = tmp_path / "disk"
    with tmpfs(disk, "64k"):
        path = disk / "study.journal"
        _journal_with_trials(path)
        os.truncate(path, path.stat().st_size - 5)
        torn = path.read_bytes()
        fill_disk(disk)
        with pytest.raises(StudyError) as info:
            open_storage(str(path))
        message = str(info.value)
        assert "\n" not in message and "torn line" in message and "truncate -s" in message
        assert path.read_bytes() == torn  # never made worse
        assert not list(disk.glob("study.journal.bak-*"))


# ------------------------------------------------------------------ a storage that cannot be opened


def test_run_with_an_unreachable_database_is_one_line_and_exit_2(tmp_path):
    port = free_port()  # nothing listens there
    url = f"postgresql://grpo:s3cret@127.0.0.1:{port}/nowhere"
    res = run_cli("run", "studies/tiny-cpu.yaml", "--storage", url, "--set", "study.name=unreachable",
                  "--set", f"study.output_dir={tmp_path / 'out'}", "--no-report", timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot open the storage" in lines[0], res.stderr
    assert "Traceback" not in res.stderr and "s3cret" not in res.stdout + res.stderr
    assert "grpo:***@127.0.0.1" in lines[0]


def test_a_journal_in_a_folder_that_is_a_file_is_one_line(tmp_path):
    from grpo_ablate.config import StudyError

    (tmp_path / "afile").write_text("x")
    with pytest.raises(StudyError) as info:
        open_storage(str(tmp_path / "afile" / "study.journal"))
    assert "\n" not in str(info.value) and "cannot open the storage" in str(info.value)
