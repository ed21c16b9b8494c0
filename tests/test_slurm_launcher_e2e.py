"""The `slurm` launcher end to end on the test cluster (tests/slurm_cluster.py): one `grpo-ablate run`, two workers,
each trial a SLURM batch job, both jobs running at once, both completed; and `reclaim`, which ends the job a dead
orchestrator left running before its trial is queued again (the whole fault: benchmarks/slurm_matrix.py,
"orchestrator-kill").
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from helpers import ROOT, write_study

from grpo_ablate.records import trial_record as record

STUDY = """\
study:
  name: slurm-launcher
  output_dir: {out}
  sampler: ablation
  seeds: [0]
  workers: 2
  trial_timeout: 600
model: {{name_or_path: builtin:tiny}}
data: {{task: addition, num_prompts: 200}}
trainer: {{learning_rate: 2.0e-4, per_device_train_batch_size: 8, max_completion_length: 6, beta: 0.0}}
search: {{num_generations: [2, 4]}}
hardware: {{launcher: slurm}}
budget: {{max_steps: 3}}
"""


@pytest.mark.slow
def test_a_study_submits_each_trial_as_a_job_two_at_once(slurm_cluster, tmp_path):
    import optuna

    from grpo_ablate.storage.store import open_storage

    out = tmp_path / "runs"
    study = write_study(tmp_path, STUDY.format(out=out))
    env = dict(slurm_cluster.env, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("GRPO_ABLATE_LAUNCHER", None)
    most_running = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal most_running
        while not done.is_set():
            running = slurm_cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%j", check=False).stdout.split()
            most_running = max(most_running, sum(1 for name in running if name.startswith("grpo-ablate-")))
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = subprocess.run([sys.executable, "-m", "grpo_ablate", "run", str(study), "--no-report"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=900)
    finally:
        done.set()
        watcher.join()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    trials = optuna.load_study(study_name="slurm-launcher", storage=open_storage(str(out / "study.journal"))).get_trials()
    assert sorted((record.arm_of(t).num_generations, record.outcome(t).value) for t in trials) == [  # type: ignore[union-attr]
        (2, "completed"), (4, "completed")]
    for number in ("00000", "00001"):
        log = (out / "trials" / number / "log.txt").read_text()
        assert log.startswith("$ sbatch --parsable"), log[:500]
        assert "--cpus-per-task=1" in log.splitlines()[0]
    assert most_running == 2, "the two trials never ran as SLURM jobs at the same time"


@pytest.mark.slow
def test_reclaim_cancels_the_job_a_dead_run_left_and_returns_once_it_has_ended(slurm_cluster, tmp_path, monkeypatch):
    """The job gets SIGTERM (its handler, like a trial's, finishes its step first) and reclaim waits for its end."""
    from grpo_ablate.launch import reclaim_trial
    from grpo_ablate.launch.slurm import JOB_FILE, read_job

    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    trial_dir = tmp_path / "00007"
    trial_dir.mkdir()
    assert reclaim_trial(trial_dir) == []  # no job was submitted from it: nothing to do
    stopped, trapped = tmp_path / "stopped", tmp_path / "trapped"
    script = f"trap 'sleep 3; echo step checkpointed > {stopped}; exit 0' TERM; touch {trapped}; sleep 300 & wait"
    job = slurm_cluster.run("sbatch", "--parsable", "--no-requeue", "--output=/dev/null", "--wrap", script).stdout.strip()
    (trial_dir / JOB_FILE).write_text(f'{{"job": "{job}"}}\n')
    assert read_job(trial_dir) == job
    deadline = time.monotonic() + 60
    # the event: the batch shell has set its trap (a TERM before it would end the shell without its handler)
    while not trapped.exists() or slurm_cluster.job_state(job) != "RUNNING" or not slurm_cluster.job_processes():
        assert time.monotonic() < deadline, slurm_cluster.run("squeue").stdout
        time.sleep(0.2)
    words = reclaim_trial(trial_dir)
    assert len(words) == 1 and f"cancelled SLURM job {job}" in words[0] and "(ended)" in words[0], words
    assert slurm_cluster.job_state(job) == "CANCELLED" and not slurm_cluster.job_processes()
    assert stopped.read_text().strip() == "step checkpointed"  # ended through its handler, before reclaim returned
    assert reclaim_trial(trial_dir) == []  # an ended job is left alone

