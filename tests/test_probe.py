"""The probe: the memory cap, probe.json's space, and a real boundary under a cap.

    pytest tests/test_probe.py                  # the cap on a real process, the probed space
    pytest -m slow tests/test_probe.py          # real probe trials on the tiny model under a cap
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.config import load_study
from grpo_ablate.files.reader import Owner
from grpo_ablate.files.probe_file import Probe, ProbePoint, load_probe, probe_table, save_probe
from grpo_ablate.preflight.probe import candidate_batches, measure_point, run_probe
from grpo_ablate.trainer.memory_cap import group_rss_mb
from helpers import ROOT



def _study_file(tmp_path: Path, *, cap: int | None = None, batches: str = "probed", gens: str = "[2, 4]") -> Path:
    cap_line = f"  memory_limit_mb: {cap}\n" if cap else ""
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(f"""\
        study:
          name: probe-test
          output_dir: {tmp_path / 'run'}
          sampler: tpe
          n_trials: 4
          trial_timeout: 300
        model:
          name_or_path: builtin:tiny
        data:
          task: addition
          num_prompts: 4096
        trainer:
          per_device_train_batch_size: 16
          max_completion_length: 6
          beta: 0.0
        hardware:
        """) + cap_line + textwrap.dedent(f"""\
          command: python
        search:
          num_generations: {gens}
          generation_batch_size: {batches}
          max_generation_batch_size: 64
        budget:
          max_steps: 20
        """))
    return path


def test_memory_cap_kills_a_real_process_over_the_cap_and_records_oom(tmp_path):
    code = textwrap.dedent(f"""
        import time
        from grpo_ablate.contract.spec import HardwareSpec
        from grpo_ablate.trainer.memory_cap import start_memory_watch
        start_memory_watch({str(tmp_path)!r}, HardwareSpec(memory_limit_mb=300))
        block = bytearray(400 * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(60)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, start_new_session=True, timeout=60,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["outcome"] == "oom" and "memory_limit_mb=300" in result["reason"] and result["peak_rss_mb"] > 300
    assert json.loads((tmp_path / "memory.json").read_text())["peak_rss_mb"] > 300
    assert "MemoryError" in proc.stdout


def test_the_split_uses_the_timed_rollout_and_falls_back_to_steps_that_only_trained():
    from grpo_ablate.preflight.probe import _timing

    timed = [{"step_time": 2.0, "generation_seconds": 1.5, "completions": 16},
             {"step_time": 1.0, "generation_seconds": 0.0, "completions": 0}]
    t = _timing(timed)
    assert (t["seconds_per_step"], t["generation_seconds_per_step"], t["training_seconds_per_step"]) == (1.5, 0.75, 0.75)
    older = [{k: v for k, v in r.items() if k != "generation_seconds"} for r in timed]  # rows of an earlier version
    t = _timing(older)
    assert (t["generation_seconds_per_step"], t["training_seconds_per_step"]) == (0.5, 1.0)


def test_group_rss_counts_this_process():
    assert group_rss_mb(os.getpgrp()) > 10


def test_probed_space_keeps_each_gs_largest_fit_and_drops_oom_pairs(tmp_path):
    path = _study_file(tmp_path)
    before = load_study(path)
    assert any("probe.json does not exist" in w for w in before.warnings)
    assert candidate_batches(before) == {2: [16, 32, 48, 64], 4: [16, 32, 48, 64]}
    points = [ProbePoint(2, 32, True, "completed", seconds_per_step=0.1), ProbePoint(2, 64, False, "oom", reason="cap"),
              ProbePoint(4, 16, True, "completed"), ProbePoint(4, 32, False, "oom")]
    save_probe(tmp_path / "run", Probe(owner=Owner.of(before), points=points, total_seconds=3.0, one_trial_estimate_s=60.0))
    study = load_study(path)
    assert [(p.num_generations, p.generation_batch_size) for p in study.space.feasible] == [(2, 32), (4, 16)]
    assert {(r.num_generations, r.generation_batch_size) for r in study.space.rejected} >= {(2, 64), (4, 32)}
    table = probe_table(load_probe(tmp_path / "run", Owner.of(study)))
    assert "one full trial is estimated at 60 s" in table
    from grpo_ablate.commands.plan_words import plan_text

    text = plan_text(study)  # no trial has run: the plan's wall time is the probe's, beside the probe's own cost
    assert "Wall time: about 60 s per trial, 4 min for 4 trials; from the probe's pace" in text
    assert "in 3 s; one full trial is estimated at 60 s" in text
    auto = load_study(_study_file(tmp_path, batches="auto"))  # auto keeps every fit, never an OOM pair
    labels = {p.label for p in auto.space.feasible}
    assert "2x64" not in labels and "4x32" not in labels and "2x48" in labels


@pytest.mark.slow
def test_probe_finds_the_boundary_under_a_memory_cap_and_the_study_skips_oom_pairs(tmp_path):
    from grpo_ablate.study.ledger import suggest_cell
    from grpo_ablate.study.setup import open_study

    # The cap sits between a small batch's peak (measured here) and a 4096-completion batch's, with
    # room both ways: a 1024 batch's peak was within 10 MiB of the small one's, 4096's ~250 MiB above.
    # Calibrated under a cap too (one nothing reaches): a capped trial's session is started on its
    # own, never forked, and RSS is read the same way in both.
    free = load_study(_study_file(tmp_path, cap=1_000_000, batches="[16, 4096]"))
    small = measure_point(free, 2, 16, tmp_path / "calibrate", steps=1)
    assert small.fits and small.peak_memory_mb
    # issue 20: the generation/training split is measured (the recorder times each round's rollout)
    assert small.generation_seconds_per_step is not None and small.training_seconds_per_step is not None
    assert small.generation_seconds_per_step + small.training_seconds_per_step == pytest.approx(small.seconds_per_step, abs=1e-3)
    path = _study_file(tmp_path, cap=int(small.peak_memory_mb + 60), batches="[16, 4096]")
    study = load_study(path)
    probe = run_probe(study, steps=1, log=lambda m: None)
    ran = [(p.num_generations, p.generation_batch_size, p.fits) for p in probe.points]
    assert ran == [(2, 4096, False), (2, 16, True), (4, 16, True)]  # no point twice; G=4 never tries 4096
    assert probe.processes == 3  # a session per point (a capped one is started on its own), the killed one included
    assert "memory_limit_mb" in (probe.points[0].reason or "")
    assert probe.best()[2].generation_batch_size == 16 and probe.total_seconds > 0
    study = load_study(path)  # now with probe.json: the OOM pair is out of the space
    assert {p.label for p in study.space.feasible} == {"2x16", "4x16"}
    ostudy, _ = open_study(study, completions_per_trial(study))
    for _ in range(8):
        trial = ostudy.ask()
        cell = suggest_cell(trial, study)
        assert cell.arm.generation_batch_size == 16
        ostudy.tell(trial, [1.0])


def test_a_probe_written_after_the_study_began_is_refused_not_misread(tmp_path):
    """The stored trials' params mean pairs of the space the study began with: a run on a changed one stops."""
    from grpo_ablate.study.setup import describe_study, open_study
    from helpers import cli_inprocess

    path = _study_file(tmp_path, batches="[16, 32]")
    ostudy, created = open_study(load_study(path), completions_per_trial(load_study(path)))
    assert created
    describe_study(ostudy, load_study(path), baseline_arm(load_study(path)))
    points = [ProbePoint(2, 16, True, "completed"), ProbePoint(2, 32, False, "oom", reason="cap"),
              ProbePoint(4, 16, True, "completed")]
    save_probe(tmp_path / "run", Probe(owner=Owner.of(load_study(path)), points=points, total_seconds=1.0))
    res = cli_inprocess("run", str(path), "--no-report")  # refused before anything runs
    assert res.returncode == 2, res.stdout + res.stderr
    assert "without 2x32, 4x32" in res.stderr and "probe.json written since" in res.stderr
    assert len(ostudy.get_trials()) == 0  # nothing ran, nothing was queued


@pytest.mark.slow
def test_a_point_that_fails_otherwise_is_recorded_and_the_probe_goes_on(tmp_path):
    """issue 23: a reward that raises at one point is that point's outcome; what was measured is kept."""
    from helpers import cli_inprocess

    path = _study_file(tmp_path, batches="[16, 32]", gens="[2]")
    path.write_text(path.read_text() + "rewards:\n  - name: helpers_rewards:raises_for_large_batches\n")
    # the trial environment of the suite's warm session (helpers.TRIAL_ENV: tests/ on the path, no GPU), so the
    # point forks from its template: a probe on a CPU host leaves CUDA_VISIBLE_DEVICES unset, which made a startup
    # key, and a template (an interpreter's imports, ~5 CPU s), of its own
    res = cli_inprocess("probe", str(path), "--steps", "1", "--keep", PYTHONPATH=str(ROOT / "tests"), CUDA_VISIBLE_DEVICES="")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "probe point G=2 batch=32 failed" in res.stderr and "raises_for_large_batches" in res.stderr, res.stderr
    probe = load_probe(tmp_path / "run", Owner.of(load_study(path)))
    assert [(p.label, p.outcome, p.fits) for p in probe.points] == [("2x32", "failed", False), ("2x16", "completed", True)]
    assert probe.ooms() == [] and probe.best()[2].generation_batch_size == 16
    assert "2x32" in {p.label for p in load_study(path).space.feasible}  # not evidence about memory: kept
    # the probe held a host CPU slot: its trial was given the slot's threads
    spec = json.loads((tmp_path / "run" / "probe" / "G2-B16" / "spec.json").read_text())
    assert spec["env"].get("OMP_NUM_THREADS"), spec["env"]


def test_a_batch_the_training_set_cannot_fill_is_a_failed_point_without_a_trial(tmp_path):
    """Too few prompts for one generation round: the trainer would wait until the timeout; the probe says why at once."""
    path = _study_file(tmp_path, batches="[16, 64]", gens="[2]")
    path.write_text(path.read_text().replace("num_prompts: 4096", "num_prompts: 8"))
    point = measure_point(load_study(path), 2, 64, tmp_path / "t", steps=1)
    assert (point.fits, point.outcome) == (False, "failed")
    assert point.reason == "the training set has 8 prompt(s); a generation round at this batch needs 32"
    assert not (tmp_path / "t").exists()  # no trial was started


def test_a_probe_on_a_full_disk_records_the_failure_and_ends_in_one_line(tmp_path):
    """A real full tmpfs: the point's own files cannot be written; no traceback, what was measured is shown."""
    from helpers import fill_disk, run_cli, tmpfs
    from grpo_ablate.study.owner import claim_output_dir

    with tmpfs(tmp_path / "disk", "256k") as disk:
        path = _study_file(tmp_path, batches="[16]", gens="[2]")
        path.write_text(path.read_text().replace(str(tmp_path / "run"), str(disk / "run")))
        claim_output_dir(load_study(path))
        fill_disk(disk)
        res = run_cli("probe", str(path), "--steps", "1", timeout=300)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "Traceback" not in res.stderr
        assert "probe G=2   batch=16    FAILED" in res.stderr and "No space left on device" in res.stderr, res.stderr
        last = res.stderr.strip().splitlines()[-1]
        assert "cannot write" in last and "probe.json" in last and "printed above" in last, last
        assert "none fits" in res.stderr  # the measured table, on stderr before the error


def test_a_full_disk_before_anything_was_written_is_one_line(tmp_path):
    from helpers import fill_disk, run_cli, tmpfs

    with tmpfs(tmp_path / "disk", "64k") as disk:
        (disk / "run").mkdir()
        fill_disk(disk)
        path = _study_file(tmp_path, batches="[16]", gens="[2]")
        path.write_text(path.read_text().replace(str(tmp_path / "run"), str(disk / "run")))
        res = run_cli("probe", str(path), timeout=300)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode == 2 and len(lines) == 1 and "cannot write" in lines[0], res.stderr
