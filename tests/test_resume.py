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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, cli_env, cli_inprocess, tiny_spec, write_study

from grpo_ablate.contract import checkpoints
from grpo_ablate.contract.cadence import interval_steps
from grpo_ablate.contract.files import trainer_dir
from grpo_ablate.core.vocab import EVAL_FILE, GROUPS_FILE, LOG_FILE, METRICS_FILE, RESULT_FILE
from grpo_ablate.records import trial_record as record
from grpo_ablate.contract.spec import CheckpointSpec

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


FP = "f" * 64  # a spec fingerprint


def _fake_checkpoint(trial_dir: Path, step: int, *, fingerprint: str = FP, after=None) -> Path:
    """A checkpoint as the trainer stages it (its files), sealed as the Checkpointer seals it."""
    staging = trainer_dir(trial_dir) / f"checkpoint-{step}"
    staging.mkdir(parents=True)
    (staging / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (staging / "model.safetensors").write_bytes(bytes(range(256)) * (step + 1))
    (staging / "rng_state.pth").write_bytes(b"rng" * step)
    (trial_dir / METRICS_FILE).write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, step + 1)))
    return checkpoints.seal(trial_dir, staging, step=step, fingerprint=fingerprint, clock={"step": step}, after=after).path


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_interval_is_whole_rounds_and_saves_nothing_at_the_last_step():
    assert interval_steps("auto", 100) == 10
    assert interval_steps("auto", 100, round_steps=4) == 12  # 10 rounded up to whole rounds of 4
    assert interval_steps(7, 100, round_steps=2) == 8
    assert interval_steps(100, 100) is None  # the last step needs no checkpoint
    assert interval_steps(None, 100) is None
    assert interval_steps("auto", 3) == 1


def test_a_sealed_checkpoint_is_resumed_and_a_retry_in_this_study_takes_it_over(tmp_path):
    old, new = tmp_path / "00000", tmp_path / "00001"
    _fake_checkpoint(old, 4)
    assert not list(trainer_dir(old).glob("checkpoint-*"))  # the staging name is gone: renamed
    found, rejected = checkpoints.resumable(old, FP)
    assert found is not None and found.step == 4 and rejected == []
    moved = checkpoints.carry_over(old, new, move=True)
    assert moved is not None and moved.step == 4 and moved.path.parent == checkpoints.checkpoints_dir(new)
    assert checkpoints.latest(old) is None
    assert checkpoints.resumable(new, FP)[0] == moved  # a move keeps it whole
    (new / METRICS_FILE).write_text('{"step": 99}\n')  # rows written after the checkpoint are dropped
    checkpoints.restore_files(moved, new)
    assert _rows(new / METRICS_FILE) == [{"step": s} for s in range(1, 5)]
    assert checkpoints.remove_checkpoints(new) == 1 and checkpoints.latest(new) is None


def test_a_checkpoint_outside_this_studys_folders_is_copied_never_moved(tmp_path):
    """Resuming a copy of a run folder must not empty the original it was copied from."""
    original, retry = tmp_path / "original" / "00000", tmp_path / "copy" / "00001"
    folder = _fake_checkpoint(original, 4)
    before = _contents(folder)
    copied = checkpoints.carry_over(original, retry, move=False)
    assert copied is not None and _contents(folder) == before  # the original keeps its checkpoint, untouched
    assert _contents(copied.path) == before and checkpoints.resumable(retry, FP)[0] == copied
    assert not [p for p in checkpoints.checkpoints_dir(retry).iterdir() if p.name.startswith(".")]


def test_a_checkpoint_of_another_spec_is_not_resumed_and_says_why(tmp_path):
    _fake_checkpoint(tmp_path, 4, fingerprint="a" * 64)
    found, rejected = checkpoints.resumable(tmp_path, FP)
    assert found is None and len(rejected) == 1 and "another trial spec" in rejected[0]


def test_the_spec_fingerprint_ignores_only_what_differs_between_attempts(tmp_path):
    spec = json.loads(tiny_spec(tmp_path / "a", steps=12).to_json())
    fp = checkpoints.spec_fingerprint(spec)
    again = {**spec, "trial_dir": str(tmp_path / "b"), "timeout_s": 99.0, "env": {"OMP_NUM_THREADS": "3"},
             "checkpoint": {"every": 2, "keep": True}}
    assert checkpoints.spec_fingerprint(again) == fp
    assert checkpoints.spec_fingerprint(dict(reversed(list(spec.items())))) == fp  # canonical: key order is not meaning
    assert checkpoints.spec_fingerprint({**spec, "budget": {**spec["budget"], "max_steps": 4}}) != fp
    assert checkpoints.spec_fingerprint({**spec, "trainer": {**spec["trainer"], "learning_rate": 1e-4}}) != fp
    assert checkpoints.spec_fingerprint({**spec, "params": {"g": 8}}) != fp


