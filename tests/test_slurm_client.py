"""A SLURM client that knows what it does not know (issue 52 item 2), on the suite's real cluster (tests/slurm_cluster.py).

Round 5: one refused `sbatch` ("Unable to contact slurm controller") failed the cell for good; ~30 s of unanswered
`squeue`/`scontrol` read as a lost node, and a second job was submitted while the first still ran; an `sbatch`
that answered after the client's timeout left a job nobody recorded. Here the clients fail and answer late through
wrapper scripts on PATH (tests/slurm_wrappers.py), and the real controller is stopped and started again, while a
real trial (the tiny model, a few steps) runs as the job: each time the trial completes once, from one job.
"""

from __future__ import annotations

import threading
import time

import pytest

from grpo_ablate.launch.slurm import CLIENT_TIMEOUT_ENV, SlurmLauncher, read_record
from helpers import tiny_spec
from slurm_wrappers import FaultyClients

pytestmark = pytest.mark.slow

EVENT_WAIT_S = 600


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + EVENT_WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {EVENT_WAIT_S} s"
        time.sleep(0.2)


def _jobs_named(cluster, name: str) -> list[str]:
    return cluster.run("squeue", "-h", "-t", "all", "-n", name, "-o", "%i").stdout.split()


def test_a_refused_then_slow_sbatch_and_unanswered_queries_give_one_job_and_one_completed_trial(
        slurm_cluster, tmp_path, monkeypatch):
    """sbatch: refused once (no controller), then it submits but answers 8 s late, past a 3 s client timeout: the job
    is found by its recorded name, never submitted again. Then every query fails as an unreachable controller for 40 s
    (longer than the 30 s that used to read as a lost node) while the job runs: nothing is concluded, the trial
    completes."""
    clients = FaultyClients.install(tmp_path / "bin", slurm_cluster.env)
    for key, value in clients.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(CLIENT_TIMEOUT_ENV, "3")
    clients.cue(refuse=1, slow=8)
    spec = tiny_spec(tmp_path / "trial", steps=6, num_prompts=200, per_device_train_batch_size=8)
    metrics = tmp_path / "trial" / "metrics.jsonl"

    def outage_once_it_trains() -> None:
        _wait(lambda: metrics.exists() and metrics.read_text().strip(), "first training step")
        clients.go_down(40)

    watcher = threading.Thread(target=outage_once_it_trains, daemon=True)
    watcher.start()
    result = SlurmLauncher().run(spec)
    watcher.join(60)
    log = (tmp_path / "trial" / "log.txt").read_text()
    assert result.outcome.value == "completed", (result.reason, log[-3000:])
    record = read_record(tmp_path / "trial")
    assert record is not None and record["job"] is not None
    assert clients.submitted == [record["job"]] == _jobs_named(slurm_cluster, str(record["name"]))  # one job, ever
    assert "Unable to contact slurm controller" in log and "submitting again" in log  # the refusal, retried
    assert f"sbatch gave no answer, but job {record['job']}" in log  # the slow answer, found by name
    assert "does not answer about job" in log and "answers again after" in log  # the outage, waited out


def test_a_controller_stopped_and_started_again_mid_trial_loses_no_job_and_submits_none_twice(slurm_cluster, tmp_path,
                                                                                               monkeypatch):
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    spec = tiny_spec(tmp_path / "trial", steps=40, num_prompts=400, per_device_train_batch_size=8)
    results: list = []
    runner = threading.Thread(target=lambda: results.append(SlurmLauncher().run(spec)))
    runner.start()
    metrics = tmp_path / "trial" / "metrics.jsonl"
    _wait(lambda: metrics.exists() and metrics.read_text().strip(), "first training step")  # the job trains
    slurm_cluster.stop_controller()
    try:
        time.sleep(15)  # the outage: the job runs on under slurmd; the launcher asks and hears nothing
    finally:
        slurm_cluster.start_controller()
    runner.join(EVENT_WAIT_S)
    assert results, "the launcher did not return"
    log = (tmp_path / "trial" / "log.txt").read_text()
    assert results[0].outcome.value == "completed", (results[0].reason, log[-3000:])
    record = read_record(tmp_path / "trial")
    assert record is not None and _jobs_named(slurm_cluster, str(record["name"])) == [record["job"]]
    assert "does not answer about job" in log and "answers again after" in log  # it asked during the outage
