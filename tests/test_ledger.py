"""The trial ledger: one outcome rule, one params encoding, one queue, one requeue (local and heartbeat alike).

Real Optuna studies (in memory, a journal file, a PostgreSQL server); trials are asked and told
as the lifecycle does, without training.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from grpo_ablate.config import load_study
from grpo_ablate.plan.cells import study_plan
from grpo_ablate.records.trial_record import G_PARAM, LABEL_PARAM, arm_fields, trial_arm
from grpo_ablate.storage.store import open_storage
from grpo_ablate.study import ledger
from grpo_ablate.core.vocab import Arm, Cell, Outcome
from grpo_ablate.records import trial_record as record
from helpers import ROOT, fail_when_stale

optuna.logging.set_verbosity(optuna.logging.ERROR)
TINY = str(ROOT / "studies/tiny-cpu.yaml")


def _grid(tmp_path: Path, *extra: str):
    return load_study(TINY, ["study.sampler=grid", "num_generations=[2, 8]", "temperature=[0.3, 1.0]", "study.seeds=[0, 1]",
                             f"study.output_dir={tmp_path / 'run'}", *extra])


# ---------------------------------------------------------------- the outcome rule


def test_the_outcome_rule():
    rule = ledger.outcome_of
    assert rule("COMPLETE", {}, {"oom": -1.0}) is Outcome.COMPLETED
    assert rule("COMPLETE", {}, {"oom": 1.0}) is Outcome.OOM  # a violated constraint, whatever the attrs lack
    assert rule("COMPLETE", {}, {}) is Outcome.COMPLETED
    assert rule("COMPLETE", {"outcome": "oom"}, {}) is Outcome.OOM
    assert rule("PRUNED", {}, {}) is Outcome.PRUNED
    assert rule("FAIL", {}, {}) is Outcome.FAILED
    assert rule("FAIL", {"outcome": "interrupted"}, {}) is Outcome.INTERRUPTED
    lost = {ledger.ON_LOSS: {"outcome": "interrupted", "reason": "its heartbeat went stale"}}
    assert rule("FAIL", lost, {}) is Outcome.INTERRUPTED  # failed by Optuna's stale-trial path
    assert rule("FAIL", {**lost, "outcome": "failed"}, {}) is Outcome.FAILED  # its own word wins
    assert rule("RUNNING", lost, {}) is Outcome.RUNNING  # what it would become if lost, not what it is
    assert rule("WAITING", {}, {}) is Outcome.QUEUED  # queued is not running (issue 52: "running" after --n-trials)


def test_an_oom_trial_is_finished_but_no_result():
    """Through the public FrozenTrial.constraints: the constraint Optuna 5 stores as "constraints:oom"."""
    study = optuna.create_study(direction="maximize")
    oom, done = study.ask(), study.ask()
    oom.set_constraint(ledger.OOM_CONSTRAINT, 1.0)
    study.tell(oom, 0.0)  # the placeholder value an OOM trial is told with
    done.set_constraint(ledger.OOM_CONSTRAINT, -1.0)
    study.tell(done, 0.5)
    a, b = study.get_trials()
    assert ledger.outcome(a) is Outcome.OOM and ledger.is_finished(a) and not ledger.is_result(a)
    assert ledger.outcome(b) is Outcome.COMPLETED and ledger.is_result(b)


# ---------------------------------------------------------------- the encoding and the queue


def test_a_planned_cell_round_trips_through_its_params(tmp_path):
    study = _grid(tmp_path)
    ostudy = optuna.create_study(direction="maximize")
    cells = study_plan(study)
    assert ledger.queue(ostudy, study, cells) == len(cells) == 8
    assert ledger.queue(ostudy, study, cells) == 0  # matched on the cell: two seeds of one arm are two cells
    waiting = ostudy.get_trials(states=(TrialState.WAITING,))
    assert all(set(record.queued_params(t)) == {G_PARAM, "temperature"} for t in waiting)  # no seed param
    drawn = []
    while (trial := ledger.ask(ostudy, planned=True)) is not None:
        drawn.append(ledger.suggest_cell(trial, study))
        ostudy.tell(trial, 0.0)
    assert [(c.arm, c.seed, c.role) for c in drawn] == [(c.arm, c.seed, c.role) for c in cells]
    assert all("seed" not in t.params for t in ostudy.get_trials())


def test_batches_searched_name_the_pair_and_readers_decode_it(tmp_path):
    study = _grid(tmp_path, "generation_batch_size=[32, 64]")
    params, dists = ledger.cell_params(study, Arm(8, 64, 1.0))
    assert params == {LABEL_PARAM: "8x64", "temperature": 1.0} and set(dists) == set(params)
    assert Arm.from_mapping(arm_fields(params, study.space)) == Arm(8, 64, 1.0)  # a trial that wrote no attrs, through the space
    assert arm_fields(params) == {"temperature": 1.0}  # without the study's space a label is not parsed
    assert ledger.cell_params(study, Arm(3, 64, 1.0)) is None  # not feasible: never queued


def test_the_arm_of_a_trial_without_attributes_is_read_from_its_params_in_one_place(tmp_path):
    """trial_record.trial_arm: the report and `smoke` both read a trial's arm there; its attributes win when written."""
    study = _grid(tmp_path, "generation_batch_size=[32, 64]")
    params, dists = ledger.cell_params(study, Arm(8, 64, 1.0))
    ostudy = optuna.create_study(direction="maximize")
    failed = optuna.trial.create_trial(params=params, distributions=dists, state=TrialState.FAIL)
    ostudy.add_trial(failed)
    trial = ostudy.get_trials()[0]
    assert trial_arm(trial, study.space) == Arm(8, 64, 1.0)  # the label looked up in the study's space
    assert trial_arm(trial) is None  # without the space the label is not read, and temperature alone is no arm
    written = optuna.trial.create_trial(params=params, distributions=dists, state=TrialState.FAIL,
                                        user_attrs={**Arm(8, 32, 1.0).as_dict()})
    assert trial_arm(written, study.space) == Arm(8, 32, 1.0)  # what the trial wrote wins over its params


