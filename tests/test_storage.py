"""Storages from URLs: journal file (default, repaired when torn), a real PostgreSQL server with heartbeats,
and the one-line refusal of a storage that cannot be opened."""

from __future__ import annotations

import os
import subprocess
import time

import optuna
import pytest

from helpers import cli_inprocess, fail_when_stale, fill_disk, free_port, run_cli, tmpfs
from grpo_ablate.storage.store import is_rdb_url, normalize_url, open_storage


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
    from grpo_ablate.study.ledger import StaleTrialRequeue

    storage = open_storage(fresh_pg_db, heartbeat_interval=1, grace_period=2, stale_trial_callback=StaleTrialRequeue(1))
    study = optuna.create_study(study_name="hb", storage=storage)
    space = {"g": optuna.distributions.CategoricalDistribution([2, 4])}
    trial = study.ask(space)
    storage.record_heartbeat(trial._trial_id)
    fail_when_stale(study, trial.number)  # the worker "died": no heartbeat within the grace period
    states = [t.state for t in study.get_trials()]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    retry = study.ask(space)  # the next free worker takes the queued retry first
    assert retry.number == 1 and retry.params == trial.params  # same settings, run again


@pytest.mark.slow
def test_workers_starting_together_create_the_tables_once(fresh_pg_db):
    """Several hosts opening a new database at the same moment: every one gets a working storage."""
    import subprocess
    import sys

    code = ("import sys; from grpo_ablate.storage.store import open_storage; "
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
    assert "torn last line" in err and ".corrupt-" in err
    (backup,) = tmp_path.glob("study.journal.corrupt-*")
    assert backup.read_bytes() == torn  # the original, byte for byte
    assert path.read_bytes().endswith(b"\n") and whole.startswith(path.read_bytes())
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.params for t in study.get_trials()] == [{}, {}]  # the torn third trial is gone
    study.enqueue_trial({"x": 9})  # appending is safe again, and every reader can parse the file
    fresh = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    assert len(fresh.get_trials()) == 3
    assert "damaged" not in capsys.readouterr().err  # a sound journal is left alone


def test_a_complete_but_garbled_last_line_is_cut_too(tmp_path, capsys):
    path = tmp_path / "study.journal"
    _journal_with_trials(path, 1)
    with path.open("ab") as f:
        f.write(b'{"op_code": 4, "worker_id": "x", "tri\x00\x00\n')
    study = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    study.enqueue_trial({"x": 2})
    assert len(optuna.load_study(study_name="s", storage=open_storage(str(path))).get_trials()) == 2
    assert "dropped unreadable line(s) 3" in capsys.readouterr().err


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
        assert "\n" not in message and "torn last line" in message and "free some space" in message
        assert path.read_bytes() == torn  # never made worse
        assert not list(disk.glob("study.journal.corrupt-*"))


# ------------------------------------------------------------------ a storage that cannot be opened


def test_run_with_an_unreachable_database_is_one_line_and_exit_2(tmp_path):
    port = free_port()  # nothing listens there
    url = f"postgresql://grpo:s3cret@127.0.0.1:{port}/nowhere"
    res = cli_inprocess("run", "studies/tiny-cpu.yaml", "--storage", url, "--set", "study.name=unreachable",
                        "--set", f"study.output_dir={tmp_path / 'out'}", "--no-report")
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


# ------------------------------------------------------------------ foreign files and a torn line mid-file (issue 23)


def test_a_file_that_is_not_a_journal_is_refused_and_left_untouched(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes\nline two, no newline at the end")  # a "torn last line" to the old repair
    before = notes.read_bytes()
    res = cli_inprocess("run", "studies/tiny-cpu.yaml", "--storage", str(notes), "--set", "study.name=foreign",
                        "--set", f"study.output_dir={tmp_path / 'out'}", "--no-report")
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not an Optuna journal" in lines[0] and str(notes) in lines[0], res.stderr
    assert notes.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "out") == ["notes.txt"]  # no backup, no lock


