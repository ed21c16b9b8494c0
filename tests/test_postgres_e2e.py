"""Many workers, one study, a real PostgreSQL server: nothing lost, nothing duplicated, dead workers' trials retried.

Each worker is a separate `grpo-ablate run` process (as on separate hosts), running real GRPO
trials of the tiny offline model. Also: the storage password is masked wherever it is shown or
stored, and a database that does not exist is refused in one line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import psutil
import pytest

from helpers import ROOT, cli_env, free_port
from grpo_ablate.storage.store import open_storage
from grpo_ablate.study import ledger
from grpo_ablate.core.vocab import Outcome
from grpo_ablate.records import trial_record as record

pytestmark = pytest.mark.slow


def _args(tmp: Path, name: str, url: str, steps: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grpo_ablate", "run", "studies/tiny-cpu.yaml", "--no-report", "--storage", url,
            "--set", f"study.name={name}", "--set", f"study.output_dir={tmp / name}", "--set", f"budget.max_steps={steps}",
            "--set", "study.workers=1", "--set", "study.heartbeat_interval=1", "--set", "study.grace_period=4",
            "--set", "temperature=1.0", *extra]


def _cells(study: optuna.Study) -> Counter:
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    return Counter((record.arm_of(t).num_generations, record.seed_of(t)) for t in done)


def test_two_workers_share_an_ablation_without_duplicates(tmp_path, fresh_pg_db):
    cmd = _args(tmp_path, "pg2", fresh_pg_db, 2, "--set", "num_generations=[2, 4]", "--set", "study.seeds=[0, 1]",
                "--set", "study.baseline={num_generations: 2}")
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=cli_env(OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    study = optuna.load_study(study_name="pg2", storage=open_storage(fresh_pg_db))
    assert _cells(study) == Counter({(2, 0): 1, (4, 0): 1, (2, 1): 1, (4, 1): 1})
    assert len(study.get_trials(deepcopy=False)) == 4  # no stray trials either
    ran = [out.count("] completed") for out, _ in outs]
    assert all(n >= 1 for n in ran) and sum(ran) == 4, ran  # both workers took part


def test_killed_worker_trial_is_retried_with_same_params(tmp_path, fresh_pg_db):
    base = ["--set", "num_generations=[2]", "--set", "study.seeds=[0, 1]", "--set", "study.baseline={}"]
    victim = subprocess.Popen(_args(tmp_path, "pgkill", fresh_pg_db, 200, *base), cwd=ROOT, env=cli_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    metrics = tmp_path / "pgkill" / "trials" / "00000" / "metrics.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
        time.sleep(0.5)
    assert metrics.exists(), "the victim never started training"
    # the host dies: orchestrator and its trial process, no chance to clean up
    tree = [victim.pid] + [c.pid for c in psutil.Process(victim.pid).children(recursive=True)]
    for pid in tree:
        try:
            psutil.Process(pid).send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    victim.wait(timeout=30)

    # another host: only the heartbeat (not the local dead-pid check) can notice the dead trial
    survivor = subprocess.run(_args(tmp_path, "pgkill", fresh_pg_db, 2, *base), cwd=ROOT,
                              env=cli_env(GRPO_ABLATE_HOST="survivor-host"),
                              capture_output=True, text=True, timeout=600)
    assert survivor.returncode == 0, survivor.stdout + survivor.stderr
    study = optuna.load_study(study_name="pgkill", storage=open_storage(fresh_pg_db))
    trials = study.get_trials(deepcopy=False)
    dead = trials[0]
    assert dead.state == optuna.trial.TrialState.FAIL
    # the same cell (arm and seed): seeds are replicates, not params, so the cell attr names it
    retried = [t for t in trials if t.number != 0 and record.cell_key(t) == record.cell_key(dead)]
    assert len(retried) == 1 and retried[0].state == optuna.trial.TrialState.COMPLETE
    assert _cells(study) == Counter({(2, 0): 1, (2, 1): 1})
    # the ledger's requeue ran as the stale-trial callback: interrupted, with the reason, never "failed, no reason"
    assert ledger.outcome(dead) is Outcome.INTERRUPTED and "heartbeat went stale" in (ledger.reason(dead) or "")
    assert record.retry_of(retried[0]) == dead.number


def test_the_password_is_never_shown_or_stored(study_here, tmp_path, fresh_pg_db):
    """stdout, the study's `config` attribute and `dashboard` show the URL with *** (issue 9, B3), the
    userinfo password and a secret in the query string alike (issue 23, item 5). The run is in this
    process (study_here): what it prints is what the command prints."""
    url = fresh_pg_db.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")  # trust auth: accepted
    url += "?sslpassword=q-s3cret"  # libpq takes it (it unlocks an SSL key; none is used here)
    res = study_here(*_args(tmp_path, "pgpw", url, 2, "--set", "num_generations=[2]", "--set", "study.baseline={}",
                            "--set", "study.seeds=[0]")[3:])  # less `python -m grpo_ablate`
    assert res.returncode == 0, res.stdout + res.stderr
    assert "s3cret" not in res.stdout + res.stderr and "postgres:***@" in res.stdout
    assert "sslpassword=***" in res.stdout
    study = optuna.load_study(study_name="pgpw", storage=open_storage(fresh_pg_db))
    stored = json.dumps(record.stored_attrs(study))
    assert "s3cret" not in stored and "postgres:***@" in record.study_attrs(study).config["study"]["storage"]

    from grpo_ablate.commands.cli import main  # the report, in this process: the page and its exports

    assert main(["report", str(ROOT / "studies/tiny-cpu.yaml"), "--storage", url, "--set", "study.name=pgpw",
                 "--set", f"study.output_dir={tmp_path / 'pgpw'}"]) == 0
    html = (tmp_path / "pgpw" / "report.html").read_text(encoding="utf-8")
    assert "s3cret" not in html and "sslpassword=***" in html
    assert "s3cret" not in (tmp_path / "pgpw" / "summary.json").read_text(encoding="utf-8")

    port = free_port()
    dash = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "dashboard", "studies/tiny-cpu.yaml", "--storage", url,
                             "--set", "study.name=pgpw", "--set", f"study.output_dir={tmp_path / 'pgpw'}",
                             "--port", str(port)], cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        line = dash.stdout.readline()
    finally:
        dash.terminate()
        rest = dash.communicate(timeout=30)[0]
    assert "optuna-dashboard for study 'pgpw'" in line and "postgres:***@" in line, line + rest
    assert "s3cret" not in line + rest and "sslpassword=***" in line


def test_a_database_that_does_not_exist_is_one_line_and_exit_2(tmp_path, postgres_url):
    url = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    res = subprocess.run(_args(tmp_path, "pgnone", url, 2), cwd=ROOT, env=cli_env(), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot open the storage" in lines[0] and "no_such_database" in lines[0], res.stderr
