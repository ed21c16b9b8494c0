"""The `slurm` launcher (launch/slurm.py): one `grpo-ablate run` submits every trial as a SLURM job.

Units: the sbatch options from a trial's resources, and a job's end as the exit status the one
classification reads; the capabilities each launcher declares and `auto`'s choice from them; the
commands `plan --commands` prints. End to end on the test cluster: test_slurm_launcher_e2e.py.
"""

from __future__ import annotations

import json

import pytest

from helpers import tiny_spec, write_study

from grpo_ablate.launch import LAUNCHERS, SlurmLauncher
from grpo_ablate.launch.slurm import exit_status, resource_options
from dataclasses import replace


def test_the_registry_names_it():
    assert LAUNCHERS["slurm"] is SlurmLauncher


def test_a_trials_resources_become_sbatch_options(tmp_path):
    spec = tiny_spec(tmp_path / "00003", timeout_s=600, hardware={"num_processes": 1, "gpus": 2, "memory_limit_mb": 4096})
    options = resource_options(spec, grace_s=60)
    assert "--gres=gpu:2" in options and "--mem=4096M" in options and "--cpus-per-task=1" in options
    assert "--time=11" in options  # 600 s + the 60 s stop grace, in whole minutes
    assert "--job-name=grpo-ablate-00003" in options
    assert "--no-requeue" in options  # retries are the orchestrator's: a job SLURM requeued would train its steps again
    cpu = resource_options(tiny_spec(tmp_path / "x"))
    assert not [o for o in cpu if o.startswith(("--gres", "--mem", "--time"))]


def test_without_a_memory_limit_the_jobs_memory_is_the_probes_measured_peak_with_a_margin(tmp_path):
    from grpo_ablate.launch.slurm import MEMORY_MARGIN, memory_mb

    spec = tiny_spec(tmp_path / "runs" / "trials" / "00000", hardware={"num_processes": 1})
    assert spec.host_memory_mb is None and memory_mb(spec) is None  # nothing measured: the cluster's default
    spec.host_memory_mb = 1800.0  # what the parent resolved from the study's probe.json (study/trial_spec.py)
    assert memory_mb(spec) == round(1800 * MEMORY_MARGIN)
    assert f"--mem={round(1800 * MEMORY_MARGIN)}M" in resource_options(spec)
    spec.hardware = replace(spec.hardware, memory_limit_mb=4096)  # the study's own cap comes first
    assert memory_mb(spec) == 4096


def test_the_host_peak_is_the_largest_fitting_cpu_point_of_the_trials_shape():
    from grpo_ablate.files.probe_file import ProbePoint, host_peak_mb

    points = [ProbePoint(4, 8, True, "completed", peak_memory_mb=1000.0),
              ProbePoint(4, 16, True, "completed", peak_memory_mb=1800.0),
              ProbePoint(4, 32, False, "oom", peak_memory_mb=9000.0),
              ProbePoint(2, 8, True, "completed", peak_memory_mb=5000.0)]
    assert host_peak_mb(points, 4, None) == 1800.0  # its G's fitting points, the largest
    assert host_peak_mb(points, 4, 8) == 1000.0  # its own batch when the spec names one
    assert host_peak_mb(points, 8, None) is None
    points[0] = ProbePoint(4, 8, True, "completed", peak_memory_mb=1000.0, memory_kind="cuda")
    assert host_peak_mb(points, 4, 8) is None  # a GPU's peak says nothing of the host's memory


def test_the_parent_resolves_the_host_peak_into_the_spec_from_the_studys_probe(tmp_path):
    """SLURM's --mem comes from the spec: the launcher never walks up from the trial folder to probe.json."""
    from grpo_ablate.config import load_study
    from grpo_ablate.files.reader import Owner
    from grpo_ablate.files.probe_file import Probe, ProbePoint, save_probe
    from grpo_ablate.plan.run_plan import resolve_plan
    from grpo_ablate.study.trial_spec import build_spec, plan_spec
    from grpo_ablate.contract.checkpoints import spec_fingerprint
    from grpo_ablate.core.vocab import Arm, Cell

    path = write_study(tmp_path, """
        study: {name: s, sampler: ablation, seeds: [0], output_dir: out}
        data: {task: addition}
        trainer: {per_device_train_batch_size: 16, max_completion_length: 8}
        search: {num_generations: [4, 8]}
        budget: {max_steps: 2}
    """)
    study = load_study(path)
    cell = Cell(Arm(4, 16, 1.0), 0, "grid")
    before = build_spec(study, cell, tmp_path / "out" / "trials" / "00000")
    assert before.host_memory_mb is None
    save_probe(study.output_dir, Probe(owner=Owner.of(study), total_seconds=1.0,
                                       points=[ProbePoint(4, 16, True, "completed", peak_memory_mb=700.0)]))
    spec = build_spec(study, cell, tmp_path / "elsewhere" / "00000")  # any trial folder: nothing is read from it
    assert spec.host_memory_mb == 700.0
    plan = resolve_plan(study)  # a run reads probe.json once, with its plan; each trial's spec takes it from there
    assert plan_spec(study, plan, cell, tmp_path / "out" / "trials" / "00001", timeout=None).host_memory_mb == 700.0
    assert spec_fingerprint(json.loads(spec.to_json())) == spec_fingerprint(json.loads(before.to_json()))


