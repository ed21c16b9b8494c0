"""Cells that failed under an earlier version of the study file are queued again on a rerun (study/retry.py).

The policy on a real Optuna journal study whose trials are asked and failed as the lifecycle does,
each attempt's spec.json written by `build_spec` from the study file it ran under; then one real
`grpo-ablate run` of a study whose only trial fails on a trainer key, fixed and run again.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from helpers import write_study
from grpo_ablate.config import load_study
from grpo_ablate.plan.cells import completions_per_trial, study_plan
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.storage.store import open_storage
from grpo_ablate.study import ledger
from grpo_ablate.study.lifecycle import trial_dir_of
from grpo_ablate.study.retry import requeue_changed, superseded
from grpo_ablate.study.setup import open_study, queue_first_plan
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.core.vocab import Outcome
from grpo_ablate.records import trial_record as record

optuna.logging.set_verbosity(optuna.logging.ERROR)

# One arm on two seeds; the first run's trainer section is refused by the scheduler at train(), which the study file's
# own checks (run's) cannot see: `grpo-ablate validate` does (it creates the scheduler); the fix adds its kwargs.
STUDY = """\
study:
  name: rt
  sampler: ablation
  seeds: [0, 1]
  workers: 1
  baseline: {num_generations: 2, temperature: 1.0}
model: {name_or_path: builtin:tiny}
data: {task: addition, num_prompts: 40}
trainer:
  per_device_train_batch_size: 4
  max_completion_length: 4
  lr_scheduler_type: cosine_with_min_lr
search: {num_generations: [2]}
budget: {max_steps: 2}
"""
FIX = "trainer.lr_scheduler_kwargs={min_lr_rate: 0.1}"


def _planned(study):
    """The study and its run's plan, as requeue_changed takes them."""
    return study, resolve_plan(study)


def _load(tmp_path: Path, *sets: str):
    return load_study(write_study(tmp_path, STUDY), [f"study.output_dir={tmp_path / 'out'}", *sets])


def _fail_all(ostudy: optuna.Study, study, *, write_spec: bool = True) -> list[int]:
    """Ask every queued cell and fail it, as the lifecycle does; its spec.json from this version of the file."""
    numbers = []
    while (trial := ledger.ask(ostudy, planned=True)) is not None:
        cell = ledger.suggest_cell(trial, study)
        folder = trial_dir_of(study, trial.number)
        ledger.set_trial_dir(trial, folder)
        folder.mkdir(parents=True, exist_ok=True)
        if write_spec:
            build_spec(study, cell, folder, {"CUDA_VISIBLE_DEVICES": ""}, timeout=123.0).save()
        ledger.fail(ostudy, trial, "ValueError: One of min_lr or min_lr_rate should be set")
        numbers.append(trial.number)
    return numbers


