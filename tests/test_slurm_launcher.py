"""The `slurm` launcher (launch/slurm.py): one `grpo-ablate run` submits every trial as a SLURM job.

Units: the sbatch options from a trial's resources, and a job's end as the exit status the one
classification reads; the capabilities each launcher declares and `auto`'s choice from them; the
commands `plan --commands` prints. End to end on the test cluster: test_slurm_launcher_e2e.py.
"""

from __future__ import annotations

import pytest

from helpers import tiny_spec

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
    import json

    from grpo_ablate.launch.slurm import MEMORY_MARGIN, memory_mb
    from grpo_ablate.vocab import PROBE_FILE

    spec = tiny_spec(tmp_path / "runs" / "trials" / "00000", hardware={"num_processes": 1})
    spec.num_generations = 4
    assert memory_mb(spec) is None  # no probe: the cluster's default
    points = [{"num_generations": 4, "generation_batch_size": 8, "fits": True, "peak_memory_mb": 1000.0, "memory_kind": "rss"},
              {"num_generations": 4, "generation_batch_size": 16, "fits": True, "peak_memory_mb": 1800.0, "memory_kind": "rss"},
              {"num_generations": 4, "generation_batch_size": 32, "fits": False, "peak_memory_mb": 9000.0},
              {"num_generations": 2, "generation_batch_size": 8, "fits": True, "peak_memory_mb": 5000.0}]
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / PROBE_FILE).write_text(json.dumps({"points": points}))
    assert memory_mb(spec) == round(1800 * MEMORY_MARGIN)  # its G's fitting points, the largest
    spec.trainer["generation_batch_size"] = 8
    assert f"--mem={round(1000 * MEMORY_MARGIN)}M" in resource_options(spec)  # its own batch when the spec names one
    points[0]["memory_kind"] = "cuda"  # a GPU's peak says nothing of the host's memory
    (tmp_path / "runs" / PROBE_FILE).write_text(json.dumps({"points": points}))
    assert memory_mb(spec) is None
    spec.hardware = replace(spec.hardware, memory_limit_mb=4096)  # the study's own cap comes first
    assert memory_mb(spec) == 4096


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