@pytest.mark.parametrize("state, code, expected", [
    ("RUNNING", "0:0", None), ("PENDING", "0:0", None), ("COMPLETING", "0:0", None),
    ("COMPLETED", "0:0", 0), ("FAILED", "1:0", 1), ("FAILED", "3:0", 3),  # the worker's own: failed, oom
    ("CANCELLED", "0:15", -15), ("CANCELLED by 0", "0:15", -15), ("TIMEOUT", "0:1", -15), ("PREEMPTED", "0:15", -15),
    ("NODE_FAIL", "0:0", -9), ("OUT_OF_MEMORY", "0:125", -9), ("FAILED", "0:9", -9),
])
def test_how_a_job_ended_is_an_exit_status(state, code, expected):
    assert exit_status(state, code) == expected


def test_each_launcher_declares_where_its_trials_run_and_auto_asks_the_declarations(tmp_path, monkeypatch):
    from grpo_ablate.launch import launcher_name

    monkeypatch.delenv("GRPO_ABLATE_LAUNCHER", raising=False)
    assert SlurmLauncher.capabilities.remote and not SlurmLauncher.capabilities.local_processes
    assert not SlurmLauncher.capabilities.auto  # submitting jobs is never a default
    assert all(LAUNCHERS[name].capabilities.local_processes for name in ("process", "warm"))
    cpu = tiny_spec(tmp_path / "cpu")
    assert launcher_name(cpu) == "warm"
    gpu = tiny_spec(tmp_path / "gpu")
    gpu.env["CUDA_VISIBLE_DEVICES"] = "0"
    assert launcher_name(gpu) == "process" and launcher_name(gpu, probe=True) == "warm"
    gpu.hardware = replace(gpu.hardware, launcher="slurm")
    assert launcher_name(gpu) == "slurm"


def test_plan_commands_come_from_the_chosen_launcher(tmp_path, monkeypatch):
    from grpo_ablate.launch import describe_launch

    spec = tiny_spec(tmp_path / "00000", timeout_s=300)
    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "slurm")
    monkeypatch.setenv("GRPO_ABLATE_SLURM_OPTIONS", "--partition=debug")
    line = describe_launch(spec, tmp_path / "00000" / "spec.json")["launch"]
    assert line[:2] == ["sbatch", "--parsable"] and "--partition=debug" in line and "--time=6" in line
    assert line[-1].startswith("exec ") and "grpo_ablate.trainer.worker" in line[-1]
    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "process")
    assert "grpo_ablate.trainer.worker" in describe_launch(spec, tmp_path / "spec.json")["launch"]


def test_a_remote_launchers_workers_take_no_gpus_of_this_host(monkeypatch):
    """launch/devices.py asks the launcher: with slurm, the login node's GPUs are not the trials'."""
    from grpo_ablate.config import load_study
    from grpo_ablate.launch.devices import remote_launcher, worker_envs

    from helpers import ROOT

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one GPU here: too few for the 8-GPU study's trials
    study = load_study(ROOT / "studies/openr1-1.5b-numina-8gpu.yaml", ["hardware.launcher=slurm"])
    assert remote_launcher(study) and worker_envs(study, 2) == [{}, {}]
    with pytest.raises(RuntimeError, match="each trial needs 8 GPU"):
        worker_envs(load_study(ROOT / "studies/openr1-1.5b-numina-8gpu.yaml", ["hardware.launcher=process"]), 2)


def test_reclaim_without_the_slurm_clients_says_so_and_never_stops_the_requeue(tmp_path, monkeypatch):
    """A rerun on a host without sbatch/scancel (the login node's PATH changed): the requeue goes on, the reason is kept."""
    from grpo_ablate.launch import reclaim_trial
    from grpo_ablate.launch.slurm import JOB_FILE

    assert reclaim_trial(None) == [] and reclaim_trial(tmp_path) == []  # no folder, or no job submitted from it
    (tmp_path / JOB_FILE).write_text('{"job": "42"}\n')
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    words = reclaim_trial(tmp_path)
    assert len(words) == 1 and words[0].startswith("slurm: could not reclaim") and "FileNotFoundError" in words[0], words
