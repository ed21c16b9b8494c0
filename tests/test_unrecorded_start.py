"""A trial this run asked whose start never reached the storage is "not recorded" at the run's end, never "running".

tests/test_study_e2e.py's full-disk test failed once in CI: the disk filled as the run asked the retry of an
interrupted trial, so the trial's owner (ledger.started) was never written; at the end the summary read "running 1"
for it, because `ended_here` knew a trial as this run's only by the owner record in the storage. The run now
keeps every trial it asked (Registry.taken). Here the write is left out by hand, on a real study and runner.
"""

from __future__ import annotations

from test_retry_due import _one_cell_study

from grpo_ablate.storage.store import open_artifact_store
from grpo_ablate.study import runner


def test_a_trial_asked_here_without_its_owner_recorded_is_not_running_once_the_run_ends(tmp_path, capsys):
    study, plan, storage, ostudy = _one_cell_study(tmp_path)
    run = runner.StudyRunner(study, ostudy, storage, open_artifact_store(study.output_dir), [{}], plan)
    with run.registry.lock:
        trial = run.lifecycle.ask_and_register()  # RUNNING in the storage; its start (owner, host, run) never written
    assert trial is not None
    run.registry.unregister(trial.number)  # the worker's path when recording the trial raised
    ft = ostudy.get_trials(deepcopy=False)[trial.number]
    assert ft.state.name == "RUNNING"
    assert run.ended_here(ft) == "this run ended without recording it"
    run.console.summary(study, ostudy, run.ended_here)
    out = capsys.readouterr().out
    assert "Trials: not recorded 1" in out and "running" not in out.split("Trials: ")[1].splitlines()[0]


def test_a_trial_another_run_asked_is_not_claimed_by_this_one(tmp_path):
    """Asked by another run, its owner not written yet (the window between its ask and its start): it may be
    running there, so this run does not call it unrecorded."""
    study, plan, storage, ostudy = _one_cell_study(tmp_path)
    run = runner.StudyRunner(study, ostudy, storage, open_artifact_store(study.output_dir), [{}], plan)
    other = ostudy.ask()
    assert run.ended_here(ostudy.get_trials(deepcopy=False)[other.number]) is None