def _waiting(ostudy: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return ostudy.get_trials(deepcopy=False, states=(TrialState.WAITING,))


def test_failed_cells_run_again_once_the_file_changes_and_only_then(tmp_path):
    before = _load(tmp_path)
    ostudy, created = open_study(before, completions_per_trial(before))
    assert created
    queue_first_plan(ostudy, before, resolve_plan(before))
    failed = _fail_all(ostudy, before)
    assert len(failed) == 2

    # the same file again: nothing changed, nothing is retried (no endless retries of a cell that fails)
    assert requeue_changed(ostudy, before, resolve_plan(before)) is None
    assert not _waiting(ostudy)

    after = _load(tmp_path, FIX)
    note = requeue_changed(ostudy, after, resolve_plan(after))
    assert note == "queued again 2 cell(s) that failed under an earlier version of the study file"
    waiting = _waiting(ostudy)
    assert sorted(record.retry_of(t) for t in waiting) == failed
    assert sorted(record.cell_key(t) for t in waiting) == sorted(c.key for c in study_plan(after))
    # a failed attempt another trial retries no longer counts toward n_trials, nor as a fault retry of its cell
    assert superseded(ostudy.get_trials(deepcopy=False)) == set(failed)
    trials = {t.number: t for t in ostudy.get_trials(deepcopy=False)}
    assert [record.counted_retries(trials, t) for t in waiting] == [0, 0]

    # a second rerun while the retries wait queues nothing more
    assert requeue_changed(ostudy, after, resolve_plan(after)) is None
    # the retries fail too, under today's file: they stay failed
    again = _fail_all(ostudy, after)
    assert len(again) == 2
    assert requeue_changed(ostudy, after, resolve_plan(after)) is None
    # a third version of the file: the cells' attempts all failed under other files, so they run once more
    third = _load(tmp_path, FIX, "trainer.learning_rate=1.0e-4")
    assert requeue_changed(ostudy, third, resolve_plan(third)) is not None
    assert sorted(record.retry_of(t) for t in _waiting(ostudy)) == again


def test_a_cell_with_a_result_is_not_retried(tmp_path):
    before = _load(tmp_path)
    ostudy, _ = open_study(before, completions_per_trial(before))
    queue_first_plan(ostudy, before, resolve_plan(before))
    trial = ledger.ask(ostudy, planned=True)  # seed 0 completes under the old file
    assert trial is not None
    ledger.suggest_cell(trial, before)
    ledger.tell(ostudy, trial, before, TrialResult(Outcome.COMPLETED, metrics={"reward_per_hour": 1.0}))
    failed = _fail_all(ostudy, before)  # seed 1 fails under it
    assert requeue_changed(ostudy, *_planned(_load(tmp_path, FIX))) == ("queued again 1 cell(s) that failed under an earlier "
                                                             "version of the study file")
    assert [record.retry_of(t) for t in _waiting(ostudy)] == failed


@pytest.mark.parametrize("case", ["folder gone", "not in the plan", "raced"])
def test_a_cell_is_left_alone_when_its_attempt_cannot_be_compared_or_it_is_not_planned(tmp_path, case):
    before = _load(tmp_path)
    ostudy, _ = open_study(before, completions_per_trial(before))
    queue_first_plan(ostudy, before, resolve_plan(before))
    failed = _fail_all(ostudy, before)
    sets = [FIX]
    if case == "folder gone":  # another host's disk, or removed: nothing to compare with
        for n in failed:
            for f in trial_dir_of(before, n).iterdir():
                f.unlink()
            trial_dir_of(before, n).rmdir()
    elif case == "not in the plan":
        sets.append("study.seeds=[2]")
    else:
        sets += ["study.racing={}", "study.seeds=[0, 1, 2]"]
    assert requeue_changed(ostudy, *_planned(_load(tmp_path, *sets))) is None
    assert not _waiting(ostudy)


def test_an_attempt_that_failed_before_its_spec_was_written_is_retried_when_the_spec_builds(tmp_path):
    before = _load(tmp_path)
    ostudy, _ = open_study(before, completions_per_trial(before))
    queue_first_plan(ostudy, before, resolve_plan(before))
    failed = _fail_all(ostudy, before, write_spec=False)
    assert requeue_changed(ostudy, *_planned(_load(tmp_path))) is not None  # a spec builds now, none was written then
    assert sorted(record.retry_of(t) for t in _waiting(ostudy)) == failed


@pytest.mark.slow
def test_a_study_failed_on_a_trainer_key_completes_after_the_fix(tmp_path, study_here):
    """The issue's path: every trial fails on the study file; the user fixes it and runs the same command."""
    path = write_study(tmp_path, STUDY.replace("seeds: [0, 1]", "seeds: [0]"))
    args = ("run", str(path), "--set", f"study.output_dir={tmp_path / 'out'}")
    first = study_here(*args)
    assert first.returncode != 0 and "min_lr" in first.stderr + first.stdout
    second = study_here(*args, "--set", FIX)
    said = second.stdout + second.stderr
    assert second.returncode == 0, said
    assert "queued again 1 cell(s) that failed under an earlier version of the study file" in said
    trials = optuna.load_study(study_name="rt", storage=open_storage(str(tmp_path / "out" / "study.journal"))).get_trials()
    assert [record.outcome(t).value for t in trials] == ["failed", "completed"]
    assert record.retry_of(trials[1]) == 0
