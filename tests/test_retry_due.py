"""A run that finds a trial another run has just ended, its retry not queued yet, waits for the retry.

ledger.requeue writes twice: the trial's end (so a second reaper stops there), then its retry. A run
that looked between the two saw the trial ended, nothing queued and nothing running, ended, and exited
1 over a "queued trial that never ran" (tests/test_postgres_faults.py's same-host run, once in a CI
run: the retry came a moment later). A second window, after that fix: the retry landed between the run's ask
(the queue empty) and its look for retries due (the retry there, so none due), and the run ended with the
retry queued. Here the windows are made by hand, on a real study and a real runner.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import ROOT
from grpo_ablate.config import load_study
from grpo_ablate.core.vocab import Outcome
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.records.trial_record import OUTCOME, REASON, REQUEUED_BY
from grpo_ablate.storage.store import open_artifact_store, open_storage
from grpo_ablate.study import ledger, runner
from grpo_ablate.study.setup import open_study, queue_first_plan


def _one_cell_study(tmp: Path):
    study = load_study(ROOT / "studies" / "tiny-cpu.yaml", [
        f"study.output_dir={tmp / 'out'}", "num_generations=[2]", "temperature=1.0", "study.baseline={}",
        "study.seeds=[0]", "study.pruner=none"])
    plan = resolve_plan(study)
    storage = open_storage(study.storage_url)
    ostudy, _ = open_study(study, plan.completions, storage=storage)
    queue_first_plan(ostudy, study, plan)
    return study, plan, storage, ostudy


def _ended_by_another_run(ostudy, storage) -> int:
    """Another host's trial of the one cell, ended by a run that took it over: requeue's first write only."""
    trial = ostudy.ask()  # the queued cell, RUNNING as another host's
    trial_id = trial._trial_id
    storage.set_trial_user_attr(trial_id, REQUEUED_BY, "another-run")
    storage.set_trial_user_attr(trial_id, OUTCOME, Outcome.INTERRUPTED.value)
    storage.set_trial_user_attr(trial_id, REASON, "its orchestrator died")
    from optuna.trial import TrialState

    storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    return trial.number


@pytest.mark.parametrize("retry_comes", [True, False])
def test_a_run_waits_for_the_retry_another_run_is_about_to_queue(tmp_path, monkeypatch, retry_comes):
    study, plan, storage, ostudy = _one_cell_study(tmp_path)
    number = _ended_by_another_run(ostudy, storage)
    assert ledger.retries_due(ostudy.get_trials(deepcopy=False)) == {number}
    run = runner.StudyRunner(study, ostudy, storage, open_artifact_store(study.output_dir), [{}], plan)
    assert run._next_trial() == runner.WAIT  # not None: the run does not end with the retry about to come
    if retry_comes:
        ledger._retry(ostudy, ostudy.get_trials(deepcopy=False)[number])  # requeue's second write
        assert ledger.retries_due(ostudy.get_trials(deepcopy=False)) == set()
        trial = run._next_trial()
        assert not isinstance(trial, str) and trial is not None  # the retry, taken by this run
        assert ledger.retry_of(ostudy.get_trials(deepcopy=False)[trial.number]) == number
    else:  # the run that ended it died between its two writes: waited for at most RETRY_DUE_S, then the run ends
        monkeypatch.setattr(runner, "RETRY_DUE_S", 0.0)
        assert run._next_trial() is None


def test_a_trial_failed_for_good_or_already_retried_is_not_waited_for(tmp_path):
    _, _, storage, ostudy = _one_cell_study(tmp_path)
    number = _ended_by_another_run(ostudy, storage)
    ledger._retry(ostudy, ostudy.get_trials(deepcopy=False)[number])
    assert ledger.retries_due(ostudy.get_trials(deepcopy=False)) == set()  # its retry is queued
    retry = ostudy.ask()
    storage.set_trial_user_attr(retry._trial_id, REQUEUED_BY, "another-run")
    storage.set_trial_user_attr(retry._trial_id, OUTCOME, Outcome.FAILED.value)  # retries spent: no retry comes
    from optuna.trial import TrialState

    storage.set_trial_state_values(retry._trial_id, state=TrialState.FAIL)
    assert ledger.retries_due(ostudy.get_trials(deepcopy=False)) == set()


def test_a_retry_queued_between_the_ask_and_the_look_for_retries_due_is_taken(tmp_path, monkeypatch):
    """The other run's second write lands just after this run's ask found the queue empty: the run looks again."""
    study, plan, storage, ostudy = _one_cell_study(tmp_path)
    number = _ended_by_another_run(ostudy, storage)
    run = runner.StudyRunner(study, ostudy, storage, open_artifact_store(study.output_dir), [{}], plan)
    ask = ledger.ask

    def empty_then_retry_lands(ostudy_, planned):
        monkeypatch.setattr(ledger, "ask", ask)  # once
        ledger._retry(ostudy, ostudy.get_trials(deepcopy=False)[number])  # requeue's second write, after the ask's read
        return None

    monkeypatch.setattr(ledger, "ask", empty_then_retry_lands)
    assert run._next_trial() == runner.WAIT  # not None: the retry queued meanwhile is not left behind
    trial = run._next_trial()
    assert not isinstance(trial, str) and trial is not None
    assert ledger.retry_of(ostudy.get_trials(deepcopy=False)[trial.number]) == number
