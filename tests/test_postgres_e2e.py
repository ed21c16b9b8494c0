"""Many workers, one study, a real PostgreSQL server: nothing lost, nothing duplicated, dead workers' trials retried.

Each worker is a separate `grpo-ablate run` process (as on separate hosts), running real GRPO
trials of the tiny offline model.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import psutil
import pytest

from conftest import ROOT, cli_env
from grpo_ablate.storage import open_storage

pytestmark = pytest.mark.slow


def _args(tmp: Path, name: str, url: str, steps: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grpo_ablate", "run", "studies/tiny-cpu.yaml", "--no-report", "--storage", url,
            "--set", f"study.name={name}", "--set", f"study.output_dir={tmp / name}", "--set", f"budget.max_steps={steps}",
            "--set", "study.workers=1", "--set", "study.heartbeat_interval=1", "--set", "study.grace_period=4", *extra]


def _cells(study: optuna.Study) -> Counter:
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    return Counter((t.user_attrs["num_generations"], t.user_attrs["seed"]) for t in done)


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
    retried = [t for t in trials if t.number != 0 and t.params == dead.params]
    assert len(retried) == 1 and retried[0].state == optuna.trial.TrialState.COMPLETE
    assert _cells(study) == Counter({(2, 0): 1, (2, 1): 1})
