"""A SLURM client that knows what it does not know (issue 52 item 2), on the suite's real cluster (tests/slurm_cluster.py).

Round 5: one refused `sbatch` ("Unable to contact slurm controller") failed the cell for good; ~30 s of unanswered
`squeue`/`scontrol` read as a lost node, and a second job was submitted while the first still ran; an `sbatch`
that answered after the client's timeout left a job nobody recorded. One real trial (the tiny model, 40 s of
training whatever the machine's speed) meets all three: `sbatch` behind a wrapper script on PATH
(tests/slurm_wrappers.py) is refused once, then submits but answers 8 s late, past a 3 s client timeout; then the
real `slurmctld` is stopped for 32 s while the job trains on, and started again; then every query answers 8 s
late (past the timeout) for 20 s, as an overloaded controller does. The trial completes, from one job.
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
OUTAGE_S = 32  # past the 30 s after which an unanswered query used to read as a lost node
SLOW_S = 20  # then every squeue/scontrol/sacct answers 8 s late for this long


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + EVENT_WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {EVENT_WAIT_S} s"
        time.sleep(0.2)


def test_a_refused_then_slow_sbatch_and_a_controller_away_mid_trial_give_one_job_and_one_completed_trial(
        slurm_cluster, tmp_path, monkeypatch):
    clients = FaultyClients.install(tmp_path / "bin", slurm_cluster.env)
    for key, value in clients.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(CLIENT_TIMEOUT_ENV, "3")
    clients.cue(refuse=1, slow=8)
    # a seconds budget ends it completed after 40 s of training: the outage lies inside it on any machine. A reward
    # of weight 0 sleeps 0.25 s a step (helpers_rewards.pause): the 40 s are the same, most of them asleep rather
    # than training on a core (~35 CPU s of steps before, which the client under test never needed)
    spec = tiny_spec(tmp_path / "trial", num_prompts=400, per_device_train_batch_size=8,
                     rewards=[{"name": "task"}, {"name": "helpers_rewards:pause", "weight": 0.0}],
                     budget={"max_steps": 100000, "seconds": 40})
    metrics = tmp_path / "trial" / "metrics.jsonl"
    away: list[float] = []

    def outage_once_it_trains() -> None:
        _wait(lambda: metrics.exists() and metrics.read_text().strip(), "first training step")
        started = time.monotonic()
        slurm_cluster.stop_controller()  # slurmd and the job run on; every client command fails or times out
        try:
            time.sleep(OUTAGE_S)
        finally:
            slurm_cluster.start_controller()
            away.append(time.monotonic() - started)
        clients.go_slow(SLOW_S, delay=8)  # then a controller that answers, but past the client's 3 s timeout

    watcher = threading.Thread(target=outage_once_it_trains, daemon=True)
    watcher.start()
    result = SlurmLauncher().run(spec)
    watcher.join(120)
    log = (tmp_path / "trial" / "log.txt").read_text()
    assert away and away[0] >= OUTAGE_S, "the outage never happened: the test proved nothing"
    assert result.outcome.value == "completed", (result.reason, log[-3000:])
    record = read_record(tmp_path / "trial")
    assert record is not None and record["job"] is not None
    named = slurm_cluster.run("squeue", "-h", "-t", "all", "-n", str(record["name"]), "-o", "%i").stdout.split()
    assert clients.submitted == [record["job"]] == named  # one job, ever
    assert "Unable to contact slurm controller" in log and "submitting again" in log  # the refusal, retried
    assert f"sbatch gave no answer, but job {record['job']}" in log  # the slow answer, found by its recorded name
    assert "does not answer about job" in log and "answers again after" in log  # the outage: nothing concluded
    assert clients.slow_queries > 0, "no query met the slow controller: the test proved nothing about it"