class _Killed(Exception):
    pass


def _stages(tmp_path: Path) -> list[str]:
    seen: list[str] = []
    _fake_checkpoint(tmp_path / "count", 8, after=seen.append)
    return seen


def test_a_write_killed_at_any_stage_resumes_a_whole_checkpoint_or_none(tmp_path):
    """Property: stop the writer after each of its stages (as a kill would); what resumes is exactly a checkpoint that
    was sealed (the new one or the one before), and never a part of one."""
    stages = _stages(tmp_path)
    assert len(stages) >= 8
    reference = _contents(checkpoints.checkpoints_dir(tmp_path / "count") / "checkpoint-8")
    for i, stage in enumerate(stages):
        for earlier in (False, True):
            trial = tmp_path / f"k{i}{'e' if earlier else ''}"
            trial.mkdir()
            kept = _contents(_fake_checkpoint(trial, 4)) if earlier else None

            def stop(name: str, at=stage) -> None:
                if name == at:
                    raise _Killed(name)

            with pytest.raises(_Killed):
                _fake_checkpoint(trial, 8, after=stop)
            found, rejected = checkpoints.resumable(trial, FP)
            assert rejected == [], (stage, rejected)  # a kill leaves nothing half-sealed to reject
            if found is not None and found.step == 8:
                assert _contents(found.path) == reference, stage
            elif found is not None:
                assert earlier and found.step == 4 and _contents(found.path) == kept, stage
            else:
                assert not earlier, stage
            checkpoints.discard(trial, keep=found)  # the next start clears the staging folder
            assert not list(trainer_dir(trial).glob("checkpoint-*"))


