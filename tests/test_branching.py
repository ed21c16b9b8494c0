"""Arms that branch from one shared prefix (budget.branch_from, issue 39): the plan, the trial specs, the
validation and the ledger's dependency, without training (tests/test_branching_e2e.py trains)."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest

from grpo_ablate.records import trial_record as record
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.plan.cells import racing_round, resolved_trial_count, study_plan
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.study import ledger
from grpo_ablate.study.runner import blocked_branches
from grpo_ablate.study.setup import queue_ready_branches
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import CheckpointSpec, StartFrom
from grpo_ablate.core.vocab import PREFIX_ROLE, Outcome
from helpers import ROOT

TINY = str(ROOT / "studies/tiny-cpu.yaml")
# tiny-cpu with a linear schedule over a 100-step full run that warms up for 3 steps; arms branch at its end
BRANCHING = ["budget.max_steps=2", "budget.branch_from=warmup", "budget.full_run={max_steps: 100}",
             "trainer.warmup_steps=3", "trainer.lr_scheduler_type=linear", "study.seeds=[0, 1]"]


def branching(*more: str):
    return load_study(TINY, [*BRANCHING, *more])


def test_each_seed_trains_its_prefix_first_then_its_branches():
    study = branching()
    cells = study_plan(study)
    assert [(c.role, c.seed) for c in cells] == [
        (role, s) for s in (0, 1) for role in (PREFIX_ROLE, "baseline", "num_generations=2", "temperature=0.3")]
    prefix, baseline = cells[0], cells[1]
    assert prefix.arm == baseline.arm and prefix.key != baseline.key  # the baseline arm, its own cell
    assert resolved_trial_count(study) == 8 == len(cells)  # the prefixes are trials, one per seed
    assert [c.role for c in study_plan(load_study(TINY, ["study.seeds=[0]"]))][0] == "baseline"  # no branch_from: none


def test_a_racing_round_holds_its_seeds_prefixes_whatever_arms_are_live():
    study = branching("study.seeds=[0, 1, 2]", "study.racing={first_round_seeds: 2}")
    first = racing_round(study, 1)
    assert sorted((c.seed, c.role) for c in first if c.role == PREFIX_ROLE) == [(0, PREFIX_ROLE), (1, PREFIX_ROLE)]
    live = {study_plan(study)[2].arm.key}  # the G=2 arm alone: the baseline was dropped
    second = racing_round(study, 2, live)
    assert [(c.role, c.seed) for c in second] == [(PREFIX_ROLE, 2), ("num_generations=2", 2)]


def test_a_prefix_trains_to_the_branch_point_and_a_branch_its_budget_from_there(tmp_path):
    study = branching("budget.max_steps=null", "budget.completions=64")
    prefix, g2 = study_plan(study)[0], study_plan(study)[2]
    spec = build_spec(study, prefix, tmp_path / "p")
    assert spec.max_steps == 3 and spec.checkpoint == CheckpointSpec(every=study.study.checkpoint_steps, keep=False, final=True)
    assert spec.budget.completions is None and spec.start_from is None
    point = StartFrom(str(tmp_path / "p" / "checkpoints" / "checkpoint-3"), 3)
    branch = build_spec(study, g2, tmp_path / "b", start_from=point)
    plain = build_spec(study, g2, tmp_path / "c")
    # 64 completions are 2 steps of 32 for every arm: from step 3 the branch trains to step 5, and its own
    # completions and evaluation points are the budget's, as a trial from step 0 has them
    assert (branch.max_steps, branch.completions, branch.eval_budget) == (3 + plain.max_steps, plain.completions,
                                                                         plain.eval_budget)
    assert branch.start_from == point and branch.checkpoint is not None and not branch.checkpoint.final


@pytest.mark.parametrize("change, words", [
    (["study.sampler=tpe"], "grid or ablation"),
    (["budget.max_steps=null", "budget.seconds=60"], "budget.max_steps or budget.completions"),
    (["budget.full_run=null"], "set budget.full_run"),
    (["budget.lr_schedule=compressed"], "schedule must be the full run's"),
    (["trainer.warmup_steps=0"], "no warmup"),
    (["budget.branch_from=100"], "not inside the full run's 100 steps"),
])
def test_a_branch_point_the_study_cannot_place_is_a_validation_problem(change, words):
    with pytest.raises(StudyError) as e:
        branching(*change)
    problems = [p for p in e.value.problems if p.path == "budget.branch_from"]
    assert problems and words in problems[0].message, e.value.problems


def _study_with_plan(study):
    ostudy = optuna.create_study(storage=optuna.storages.InMemoryStorage(), directions=study.directions)
    ledger.queue(ostudy, study, study_plan(study))
    return ostudy


def _finish(ostudy, study, number: int, outcome: Outcome, folder: Path) -> None:
    """Run queued trial `number` to `outcome` as the lifecycle would (its cell drawn, its folder, its end told)."""
    trial = ledger.ask(ostudy, planned=True)
    assert trial is not None and trial.number == number
    ledger.suggest_cell(trial, study)
    ledger.set_trial_dir(trial, folder)
    result = TrialResult(outcome, reason="it broke" if outcome is Outcome.FAILED else None,
                         metrics={m: 0.5 for m in study.metric_names})
    assert ledger.tell(ostudy, trial, study, result) is outcome


def test_branches_are_queued_only_once_their_seeds_prefix_completed(tmp_path):
    study = branching()
    ostudy = _study_with_plan(study)
    waiting = [record.cell_key(t) for t in ostudy.get_trials(deepcopy=False)]
    assert waiting == [c.key for c in study_plan(study) if c.role == PREFIX_ROLE]  # nothing that depends on them
    assert queue_ready_branches(ostudy, study, resolve_plan(study)) == 0
    _finish(ostudy, study, 0, Outcome.COMPLETED, tmp_path / "00000")
    # a resumed run queues the whole plan again: the branches of the prefix that completed (a crash between its
    # end and its branches' queueing loses none), nothing of the seed whose prefix has not
    assert ledger.queue(ostudy, study, study_plan(study)) == 3  # seed 0's three arms, not seed 1's
    assert queue_ready_branches(ostudy, study, resolve_plan(study)) == 0  # queued once
    _finish(ostudy, study, 1, Outcome.FAILED, tmp_path / "00001")
    assert queue_ready_branches(ostudy, study, resolve_plan(study)) == 0  # a failed prefix starts no branch
    trials = ostudy.get_trials(deepcopy=False)
    assert {record.seed_of(t) for t in trials if not record.is_prefix(t)} == {0}
    # the end of the run says why seed 1's arms never ran
    assert blocked_branches(ostudy, resolve_plan(study)) == ["seed 1: its prefix (trial 1) failed (it broke), so its 3 branch(es) "
                                               "did not run"]
    prefix = trials[0]
    # a prefix is no arm's result: the report, the race and the verdict read arms through these
    assert record.is_prefix(prefix) and not record.is_result(prefix) and record.arm_of(prefix) is None
    assert record.is_finished(prefix)  # but it ran: it counts toward the study's trials
    # racing never cancels a prefix with the baseline arm it trains
    assert ledger.cancel_queued(ostudy, [study_plan(study)[0].arm.key], "dropped") == 1  # seed 0's baseline branch
    assert record.outcome(ostudy.get_trials(deepcopy=False)[0]) is Outcome.COMPLETED


def test_a_queued_prefix_is_not_cancelled_with_its_arm():
    study = branching()
    ostudy = _study_with_plan(study)
    assert ledger.cancel_queued(ostudy, [study_plan(study)[0].arm.key], "dropped") == 0


def test_a_branch_point_placed_only_when_the_dataset_is_read_is_refused_like_a_validation_problem():
    """Open R1's recipe warms up for 0.1 of a full run counted in epochs over a hub dataset: without its size
    (budget.full_run.prompts) the branch point cannot be placed, and `plan` says so as it says any problem."""
    from helpers import cli_inprocess

    openr1 = str(ROOT / "studies/openr1-1.5b-numina-8gpu.yaml")
    res = cli_inprocess("plan", openr1, "--set", "budget.branch_from=warmup")
    assert res.returncode == 2 and "budget.branch_from: warmup is 0.1 of the full run" in res.stderr, res.stderr
    assert "budget.full_run.prompts" in res.stderr
    placed = cli_inprocess("plan", openr1, "--set", "budget.branch_from=warmup", "--set", "budget.full_run.prompts=93733")
    assert placed.returncode == 0 and re.search(r"^\s+0\. prefix\s+G=7", placed.stdout, re.M), placed.stdout


def test_a_race_queues_the_branches_of_its_live_arms_only(tmp_path):
    study = branching("study.seeds=[0, 1, 2]", "study.racing={first_round_seeds: 2}")
    ostudy = optuna.create_study(storage=optuna.storages.InMemoryStorage(), directions=study.directions)
    assert ledger.queue(ostudy, study, racing_round(study, 1)) == 2  # the round's two prefixes, no branch yet
    _finish(ostudy, study, 0, Outcome.COMPLETED, tmp_path / "00000")
    live = study_plan(study)[2].arm.key
    ledger.set_race(ostudy, {"round": 1, "live": [live], "decided": False})
    assert queue_ready_branches(ostudy, study, resolve_plan(study)) == 1
    assert [record.cell_key(t) for t in ostudy.get_trials(deepcopy=False)][-1] == study_plan(study)[2].key
    ledger.set_race(ostudy, {"round": 1, "live": [live], "decided": True})
    _finish(ostudy, study, 1, Outcome.COMPLETED, tmp_path / "00001")
    assert queue_ready_branches(ostudy, study, resolve_plan(study)) == 0  # a decided race runs nothing more