def test_an_adaptive_proposal_takes_a_seed_its_arm_has_not_run(tmp_path):
    study = load_study(TINY, ["study.sampler=random", "num_generations=[2]", "temperature=1.0", "study.seeds=[0, 1]",
                              f"study.output_dir={tmp_path / 'run'}"])
    ostudy = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    ledger.queue(ostudy, study, [Cell(Arm(2, 32, 1.0), 1, "advise")])  # seed 1 first, queued
    seeds = []
    for _ in range(4):
        trial = ostudy.ask()
        seeds.append(ledger.suggest_cell(trial, study).seed)
        ostudy.tell(trial, 0.0)
    assert seeds == [1, 0, 2, 3]  # then the unused listed seed, then past the list: a repeat would rerun a trial


# ---------------------------------------------------------------- one requeue, two paths


def _start(ostudy, study, *, heartbeat: bool, max_retry: int):
    trial = ledger.ask(ostudy, planned=True)
    assert trial is not None
    ledger.started(trial, "host-a", 4242, heartbeat=heartbeat, max_retry=max_retry)
    ledger.suggest_cell(trial, study)
    return trial


def _ended(ostudy) -> list[tuple[str, bool]]:
    """(outcome, a retry was queued) per finished attempt, and each attempt's counted retries."""
    trials = {t.number: t for t in ostudy.get_trials()}
    out = []
    for t in trials.values():
        if t.state == TrialState.FAIL:
            retried = any(record.retry_of(u) == t.number for u in trials.values())
            out.append((ledger.outcome(t).value, retried, ledger.counted_retries(trials, t)))
    return out


@pytest.mark.slow
def test_a_dead_workers_trial_on_postgres_ends_like_a_local_requeue(tmp_path, fresh_pg_db):
    """A trial whose heartbeat goes stale on PostgreSQL is requeued by the ledger (installed as the storage's
    stale-trial callback) with the same outcome, cell and retry count as the local requeue of a dead orchestrator."""
    max_retry = 1
    study = _grid(tmp_path, "num_generations=[2]", "temperature=1.0", "study.seeds=[0]")
    cells = study_plan(study)
    assert len(cells) == 1

    local_storage = open_storage(str(tmp_path / "local.journal"))
    local = optuna.create_study(study_name="local", storage=local_storage)
    ledger.queue(local, study, cells)
    pg_storage = open_storage(fresh_pg_db, heartbeat_interval=1, grace_period=2,
                              stale_trial_callback=ledger.StaleTrialRequeue(max_retry))
    pg = optuna.create_study(study_name="pg", storage=pg_storage)
    ledger.queue(pg, study, cells)

    for _ in range(max_retry + 1):  # the first loss is retried, the second gives up
        trial = _start(local, study, heartbeat=False, max_retry=max_retry)
        ledger.requeue(local, local_storage, trial.number, "its orchestrator (pid 4242 on host-a) died",
                       max_retry=max_retry, counted=True)

        trial = _start(pg, study, heartbeat=True, max_retry=max_retry)
        pg_storage.record_heartbeat(trial._trial_id)
        fail_when_stale(pg, trial.number)  # the worker "died": no heartbeat past the 2 s grace period

    assert _ended(local) == _ended(pg) == [("interrupted", True, 0), ("failed", False, 1)]
    for ostudy in (local, pg):
        trials = ostudy.get_trials()
        assert [t.state for t in trials] == [TrialState.FAIL, TrialState.FAIL]  # nothing left queued
        assert {record.cell_key(t) for t in trials} == {cells[0].key}
        assert trials[1].params == trials[0].params and record.retry_of(trials[1]) == 0
    lost = pg.get_trials()[1]
    assert "retried 1 time(s)" in ledger.reason(lost) and "heartbeat went stale" in ledger.reason(lost)


def test_a_prefix_cells_seed_is_read_from_its_key():
    """A prefix's cell key ends in "|prefix": its seed was read as None, so a prefix queued again (a retry, or a
    prefix trained again for a damaged checkpoint) was given the first unused seed instead of its own (issue 52)."""
    from grpo_ablate.records.trial_record import CELL, seed_of
    from grpo_ablate.core.vocab import PREFIX_ROLE, Arm, Cell

    for role in ("baseline", PREFIX_ROLE):
        assert seed_of({CELL: Cell(Arm(4, 8, 1.0), 2, role).key}) == 2
