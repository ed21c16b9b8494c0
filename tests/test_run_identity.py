"""A run is host + pid + the pid's start time + a random run id: a trial whose owner does not match exactly is dead (issue 43).

The reused pid is real: a live process of this test stands in for the process the kernel gave a killed run's pid to.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from helpers import ROOT, cli_env

from grpo_ablate.records import trial_record as record
from grpo_ablate.core.children import process_start_time
from grpo_ablate.study.owner import HOST, RunIdentity, dead_owner, new_run


@pytest.fixture
def other_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_live_pid_with_another_start_time_is_a_dead_owner(other_process):
    me = new_run()
    started = process_start_time(other_process)
    assert started is not None and started != "?"
    assert dead_owner(HOST, other_process, {"pid_started": started, "run_id": "theirs"}, me) is None  # alive: all matches
    reused = dead_owner(HOST, other_process, {"pid_started": str(int(started) - 1), "run_id": "theirs"}, me)
    assert reused is not None and "another process" in reused
    assert dead_owner("another-host", other_process, {"pid_started": "1"}, me) is None  # another host: cannot judge


def test_this_process_is_alive_only_for_its_own_run():
    me, earlier = new_run(), new_run()
    assert me.run_id != earlier.run_id and me.pid == os.getpid()
    assert dead_owner(HOST, me.pid, me.record(), me) is None
    ended = dead_owner(HOST, earlier.pid, earlier.record(), me)  # an earlier `run` in this same process
    assert ended is not None and "earlier run" in ended


def test_a_gone_pid_is_a_dead_owner():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    me = new_run()
    assert dead_owner(HOST, proc.pid, {}, me) is not None
    assert dead_owner(HOST, None, {}, me) is None  # no pid recorded: nothing to judge by
    assert isinstance(me, RunIdentity) and me.record().keys() == {"pid_started", "run_id"}


@pytest.mark.slow
@pytest.mark.usefixtures("addition_model")  # its deadline times a trial's start, not the model's first build
def test_a_killed_run_whose_pid_was_reused_is_run_again(study_here, tmp_path):
    """kill -9 of `run`, and its pid now names another live process: the next run requeues the trial and trains it
    (it used to print "running 1", train nothing and exit 0, every time)."""
    import optuna
    import psutil

    from grpo_ablate.storage.store import open_storage
    from grpo_ablate.records.trial_record import PID

    out = tmp_path / "reuse"
    args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", "--set", "study.seeds=[0]", "--no-report",
            "--set", "study.name=reuse", "--set", f"study.output_dir={out}", "--set", f"study.storage={out / 'study.journal'}",
            "--set", "num_generations=[2]", "--set", "study.baseline={}", "--set", "study.workers=1"]
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", *args, "--set", "budget.max_steps=200"], cwd=ROOT,
                            env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = out / "trials" / "00000" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.exists() and metrics.stat().st_size > 0):
        assert proc.poll() is None and time.monotonic() < deadline, "the first run ended before training"
        time.sleep(0.2)
    for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
        try:
            p.kill()
        except psutil.Error:
            pass
    proc.wait(timeout=60)

    storage = open_storage(str(out / "study.journal"))
    study = optuna.load_study(study_name="reuse", storage=storage)
    (running,) = study.get_trials(deepcopy=False)
    # The kernel gives the dead run's pid to a process started after it died (as real reuse is): started before
    # the first run, the stand-in could share its start tick (10 ms) and pass for the same process.
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        storage.set_trial_user_attr(running._trial_id, PID, later.pid)
        res = study_here(*args, "--set", "budget.max_steps=2")
    finally:
        later.kill()
        later.wait()
    assert res.returncode == 0, res.stdout + res.stderr
    trials = optuna.load_study(study_name="reuse", storage=open_storage(str(out / "study.journal"))).get_trials()
    assert [(t.state.name, record.outcome(t).value) for t in trials] == [("FAIL", "interrupted"), ("COMPLETE", "completed")]
    assert "another process" in (record.reason(trials[0]) or "")
