"""What `grpo-ablate run` says when planned trials are still queued at its end (commands/run.py exit_status).

    pytest tests/test_run_exit.py

A run that ends with queued trials of its own plan did not finish the study: it exits 1 and says why, and the
why must match the case. Trials the file still plans were queued after the run's last look (by another run of
the study: the retry of a trial it took over), and running the command again runs them; trials the file no
longer plans were left by an edit.
"""

from __future__ import annotations

import pytest

from helpers import ROOT

from grpo_ablate.commands.common import EXIT_FAILED, EXIT_OK
from grpo_ablate.commands.run import exit_status
from grpo_ablate.config import load_study
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.study.runner import StudyRun


@pytest.fixture(scope="module")
def tiny():
    study = load_study(ROOT / "studies/tiny-cpu.yaml")
    assert study.is_planned and not study.study.n_trials
    return study, resolve_plan(study)


def test_planned_trials_queued_late_are_named_as_planned_and_the_command_runs_them(tiny, capsys):
    study, plan = tiny
    left = [plan.cells[-1].key]
    assert exit_status(study, StudyRun(queued=left), plan) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"the study ended with 1 queued trial(s) that never ran ({left[0]})" in err
    assert "part of this study file's plan and were queued after this run found nothing left to start" in err
    assert "run the same command again" in err and "no longer part" not in err


def test_trials_the_file_no_longer_plans_are_named_as_an_edit(tiny, capsys):
    study, plan = tiny
    assert exit_status(study, StudyRun(queued=["G99xB32|T1|seed0"]), plan) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "the study ended with 1 queued trial(s) that never ran (G99xB32|T1|seed0)" in err
    assert "no longer part of this study file's plan" in err and "run the same command again" not in err


def test_the_users_own_trial_limit_is_not_a_failure(tiny, capsys):
    _, plan = tiny
    limited = load_study(ROOT / "studies/tiny-cpu.yaml", ["study.n_trials=3"])
    assert exit_status(limited, StudyRun(queued=[plan.cells[-1].key]), plan) == EXIT_OK
    assert "study.n_trials=3 reached" in capsys.readouterr().out
