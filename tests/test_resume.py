"""A trial killed with SIGKILL mid-run resumes from its last checkpoint, and its metrics read as one run's.

What matches an uninterrupted run of the same seed exactly: every per-step value TRL logs (loss,
reward, grad_norm, entropy, num_tokens, completion lengths, learning rate, ...), the completions
and tokens counted, every line of groups.jsonl, and the held-out rewards in eval.jsonl. What
cannot: wall-clock values (train_seconds, step_time, generation_seconds, eval_seconds) and the
process's peak memory. train_seconds continues from the checkpoint's clock instead of restarting.

The kill is real (SIGKILL of the trial process) and waits on an event, never on a sleep: the
checkpoint's clock file and metrics rows past it. The unit tests build checkpoint folders on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, TESTS, cli_env, cli_inprocess, tiny_spec, write_study

from grpo_ablate.trainer import checkpoints
from grpo_ablate.vocab import EVAL_FILE, GROUPS_FILE, METRICS_FILE, RESULT_FILE
from grpo_ablate import trial_record as record

WALL_CLOCK = {"train_seconds", "step_time", "generation_seconds", "peak_memory_mb", "eval_seconds"}
EVENT_WAIT_S = 600  # how long to wait for an event (a checkpoint, a row) before the test gives up


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _without_clock(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in rows]


def _wait_for(condition, what: str, alive=lambda: True) -> None:
    deadline = time.monotonic() + EVENT_WAIT_S
    while not condition():
        assert alive(), f"the trial ended before {what}"
        assert time.monotonic() < deadline, f"no {what} after {EVENT_WAIT_S} s"
        time.sleep(0.05)


def _killable_past(trial_dir: Path, checkpoint_step: int, rows: int):
    """True once a complete checkpoint at `checkpoint_step` exists and metrics.jsonl has `rows` rows (past it)."""
    def ready() -> bool:
        found = checkpoints.latest(trial_dir)
        metrics = trial_dir / METRICS_FILE
        return (found is not None and found.step >= checkpoint_step and metrics.exists()
                and len(metrics.read_text().splitlines()) >= rows)
    return ready


# ------------------------------------------------------------------ units: the folders


def _fake_checkpoint(trial_dir: Path, step: int, *, clock: bool = True) -> Path:
    folder = checkpoints.trainer_dir(trial_dir) / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    if clock:
        (trial_dir / METRICS_FILE).write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, step + 1)))
        checkpoints.save_state(trial_dir, folder, {"step": step})
    return folder


def test_the_interval_is_whole_rounds_and_saves_nothing_at_the_last_step():
    assert checkpoints.interval_steps("auto", 100) == 10
    assert checkpoints.interval_steps("auto", 100, round_steps=4) == 12  # 10 rounded up to whole rounds of 4
    assert checkpoints.interval_steps(7, 100, round_steps=2) == 8
    assert checkpoints.interval_steps(100, 100) is None  # the last step needs no checkpoint
    assert checkpoints.interval_steps(None, 100) is None
    assert checkpoints.interval_steps("auto", 3) == 1


def test_only_complete_checkpoints_are_resumed_and_a_retry_takes_the_latest(tmp_path):
    old, new = tmp_path / "00000", tmp_path / "00001"
    _fake_checkpoint(old, 4)
    _fake_checkpoint(old, 8, clock=False)  # killed while saving: no clock, never resumed
    assert [c.step for c in checkpoints.complete_checkpoints(old)] == [4]
    moved = checkpoints.carry_over(old, new)
    assert moved is not None and moved.step == 4 and moved.path.parent == checkpoints.trainer_dir(new)
    assert checkpoints.latest(old) is None and not list(checkpoints.trainer_dir(old).glob("checkpoint-*"))
    (new / METRICS_FILE).write_text('{"step": 99}\n')  # rows written after the checkpoint are dropped
    checkpoints.restore_files(moved, new)
    assert _rows(new / METRICS_FILE) == [{"step": s} for s in range(1, 5)]
    assert checkpoints.remove_checkpoints(new) == 1 and checkpoints.latest(new) is None


def test_a_retry_finds_its_predecessors_folders_along_retry_of(tmp_path):
    import optuna

    from grpo_ablate.storage import open_storage
    from grpo_ablate.study import ledger

    storage = open_storage(str(tmp_path / "study.journal"))
    study = optuna.create_study(study_name="chain", storage=storage)
    ledger.enqueue(study, {"g": 4}, {"role": "baseline", "cell": "G4"})
    for n in range(3):  # killed, its retry killed too (before it got a folder), the third runs
        trial = ledger.ask(study, planned=True)
        trial.suggest_int("g", 0, 8)
        if n != 1:
            ledger.set_trial_dir(trial, tmp_path / f"{trial.number:05d}")
        if n < 2:
            ledger.requeue(study, storage, trial.number, "SIGKILL", max_retry=5, counted=True)
    trials = {t.number: t for t in study.get_trials()}
    assert ledger.predecessor_dirs(trials, trials[2]) == [str(tmp_path / "00000")]
    assert ledger.predecessor_dirs(trials, trials[0]) == []


# ------------------------------------------------------------------ a real kill, a real resume


@pytest.mark.slow
def test_a_trial_killed_mid_run_resumes_and_matches_an_uninterrupted_run(warm_session, tmp_path):
    def spec(name: str):
        s = tiny_spec(tmp_path / name, steps=10, seed=3, evaluation={"num_prompts": 16, "points": 3})
        s.checkpoint = {"every": 4, "keep": False}
        return s

    whole = warm_session.run(spec("whole"))  # the uninterrupted run, in the warm session launcher
    assert whole.outcome.value == "completed", whole.reason

    killed = spec("killed")
    killed.save()
    env = cli_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
    with (tmp_path / "killed.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.trainer.worker", str(killed.path / "spec.json")],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(_killable_past(killed.path, 4, 6), "checkpoint-4 and 6 metrics rows", lambda: proc.poll() is None)
    finally:
        proc.kill()  # SIGKILL: no handler, no result.json
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed.path / RESULT_FILE).exists()
    before = _rows(killed.path / METRICS_FILE)
    assert len(before) >= 6 and checkpoints.latest(killed.path).step == 4

    resumed = warm_session.run(spec("killed"))  # the same cell again, where a study's retry runs: it resumes
    assert resumed.outcome.value == "completed", resumed.reason
    record = json.loads((killed.path / RESULT_FILE).read_text())
    assert record["resumed_from"].endswith("checkpoint-4")

    a, b = _rows(Path(whole.trial_dir) / METRICS_FILE), _rows(killed.path / METRICS_FILE)
    assert [r["step"] for r in b] == list(range(1, 11))
    assert _without_clock(a) == _without_clock(b)  # loss, reward, grad_norm, tokens, completions: exactly
    assert b[:4] == before[:4]  # the rows up to the checkpoint are the killed run's own
    seconds = [r["train_seconds"] for r in b]
    assert seconds == sorted(seconds) and seconds[4] > seconds[3]  # the clock continued, it did not restart
    assert _rows(Path(whole.trial_dir) / GROUPS_FILE) == _rows(killed.path / GROUPS_FILE)
    assert _without_clock(_rows(Path(whole.trial_dir) / EVAL_FILE)) == _without_clock(_rows(killed.path / EVAL_FILE))
    assert checkpoints.latest(killed.path) is None  # completed: its checkpoints are removed


STUDY = """\
study:
  name: resume-e2e
  output_dir: {out}
  sampler: ablation
  seeds: [0]
  checkpoint_steps: 4
  max_retry: 2
