"""Experiment trackers per trial: report_to for every trial, runs grouped by study and named by arm and seed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from helpers import unavailable
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.core.vocab import Arm, Cell

CELL = Cell(Arm(4, 32, 0.9), 1, "grid")


def _study(tmp_path: Path, *sets: str):
    return load_study("studies/tiny-cpu.yaml", [f"study.output_dir={tmp_path / 'out'}", *sets])


def test_trackers_name_and_group_each_trial(tmp_path):
    pytest.importorskip("tensorboard")
    study = _study(tmp_path, "study.trackers=[tensorboard]")
    spec = build_spec(study, CELL, tmp_path / "trial", {"CUDA_VISIBLE_DEVICES": ""})
    assert spec.trainer["report_to"] == ["tensorboard"]
    assert spec.trainer["run_name"] == "G4-B32-T0.9-s1" and spec.trainer["project"] == "tiny-cpu"
    assert spec.env["WANDB_RUN_GROUP"] == "tiny-cpu" and spec.env["CUDA_VISIBLE_DEVICES"] == ""
    assert spec.env["TENSORBOARD_LOGGING_DIR"] == str((tmp_path / "out" / "tensorboard" / "G4-B32-T0.9-s1").resolve())


def test_trainer_report_to_passes_through_and_off_means_off(tmp_path):
    spec = build_spec(_study(tmp_path, "trainer.report_to=[tensorboard]"), CELL, tmp_path / "t")
    assert spec.trainer["report_to"] == ["tensorboard"] and spec.trainer["run_name"] == "G4-B32-T0.9-s1"
    spec = build_spec(_study(tmp_path), CELL, tmp_path / "t")
    assert "report_to" not in spec.trainer and "WANDB_RUN_GROUP" not in spec.env


def test_a_tracker_that_is_not_installed_is_named(tmp_path):
    if importlib.util.find_spec("swanlab") is not None:
        unavailable("swanlab is installed, so its not-installed message cannot be shown")
    with pytest.raises(StudyError, match=r"study.trackers.0: swanlab is not installed.*pip install swanlab"):
        _study(tmp_path, "study.trackers=[swanlab]")


@pytest.mark.slow
def test_tensorboard_run_of_a_real_trial(study_here, tmp_path):
    """One real 3-step trial with TensorBoard on: its events file holds the trial's rewards under its run name."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "out"
    res = study_here("run-one", "studies/tiny-cpu.yaml", "--set", f"study.output_dir={out}", "--set",
                     "study.trackers=[tensorboard]", "--set", "budget.max_steps=3", "--set", "num_generations=4",
                     "--set", "study.seeds=[0]", "--trial-dir", str(tmp_path / "trial"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = (out / "tensorboard").iterdir()
    assert run_dir.name.startswith("G4-B32-T") and run_dir.name.endswith("-s0")
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "train/reward" in tags and len(acc.Scalars("train/reward")) >= 1