def test_any_file_truncated_or_changed_means_start_over_with_the_file_named(tmp_path):
    """Property: every file of a sealed checkpoint, truncated to nothing, to half, or one byte changed, is caught."""
    folder = _fake_checkpoint(tmp_path / "ref", 4)
    names = sorted(_contents(folder))
    assert {"trainer_state.json", "model.safetensors", checkpoints.MANIFEST_FILE,
            f"{checkpoints.STATE_DIR}/{checkpoints.CLOCK_FILE}", f"{checkpoints.STATE_DIR}/{METRICS_FILE}"} <= set(names)
    for i, name in enumerate(names):
        for how in ("empty", "half", "flip", "gone"):
            trial = tmp_path / f"t{i}{how}"
            path = _fake_checkpoint(trial, 4) / name
            data = path.read_bytes()
            if how == "gone":
                path.unlink()
            else:
                path.write_bytes({"empty": b"", "half": data[: len(data) // 2],
                                  "flip": data[:-1] + bytes([data[-1] ^ 1]) if data else b"x"}[how])
            found, rejected = checkpoints.resumable(trial, FP)
            assert found is None and len(rejected) == 1, (name, how)
            assert Path(name).name in rejected[0] or checkpoints.MANIFEST_FILE in rejected[0], (name, how, rejected)


def test_a_retry_finds_its_predecessors_folders_along_retry_of(tmp_path):
    import optuna

    from grpo_ablate.storage.store import open_storage
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
        s.checkpoint = CheckpointSpec(every=4, keep=False)
        return s

    whole = warm_session.run(spec("whole"))  # the uninterrupted run, in the warm session launcher
    assert whole.outcome.value == "completed", whole.reason

    # The same cell's trial process, SIGKILLed mid-run: a fresh fork of the suite's warm template (a real trial
    # process, started at the cost of a fork rather than an interpreter's imports), killed past its checkpoint
    killed = spec("killed")
    killed.path.mkdir(parents=True, exist_ok=True)
    warm_session.start(killed, warm_session.environment(killed), tmp_path / "killed.log")
    try:
        _wait_for(_killable_past(killed.path, 4, 6), "checkpoint-4 and 6 metrics rows",
                  lambda: warm_session.poll() is None)
    finally:
        if (pid := warm_session.pid) is not None:  # else it ended first: the assertion below says so
            os.kill(pid, signal.SIGKILL)  # no handler, no result.json
        returncode = warm_session.wait(60)
        warm_session.close()
    assert returncode == -signal.SIGKILL
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
    assert checkpoints.latest(killed.path) is not None  # kept until a study recorded the result (study/lifecycle.py)


def _seeded_from(source: Path, name: str, tmp_path: Path, steps: int = 10):
    """A trial folder whose only checkpoint is a copy of `source` (as a kill after it would leave it), and its spec."""
    target = tmp_path / name
    checkpoints.checkpoints_dir(target).mkdir(parents=True)
    shutil.copytree(source, checkpoints.checkpoints_dir(target) / source.name)
    s = _epoch_spec(target, steps=steps)
    return s, checkpoints.checkpoints_dir(target) / source.name


def _epoch_spec(folder: Path, *, every: int = 4, steps: int = 10):
    # 12 prompts, 4 per round (32 completions, G=8): an epoch is 3 optimizer steps, so a run of 10 crosses 3 epochs
    s = tiny_spec(folder, steps=steps, seed=5, num_prompts=12)
    s.checkpoint = CheckpointSpec(every=every, keep=True)
    return s


@pytest.mark.slow
def test_a_resume_after_the_first_epoch_is_bit_identical_and_a_bad_or_foreign_checkpoint_starts_over(warm_session, tmp_path):
    """Exact resume past the first pass over the data (issue 41.4): mid-epoch and at an epoch's end; a checkpoint of
    another spec (max_steps 10 -> 4) or with a truncated weights file starts over, says why, and completes."""
    mid = warm_session.run(_epoch_spec(tmp_path / "mid"))  # keeps checkpoint-8: one step into the third epoch
    end = warm_session.run(_epoch_spec(tmp_path / "end", every=3))  # keeps checkpoint-9: the third epoch's end
    assert mid.outcome.value == end.outcome.value == "completed", (mid.reason, end.reason)
    whole = _without_clock(_rows(tmp_path / "mid" / METRICS_FILE))
    assert [r["step"] for r in whole] == list(range(1, 11))
    assert _without_clock(_rows(tmp_path / "end" / METRICS_FILE)) == whole  # saving checkpoints changes nothing
    assert len({json.dumps(r.get("reward")) for r in whole}) > 3  # the rows differ: equality below means something

    for source, step in ((tmp_path / "mid", 8), (tmp_path / "end", 9)):
        spec, _ = _seeded_from(checkpoints.checkpoints_dir(source) / f"checkpoint-{step}", f"resumed{step}", tmp_path)
        resumed = warm_session.run(spec)
        assert resumed.outcome.value == "completed", resumed.reason
        assert json.loads((spec.path / RESULT_FILE).read_text())["resumed_from"].endswith(f"checkpoint-{step}")
        assert _without_clock(_rows(spec.path / METRICS_FILE)) == whole, step  # bit-identical: loss, reward, grad_norm...
        assert _rows(spec.path / GROUPS_FILE) == _rows(source / GROUPS_FILE), step

    source = checkpoints.checkpoints_dir(tmp_path / "mid") / "checkpoint-8"
    spec, _ = _seeded_from(source, "shorter", tmp_path, steps=4)  # the study was edited: max_steps 10 -> 4
    shorter = warm_session.run(spec)
    assert shorter.outcome.value == "completed", shorter.reason
    assert "resumed_from" not in json.loads((spec.path / RESULT_FILE).read_text())
    assert _without_clock(_rows(spec.path / METRICS_FILE)) == whole[:4]  # trained from step 1, not 8 -> 4
    assert "written for another trial spec" in (spec.path / LOG_FILE).read_text()

    spec, copied = _seeded_from(source, "truncated", tmp_path)
    weights = copied / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    truncated = warm_session.run(spec)
    assert truncated.outcome.value == "completed", truncated.reason
    assert "resumed_from" not in json.loads((spec.path / RESULT_FILE).read_text())
    assert _without_clock(_rows(spec.path / METRICS_FILE)) == whole  # started over, and trained the whole run
    log = (spec.path / LOG_FILE).read_text()
    assert "model.safetensors has" in log and "starts over" in log, log[-2000:]


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

    from grpo_ablate.storage.store import open_storage

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
    assert not list(checkpoints.checkpoints_dir(first).glob("checkpoint-*"))  # moved to the retry, then removed
    assert not list(checkpoints.checkpoints_dir(out / "trials" / "00001").glob("checkpoint-*"))
    assert cli_inprocess("report", str(study)).returncode == 0
