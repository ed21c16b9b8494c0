"""The test SLURM cluster itself (tests/slurm_cluster.py): it schedules real jobs, and leaves nothing behind.

    pytest tests/test_slurm_cluster.py
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from slurm_cluster import SlurmCluster, missing_binaries


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
    """Two at once (two pytest workers each start one): private ports and folders; stopped by pid, nothing left."""
    if missing_binaries():
        pytest.skip("no SLURM here")
    base = Path(tempfile.mkdtemp(prefix="grpo-slurm-second-"))
    with SlurmCluster.start(base, name="second") as other:
        pids = [p.pid for p in other.procs]
        assert other.run("srun", "--time=1", "true").returncode == 0
        assert slurm_cluster.run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not [line for line in os.popen("ps -eo args").read().splitlines() if str(base) in line]