@pytest.mark.parametrize("content", [b"{}\n", b'{"op_code": "x"}\n', b"[1, 2]\n", b"\x00\x01binary"])
def test_json_that_is_not_a_journal_is_refused(tmp_path, content):
    from grpo_ablate.config import StudyError

    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    with pytest.raises(StudyError, match="not an Optuna journal"):
        open_storage(str(path))
    assert path.read_bytes() == content


def test_a_sqlite_url_onto_a_file_that_is_not_a_database_is_refused(tmp_path):
    from grpo_ablate.config import StudyError

    path = tmp_path / "notes.db"
    path.write_bytes(b"not a database\n")
    with pytest.raises(StudyError, match="not an SQLite database"):
        open_storage(f"sqlite:///{path}")
    assert path.read_bytes() == b"not a database\n"
    real = tmp_path / "real.db"
    optuna.create_study(study_name="s", storage=open_storage(f"sqlite:///{real}"))
    assert optuna.load_study(study_name="s", storage=open_storage(f"sqlite:///{real}"))  # a real one opens


_TEAR = """
import os, sys
path, keep = sys.argv[1], int(sys.argv[2])
line = b'{"op_code":8,"worker_id":"crashed","trial_id":0,"user_attr":{"note":"' + b"x" * 200 + b'"}}\\n'
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
os.write(fd, line[:keep])  # the write got this far...
os.kill(os.getpid(), 9)  # ...when the process died
"""

_LIVE = """
import sys, optuna
from grpo_ablate.storage.store import open_storage
study = optuna.load_study(study_name="s", storage=open_storage(sys.argv[1]))  # opened while the journal was sound
print("ready", flush=True)
sys.stdin.readline()  # the other writer dies mid-line meanwhile
study.enqueue_trial({"x": 42})  # appends right after the torn fragment
print(len(study.get_trials()), flush=True)  # and reads the file back past it
"""


def test_a_torn_line_buried_mid_file_is_recovered_with_the_original_kept(tmp_path, capsys):
    """A writer killed mid-line, then a live process appending after it: the file is readable again."""
    import signal
    import sys

    from helpers import cli_env

    path = tmp_path / "study.journal"
    _journal_with_trials(path, 2)
    lines_before = path.read_bytes().count(b"\n")
    live = subprocess.Popen([sys.executable, "-c", _LIVE, str(path)], env=cli_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert live.stdout.readline().strip() == "ready"
    tear = subprocess.run([sys.executable, "-c", _TEAR, str(path), "40"], env=cli_env())
    assert tear.returncode == -signal.SIGKILL
    out, err = live.communicate("go\n", timeout=120)
    assert live.returncode == 0 and out.strip() == "3", err  # it ended the fragment's line before appending, read past it
    with path.open("ab") as f:  # and some more history after it
        f.write(b'{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":{"after":1}}\n')
    damaged = path.read_bytes()
    with pytest.raises(ValueError):  # what every command died of before
        optuna.load_study(study_name="s", storage=optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(path)))).get_trials()

    study = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    err = capsys.readouterr().err
    broken = lines_before + 1
    assert f"dropped unreadable line(s) {broken};" in err and ".corrupt-" in err, err  # the fragment, on its own line
    (backup,) = tmp_path.glob("study.journal.corrupt-*")
    assert backup.read_bytes() == damaged  # the original, byte for byte
    trials = study.get_trials()
    assert [t.params for t in trials] == [{}, {}, {}]  # nothing but the torn fragment is lost
    assert trials[2].system_attrs["fixed_params"] == {"x": 42}  # the live process's entry survived
    assert trials[0].user_attrs == {"after": 1}
    study.enqueue_trial({"x": 7})  # and it appends cleanly
    assert len(optuna.load_study(study_name="s", storage=open_storage(str(path))).get_trials()) == 4
    assert "damaged" not in capsys.readouterr().err


