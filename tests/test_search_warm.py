"""Warm starts: a new study queues the finished study's best arm first, learns from its results when they
match, never copies an out-of-memory trial as a result, and never runs a cell it imported again."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.config import load_study
from grpo_ablate.study.warm import warm_start
from grpo_ablate.study import ledger
from grpo_ablate.study.ledger import suggest_cell
from grpo_ablate.study.setup import describe_study, open_study
from grpo_ablate.records.trial_record import WARM_ROLE
from grpo_ablate.records import trial_record as record
from helpers import ROOT

optuna.logging.set_verbosity(optuna.logging.ERROR)
TINY = str(ROOT / "studies/tiny-cpu.yaml")
VALUE = {2: 0.5, 4: 0.9, 8: 0.7}  # G=4 is the previous best


def tpe_study(tmp_path: Path, name: str, *extra: str):
    journal = tmp_path / "journal.log"
    return load_study(TINY, ["study.sampler=tpe", f"study.name={name}", "num_generations=[2, 4, 8]",
                             "study.seeds=[0, 1]", f"study.storage={journal}", f"study.output_dir={tmp_path / name}",
                             "study.objectives=[{metric: final_reward}]", *extra])


def finished_study(tmp_path: Path, oom_g: int | None = None):
    """A real (hand-told) TPE study on the journal file; trials of G=`oom_g` run out of memory, as the ledger tells them."""
    study = tpe_study(tmp_path, "old")
    ostudy, created = open_study(study, completions_per_trial(study))
    assert created
    describe_study(ostudy, study, baseline_arm(study))
    for _ in range(8):
        trial = ostudy.ask()
        cell = suggest_cell(trial, study)
        if cell.arm.num_generations == oom_g:
            trial.set_user_attr(ledger.OUTCOME, "oom")
            trial.set_constraint(ledger.OOM_CONSTRAINT, 1.0)
            ostudy.tell(trial, 0.0)  # the placeholder an OOM trial is told with
            continue
        trial.set_user_attr(ledger.OUTCOME, "completed")
        trial.set_constraint(ledger.OOM_CONSTRAINT, -1.0)
        ostudy.tell(trial, VALUE[cell.arm.num_generations] + 0.01 * cell.seed)
    return study, ostudy


def _cells(trials) -> set[tuple[str, int]]:
    return {(c.arm.key, c.seed) for t in trials if (c := ledger.cell_of(t)) is not None}


def test_warm_start_enqueues_previous_best_first_and_feeds_the_sampler(tmp_path):
    old, old_ostudy = finished_study(tmp_path)
    best_g = max({record.arm_of(t).num_generations for t in old_ostudy.trials}, key=lambda g: VALUE[g])
    new = tpe_study(tmp_path, "new", "study.seeds=[0, 1, 2]")  # a seed the old study never ran
    ostudy, _ = open_study(new, completions_per_trial(new))
    describe_study(ostudy, new, baseline_arm(new))
    message = warm_start(ostudy, new, "old")
    assert "gave the sampler its 8 finished trial(s)" in message, message
    waiting = ostudy.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert record.role_of(waiting[0]) == WARM_ROLE
    copies = [t for t in ostudy.trials if record.is_copy(t)]
    assert len(copies) == 8 and all(t.state == TrialState.COMPLETE for t in copies)
    first = ostudy.ask()  # the queue comes before the sampler's own proposals
    cell = suggest_cell(first, new)
    assert cell.arm.num_generations == best_g
    assert record.arm_of(first).key == cell.arm.key
    assert (cell.arm.key, cell.seed) not in _cells(copies)  # the best arm, on a seed it has no result on


def test_a_warm_start_reruns_no_imported_cell(tmp_path):
    """Every trial the new study runs, queued or proposed, is a cell the old study did not give it."""
    finished_study(tmp_path)
    new = tpe_study(tmp_path, "new")  # the same seeds [0, 1]: the best arms were imported on both
    ostudy, _ = open_study(new, completions_per_trial(new))
    describe_study(ostudy, new, baseline_arm(new))
    message = warm_start(ostudy, new, "old")
    copies = [t for t in ostudy.trials if record.is_copy(t)]
    imported = _cells(copies)
    assert len(copies) == 8 and len(imported) == 8, imported  # the old study never repeated a cell either
    assert "not rerun, every seed already imported" in message, message
    ran = []
    for _ in range(12):  # the queue first, then the sampler's proposals, which favour the imported best arms
        trial = ostudy.ask()
        cell = suggest_cell(trial, new)
        ran.append((cell.arm.key, cell.seed))
        ostudy.tell(trial, VALUE[cell.arm.num_generations])
    assert not set(ran) & imported, sorted(set(ran) & imported)
    assert len(set(ran)) == len(ran)  # nor does it repeat a cell of its own


def test_a_warm_start_copies_no_out_of_memory_trial_as_a_result(tmp_path):
    old, old_ostudy = finished_study(tmp_path, oom_g=4)
    ooms = [t for t in old_ostudy.get_trials() if ledger.outcome(t) == "oom"]
    assert ooms and all(t.state == TrialState.COMPLETE and t.values == [0.0] for t in ooms)  # COMPLETE, like a result
    new = tpe_study(tmp_path, "new")
    ostudy, _ = open_study(new, completions_per_trial(new))
    describe_study(ostudy, new, baseline_arm(new))
    message = warm_start(ostudy, new, "old")
    copies = [t for t in ostudy.trials if record.is_copy(t)]
    assert len(copies) == 8 - len(ooms), message
    assert all(record.arm_of(t).num_generations != 4 and t.values != [0.0] for t in copies)
    assert "G4" not in message.split("queued first", 1)[1].split(";", 1)[0]  # nor queued as a best arm


def test_warm_start_from_other_hardware_only_enqueues(tmp_path):
    """Results from other hardware are not imported, so the best arm runs again here, at the first seed."""
    finished_study(tmp_path)
    new = tpe_study(tmp_path, "other-hw", "trainer.per_device_train_batch_size=16")
    ostudy, _ = open_study(new, completions_per_trial(new))
    message = warm_start(ostudy, new, "old")
    assert "not given to the sampler because hardware" in message, message
    assert not [t for t in ostudy.trials if record.is_copy(t)]
    cell = suggest_cell(ostudy.ask(), new)
    assert cell.arm.num_generations == 4


def test_the_report_says_why_imported_results_are_not_counted(tmp_path):
    from grpo_ablate.report.data import build_report_data

    finished_study(tmp_path)
    new = tpe_study(tmp_path, "new")
    ostudy, _ = open_study(new, completions_per_trial(new))
    describe_study(ostudy, new, baseline_arm(new))
    warm_start(ostudy, new, "old")
    trial = ostudy.ask()
    suggest_cell(trial, new)
    trial.set_user_attr(ledger.OUTCOME, "completed")
    ostudy.tell(trial, 0.5)
    data = build_report_data("new", record.study_attrs(ostudy), ostudy.get_trials())
    assert [r.number for r in data.records] == [trial.number]  # the copies are not evidence here
    notes = [w for w in data.warnings if w.kind == "imported"]
    assert len(notes) == 1 and notes[0].severity == "info"
    assert "8 result(s) imported by --warm-start from 'old'" in notes[0].message
