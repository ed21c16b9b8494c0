"""Command trials on TRL 0.18: a study over a user's own script, and a killed trial that resumes its checkpoint.

The script (openr1_style_grpo.py) runs in the second virtualenv (TRL 0.18.0, transformers 4.52.4) on the built-in
tiny model, saved in a form transformers 4.52 reads; grpo-ablate runs the study from its own environment
and never imports the script's TRL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from command_study import write_command_study
from helpers import run_cli

from grpo_ablate.config import load_study
from grpo_ablate.core.child_processes import PACKAGE_ROOT, importing_this_checkout
from grpo_ablate.launch import run_trial
from grpo_ablate.contract.metrics import read_rows
from grpo_ablate.contract.files import trainer_dir
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.contract import checkpoints
from grpo_ablate.core.vocab import Arm, Cell, Outcome


def test_a_study_over_a_trl_018_script_ends_in_an_answer_curves_and_the_report(script_python, tmp_path):
    """Two arms x two seeds of 8 steps, each a run of the user's script on TRL 0.18: the study's answer,
    its curves and its report come out of the Trainer's own files, as for built-in trials."""
    study = write_command_study(tmp_path, script_python, seeds="[0, 1]")
    res = run_cli("run", str(study), "--set", "study.workers=2", cwd=tmp_path, timeout=1500)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    out = tmp_path / "runs"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recommendation"] and summary["verdict"], summary  # the answer, as a built-in study gives it
    page = (out / "report.html").read_text()
    assert "<svg" in page or "data:image/png" in page  # the curves
    trials = sorted(p for p in (out / "trials").iterdir() if (p / "result.json").exists())
    assert len(trials) == 4
    for trial in trials:
        result = json.loads((trial / "result.json").read_text())
        assert result["outcome"] == "completed", result.get("reason")
        assert result["versions"]["trl"] == "0.18.0" and result["versions"]["transformers"] == "4.52.4"
        rows = read_rows(trial / "metrics.jsonl")
        assert [r["step"] for r in rows] == list(range(1, 9))
        assert all(r["timing"] == "logged" and r["train_seconds"] > 0 for r in rows)
        assert all("frac_reward_zero_std" in r and "reward" in r for r in rows)  # TRL 0.18 logs both
        evals = [json.loads(line) for line in (trial / "eval.jsonl").read_text().splitlines()]
        assert [e["step"] for e in evals] == [0, 4, 8]  # the base model, the middle checkpoint, the end
        log = (trial / "log.txt").read_text()
        assert "--num_generations" in log and "--save_steps 4" in log and "--push_to_hub false" in log
    tensorboard = out / "tensorboard"  # the recipe's report_to stayed on, named per trial
    assert tensorboard.is_dir() and any(tensorboard.rglob("events.out.tfevents*"))


def test_a_killed_command_trial_resumes_from_its_checkpoint(script_python, tmp_path):
    """kill -9 of the trial's whole process tree after a sealed checkpoint; the rerun passes it to the script as
    --resume_from_checkpoint and trains the remaining steps only: every step's row once, the Trainer at the end."""
    study = load_study(write_command_study(tmp_path, script_python, max_steps=12, checkpoint_steps=4,
                                           generations="[8]"), ["evaluation=null"])
    spec = build_spec(study, Cell(Arm(8, 16, 1.0), 0, "probe"), tmp_path / "trial")
    path = spec.save()
    env = importing_this_checkout({**os.environ, "HF_HUB_OFFLINE": "1"})
    with open(tmp_path / "first.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.trainer.command_worker", str(path)], stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=PACKAGE_ROOT)
    deadline = time.monotonic() + 600
    while not checkpoints.sealed_checkpoints(spec.trial_dir) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    sealed = checkpoints.sealed_checkpoints(spec.trial_dir)
    assert sealed and proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)  # the worker; the script dies with it (its parent-death signal)
    proc.wait()
    step = checkpoints.latest(spec.trial_dir).step
    assert step < 12
    result = run_trial(spec)
    log = (spec.path / "log.txt").read_text()
    assert result.outcome is Outcome.COMPLETED, result.reason or log[-3000:]
    assert f"resuming from checkpoint-{step}" in log and "--resume_from_checkpoint" in log
    assert [r["step"] for r in read_rows(spec.path / "metrics.jsonl")] == list(range(1, 13))
    state = json.loads((trainer_dir(spec.trial_dir) / "trainer_state.json").read_text())
    assert state["global_step"] == 12
