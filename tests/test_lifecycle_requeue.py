"""The one requeue: a cell is retried `max_retry` times for faults, then failed with the reason; stops are free.

A real Optuna study on a journal file; trials are asked and requeued as the lifecycle does.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from grpo_ablate.storage.store import open_storage
from grpo_ablate.study.ledger import ask, enqueue, requeue
from grpo_ablate.records import trial_record as record


def _study(tmp_path):
    storage = open_storage(str(tmp_path / "study.journal"))
    study = optuna.create_study(study_name="rq", storage=storage)
    enqueue(study, {"g": 4}, {"role": "baseline", "cell": "G4"})
    return study, storage


def _attempt(study) -> optuna.Trial:
    trial = ask(study, planned=True)
    assert trial is not None
    trial.suggest_int("g", 0, 1_000_000)  # wide: a retry that lost its params would not draw 4 by chance
    return trial


def test_faults_are_retried_max_retry_times_then_failed_with_the_reason(tmp_path):
    study, storage = _study(tmp_path)
    outcomes = []
    for _ in range(3):
        trial = _attempt(study)
        outcomes.append(requeue(study, storage, trial.number, "disk full", max_retry=2, counted=True))
    assert outcomes == ["interrupted", "interrupted", "failed"]
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL] * 3  # nothing left queued
    assert [record.retry_of(t) for t in trials] == [None, 0, 1]
    assert all(t.params == {"g": 4} and record.role_of(t) == "baseline" for t in trials)
    last, why = record.outcome(trials[-1]), record.reason(trials[-1]) or ""
    assert last == "failed" and "retried 2 time(s)" in why and "disk full" in why
    assert ask(study, planned=True) is None  # a planned study never gets a fresh proposal


def test_stops_the_user_asked_for_do_not_use_up_retries(tmp_path):
    study, storage = _study(tmp_path)
    for _ in range(4):  # Ctrl-C four times on the same cell
        trial = _attempt(study)
        assert requeue(study, storage, trial.number, "stopped", max_retry=1, counted=False) == "interrupted"
    trial = _attempt(study)
    assert requeue(study, storage, trial.number, "lost", max_retry=1, counted=True) == "interrupted"
    trial = _attempt(study)
    assert requeue(study, storage, trial.number, "lost again", max_retry=1, counted=True) == "failed"


def test_a_trial_already_finished_elsewhere_is_not_requeued_twice(tmp_path):
    study, storage = _study(tmp_path)
    trial = _attempt(study)
    assert requeue(study, storage, trial.number, "orchestrator died", max_retry=2, counted=True) == "interrupted"
    assert requeue(study, storage, trial.number, "orchestrator died", max_retry=2, counted=True) is None
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 1


def test_a_requeue_tried_again_after_its_state_was_written_still_queues_the_retry(tmp_path):
    """storage.patiently tries a call again after an outage that may have cut it short after the state was written
    and before the retry was queued: the same call (its token) finds its own end and queues the retry; a call of
    another process, with the same words, does not."""
    from grpo_ablate.study.ledger import requeue_token
    from grpo_ablate.records.trial_record import REQUEUED_BY

    study, storage = _study(tmp_path)
    trial = _attempt(study)
    token = requeue_token()
    storage.set_trial_user_attr(trial._trial_id, REQUEUED_BY, token)  # the first try, cut short after this
    storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
    assert requeue(study, storage, trial.number, "lost", max_retry=2, counted=True, token=requeue_token()) is None
    assert not study.get_trials(states=(TrialState.WAITING,))  # another call: not its retry to queue
    assert requeue(study, storage, trial.number, "lost", max_retry=2, counted=True, token=token) == "interrupted"
    assert [record.retry_of(t) for t in study.get_trials(states=(TrialState.WAITING,))] == [trial.number]
    assert requeue(study, storage, trial.number, "lost", max_retry=2, counted=True, token=token) == "interrupted"
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 1  # tried a third time: still one retry


def test_a_fault_before_the_params_were_suggested_requeues_the_queued_cell(tmp_path):
    study, storage = _study(tmp_path)
    trial = ask(study, planned=True)
    assert trial is not None and trial.params == {}
    requeue(study, storage, trial.number, "ENOSPC", max_retry=2, counted=True)
    retry = _attempt(study)
    assert retry.params == {"g": 4}
