"""The test SLURM cluster itself (tests/slurm_cluster.py): it schedules real jobs, and leaves nothing behind.

    pytest tests/test_slurm_cluster.py
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from slurm_cluster import SlurmCluster, missing_binaries


def _running(pid: int) -> bool:
    """True while `pid` is a live process (not gone, not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_a_batch_job_runs_on_the_node_and_its_state_is_read_from_scontrol(slurm_cluster, tmp_path):
    out = tmp_path / "job.out"
    job = slurm_cluster.run("sbatch", "--parsable", f"--output={out}", "--wrap", "echo ran on $SLURMD_NODENAME").stdout.strip()
    deadline = time.monotonic() + 60
    while slurm_cluster.job_state(job) in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
        assert time.monotonic() < deadline, slurm_cluster.run("squeue").stdout
        time.sleep(0.2)
    assert slurm_cluster.job_state(job) == "COMPLETED"
    assert out.read_text().strip() == f"ran on {slurm_cluster.node}"


def test_a_second_cluster_starts_beside_the_first_and_stops_without_a_trace(slurm_cluster):
    """Two at once (two pytest workers each start one): private ports and folders; stopped by pid with a job
    still running, nothing is left (daemons, slurmstepd, the job's processes)."""
    if missing_binaries():
        pytest.skip("no SLURM here")
    base = Path(tempfile.mkdtemp(prefix="grpo-slurm-second-"))
    try:
        _start_second_and_stop(slurm_cluster, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _start_second_and_stop(slurm_cluster, base: Path) -> None:
    with SlurmCluster.start(base, name="second") as other:
        assert other.run("srun", "--time=1", "true").returncode == 0
        job = other.run("sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 300 & sleep 300").stdout.strip()
        deadline = time.monotonic() + 60
        while other.job_state(job) != "RUNNING" or len(other.job_processes()) < 3:  # slurmstepd, bash, two sleeps
            assert time.monotonic() < deadline, other.run("squeue").stdout
            time.sleep(0.2)
        pids = [p.pid for p in other.procs] + other.job_processes(daemons=True)
        assert slurm_cluster.run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle"
    deadline = time.monotonic() + 10  # killed ones wait for their new parent to reap them
    while [pid for pid in pids if _running(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _running(pid)]
    assert not [line for line in os.popen("ps -eo args").read().splitlines() if str(base) in line]
