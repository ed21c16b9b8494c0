"""The SLURM commands of sweeps/slurm/README.md run as written, on a real cluster (tests/slurm_cluster.py) with a real PostgreSQL.

The README's steps 2 (tables), 3 (`grpo-ablate slurm-script`, then `sbatch --array=0-3`) and 5
(the report job after the array) are taken from the file and run by bash, unchanged but for
the study file's name (a tiny CPU study instead of the 8-GPU one) and the settings the README
names for the submit environment (GRPO_ABLATE_STORAGE, GRPO_ABLATE_STAGGER). Four array tasks
share one study: each planned trial runs exactly once, every task exits 0, and the report job
writes the report after them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT
from test_slurm import STUDY

from grpo_ablate.records import trial_record as record

pytestmark = pytest.mark.slow

GUIDE = ROOT / "sweeps" / "slurm" / "README.md"
BIG_STUDY = "studies/openr1-1.5b-numina-8gpu.yaml"


def _commands() -> list[str]:
    """The guide's command lines of steps 2 (the tables), 3 and 5, continuation lines joined."""
    text = GUIDE.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = line.strip()
            if "open_storage(sys.argv[1])" in line or "slurm-script" in line or "sbatch" in line:
                lines.append(line)
    return lines


def test_the_guides_commands_are_found():
    found = _commands()
    assert any("open_storage" in c for c in found)
    assert any("slurm-script" in c for c in found)
    assert any("--array=0-3" in c for c in found)
    assert any("--dependency=afterany" in c for c in found)


def test_the_guides_commands_run_on_a_cluster(slurm_cluster, fresh_pg_db, tmp_path):
    import optuna

    from grpo_ablate.storage.store import normalize_url, open_storage

    url = normalize_url(fresh_pg_db)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)  # the guide's `.venv` in the submit directory
    (tmp_path / "study.yaml").write_text(STUDY.format(out=tmp_path / "runs"))
    script = "set -euo pipefail\n" + "\n".join(c.replace(BIG_STUDY, "study.yaml") for c in _commands()) + '\necho "array=$jobid"\n'
    env = dict(slurm_cluster.env, GRPO_ABLATE_STORAGE=url, GRPO_ABLATE_STAGGER="2", CUDA_VISIBLE_DEVICES="",
               HF_HUB_OFFLINE="1")
    env.pop("GRPO_ABLATE_VENV", None)
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    header = [line for line in (tmp_path / "grpo-ablate.sbatch").read_text().splitlines() if line.startswith("#SBATCH")]
    assert not [line for line in header if "--gres" in line], header  # a CPU study asks for no GPU
    array = re.search(r"array=(\d+)", run.stdout).group(1)
    report = re.search(r"Submitted batch job (\d+)", run.stdout).group(1)
    deadline = time.monotonic() + 900
    while slurm_cluster.run("squeue", "-h", "-o", "%i").stdout.strip():
        assert time.monotonic() < deadline, slurm_cluster.run("squeue").stdout
        time.sleep(1)
    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(tmp_path.glob("*.out")))
    states = slurm_cluster.run("scontrol", "-o", "show", "job", array).stdout.splitlines()
    assert len(states) == 4 and all("JobState=COMPLETED" in s and "ExitCode=0:0" in s for s in states), states + [logs]
    assert "JobState=COMPLETED" in slurm_cluster.run("scontrol", "-o", "show", "job", report).stdout, logs
    trials = optuna.load_study(study_name="slurm-e2e", storage=open_storage(url)).get_trials(deepcopy=False)
    done = [record.arm_of(t) for t in trials if record.outcome(t).value == "completed"]
    assert sorted(a.num_generations for a in done if a is not None) == [2, 4]
    assert len(trials) == 2, [(t.number, record.outcome(t).value) for t in trials]
    assert (tmp_path / "runs" / "report.html").exists(), logs
    assert os.path.exists(tmp_path / "grpo-ablate-{}_3.out".format(array))