def test_a_garbage_line_mid_file_is_dropped_and_named(tmp_path, capsys):
    path = tmp_path / "study.journal"
    _journal_with_trials(path, 1)
    with path.open("ab") as f:
        f.write(b"\x00\x00\x00 disk garbage\n")
    with path.open("ab") as f:
        f.write(b'{"op_code":2,"worker_id":"w","study_id":0,"user_attr":{"after":1}}\n')
    study = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    err = capsys.readouterr().err
    assert "dropped unreadable line(s) 3;" in err, err
    assert study.user_attrs == {"after": 1} and len(study.get_trials()) == 1


def test_a_report_on_a_journal_broken_mid_file_works(tmp_path):
    """The command a user runs next: no JSONDecodeError traceback, one note on stderr."""
    out = tmp_path / "out"
    out.mkdir()
    path = out / "study.journal"
    study = optuna.create_study(study_name="broken-mid", storage=open_storage(str(path)), directions=["maximize"])
    study.enqueue_trial({"x": 1})
    with path.open("ab") as f:
        f.write(b'{"op_code":5,"worker_id":"w","tri{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":{"a":1}}\n')
        f.write(b'{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":{"b":2}}\n')
    res = run_cli("report", "studies/tiny-cpu.yaml", "--set", "study.name=broken-mid",
                  "--set", f"study.output_dir={out}", timeout=300)
    assert "Traceback" not in res.stderr and "JSONDecodeError" not in res.stderr, res.stderr
    assert "corrupt-" in res.stderr
    assert len(list(out.glob("study.journal.corrupt-*"))) == 1


def test_optuna_info_lines_are_silenced_and_its_warnings_kept(tmp_path, caplog):
    """Concurrent runs each queue the plan: Optuna's "Skipping enqueue." INFO line is noise (issue 23)."""
    for url in (str(tmp_path / "j.journal"), f"sqlite:///{tmp_path / 'db.sqlite'}"):
        optuna.logging.set_verbosity(optuna.logging.INFO)  # whatever was set before
        optuna.logging.get_logger("optuna.study.study").info("an info line before")
        assert "an info line before" in caplog.text  # the check below could see one
        study = optuna.create_study(study_name="s", storage=open_storage(url))
        for _ in range(2):
            study.enqueue_trial({"x": 1}, skip_if_exists=True)
        optuna.logging.get_logger("optuna.study.study").warning("a warning that matters")
        assert "Skipping enqueue" not in caplog.text and "a warning that matters" in caplog.text, (url, caplog.text)
        caplog.clear()


@pytest.mark.slow
@pytest.mark.usefixtures("addition_model")  # its deadline times a trial's start, not the model's first build
def test_a_live_run_survives_a_line_torn_by_another_process(tmp_path, capsys):
    """A real `run`, a real second writer killed mid-line while the trial trains: the run finishes
    (its appends end the torn line, its reads skip it) and the next command repairs the file."""
    import signal
    import sys

    from helpers import ROOT, cli_env

    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "grpo_ablate", "run", "studies/tiny-cpu.yaml", "--set", "study.name=live",
         "--set", f"study.output_dir={out}", "--set", "num_generations=[4]", "--set", "study.baseline={num_generations: 4}",
         "--set", "study.seeds=[0]", "--set", "budget.max_steps=2", "--no-report"],
        cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = out / "trials" / "00000" / "metrics.jsonl"
        deadline = time.monotonic() + 600  # the event: the trial has logged its first step
        while not (metrics.is_file() and metrics.read_text().strip()) and run.poll() is None:
            assert time.monotonic() < deadline, "the trial never logged a step"
            time.sleep(0.5)
        assert run.poll() is None, run.communicate()
        tear = subprocess.run([sys.executable, "-c", _TEAR, str(out / "study.journal"), "40"], env=cli_env())
        assert tear.returncode == -signal.SIGKILL
        stdout, stderr = run.communicate(timeout=900)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0 and "Traceback" not in stderr, stdout + stderr
    study = optuna.load_study(study_name="live", storage=open_storage(str(out / "study.journal")))
    assert "was damaged" in capsys.readouterr().err  # the next command names the fragment and drops it
    states = [t.state for t in study.get_trials()]
    assert states and set(states) == {optuna.trial.TrialState.COMPLETE}, states  # every planned trial finished
