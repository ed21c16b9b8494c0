"""How a study's run ends: all out of memory, cells left queued (issue 23, items 4 and 8).

    pytest tests/test_study_end.py

Real Optuna studies on a real journal file, with trials recorded as the lifecycle records them;
the end-to-end runs are in test_study_e2e.py.
"""

from __future__ import annotations

import optuna

from grpo_ablate.records import trial_record as record
from grpo_ablate.config import load_study
from grpo_ablate.files.owned import Owner
from grpo_ablate.plan.cells import resolved_trial_count
from grpo_ablate.files.probe_file import Probe, ProbePoint, save_probe
from grpo_ablate.storage.store import open_storage
from grpo_ablate.study.runner import all_oom_message, queued_beyond_budget, queued_cells


def _study(tmp_path, *sets: str):
    return load_study("studies/tiny-cpu.yaml", ["study.name=end", f"study.output_dir={tmp_path / 'out'}", *sets])


def _ostudy(study) -> optuna.Study:
    return optuna.create_study(study_name=study.study.name, storage=open_storage(study.storage_url),
                               directions=study.directions)


def _finished(ostudy: optuna.Study, outcome: str, g: int, b: int, reason: str = "") -> None:
    ostudy.add_trial(optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE if outcome != "failed" else optuna.trial.TrialState.FAIL,
        values=None if outcome == "failed" else [0.0],
        user_attrs={record.OUTCOME: outcome, "num_generations": g, "generation_batch_size": b, "temperature": 1.0,
                    record.REASON: reason, record.CELL: f"G{g}-B{b}"}))


def test_every_trial_out_of_memory_is_a_failed_study_with_what_fit(tmp_path):
    study = _study(tmp_path)
    ostudy = _ostudy(study)
    _finished(ostudy, "oom", 8, 64, "CUDA out of memory (tried to allocate 2 GiB)")
    _finished(ostudy, "oom", 2, 32, "CUDA out of memory")
    message = all_oom_message(ostudy, study)
    assert message is not None and "\n" not in message
    assert "2 of 2 finished trial(s) ran out of memory (at G=2, batch 32, T=1; G=8, batch 64, T=1;" in message
    assert "CUDA out of memory" in message
    assert "grpo-ablate probe" in message  # nothing known to fit: the way to find out
    save_probe(study.output_dir, Probe(owner=Owner.of(study), points=[ProbePoint(2, 16, True, "completed"),
                                                           ProbePoint(2, 32, False, "oom")]))
    assert "largest configuration that fit in the probe is G=2, generation batch 16" in all_oom_message(ostudy, study)
    _finished(ostudy, "completed", 2, 16)
    assert all_oom_message(ostudy, study) is None  # one trial fit: an ordinary study with OOM trials


def test_failures_and_ooms_with_nothing_that_fit_count_too(tmp_path):
    study = _study(tmp_path)
    ostudy = _ostudy(study)
    _finished(ostudy, "failed", 2, 32, "reward raised")
    assert all_oom_message(ostudy, study) is None  # all failed: the all-failed message says it
    _finished(ostudy, "oom", 8, 64)
    assert "1 of 2 finished trial(s) ran out of memory" in all_oom_message(ostudy, study)


def test_queued_cells_beyond_n_trials_are_named(tmp_path):
    study = _study(tmp_path, "study.n_trials=2")
    ostudy = _ostudy(study)
    _finished(ostudy, "completed", 8, 32)
    _finished(ostudy, "completed", 2, 32)
    assert queued_cells(ostudy) == [] and queued_beyond_budget(ostudy, resolved_trial_count(study)) is None
    for seed in (1, 2):
        ostudy.enqueue_trial({"g": 0}, user_attrs={record.CELL: f"G8-B32-T1.0-s{seed}", record.ROLE: "ablation"})
    assert queued_cells(ostudy) == ["G8-B32-T1.0-s1", "G8-B32-T1.0-s2"]
    note = queued_beyond_budget(ostudy, resolved_trial_count(study))
    assert note is not None and "only 0 of the 2 queued" in note and "raise study.n_trials to 4" in note