model: {{name_or_path: builtin:tiny}}
data: {{task: addition, num_prompts: 400}}
trainer: {{learning_rate: 2.0e-4, per_device_train_batch_size: 32, max_completion_length: 6, beta: 0.0}}
search: {{num_generations: [4]}}
budget: {{max_steps: 12}}
"""


def _trial_process(root_pid: int) -> int | None:
    """The pid of the trial process (a warm session or a worker) under the orchestrator, if started."""
    import psutil

    from grpo_ablate.trainer.session import FORKED_SESSION_NAME

    for child in psutil.Process(root_pid).children(recursive=True):
        try:
            if child.name() == FORKED_SESSION_NAME or "grpo_ablate.trainer.worker" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


@pytest.mark.slow
def test_a_study_trial_killed_mid_run_is_requeued_and_its_retry_resumes(tmp_path):
    out = tmp_path / "run"
    study = write_study(tmp_path, STUDY.format(out=out))
    first = out / "trials" / "00000"
    with (tmp_path / "run.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "run", str(study), "--no-report"], cwd=ROOT,
                                env=cli_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(_killable_past(first, 4, 6), "trial 0's checkpoint-4 and 6 rows", lambda: proc.poll() is None)
        pid = _trial_process(proc.pid)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=EVENT_WAIT_S) == 0, (tmp_path / "run.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = (tmp_path / "run.log").read_text()
    assert "resuming trial 0's checkpoint at step 4" in text, text[-3000:]

    import optuna

    from grpo_ablate.storage import open_storage

    trials = optuna.load_study(study_name="resume-e2e", storage=open_storage(str(out / "study.journal"))).get_trials()
    assert [record.outcome(t).value for t in trials] == ["interrupted", "completed"]
    retry = trials[1]
    assert record.retry_of(retry) == 0 and record.resumed_from(retry) == 4
    rows = _rows(out / "trials" / "00001" / METRICS_FILE)
    assert [r["step"] for r in rows] == list(range(1, 13))
    assert rows[:4] == _rows(first / METRICS_FILE)[:4]  # the predecessor's steps, carried with its checkpoint
    assert record.recorded_metrics(retry)["steps"] == 12  # the summary counts the whole run, the predecessor's steps included
    seconds = [r["train_seconds"] for r in rows]
    assert seconds == sorted(seconds) and record.recorded_metrics(retry)["train_seconds"] >= seconds[-1] - 1e-6  # the clock continued
    assert not list(checkpoints.trainer_dir(first).glob("checkpoint-*"))  # moved to the retry, then removed
    assert not list(checkpoints.trainer_dir(out / "trials" / "00001").glob("checkpoint-*"))
    assert cli_inprocess("report", str(study)).returncode == 0
