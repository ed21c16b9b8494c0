"""Arms that branch from one shared prefix, trained: the real CLI on the tiny built-in model (issue 39).

One study (2 seeds x 2 arms, a prefix of 2 steps, branches of 2 steps) runs once per module in this
process, its trials in the suite's warm session, and several tests read it: the prefix runs once per
seed (which steps each trial folder trained, from its log), every branch starts from its seed's
sealed checkpoint, and the baseline branch's first step is the step a plain resume of that
checkpoint trains, bit for bit. A second study is killed (SIGKILL of its `grpo-ablate run` process
group) once during its prefix and once during a branch, each time after a checkpoint was sealed
(waited on as a file, never a sleep), and rerun: nothing is lost and no step before the last
checkpoint is trained twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from grpo_ablate.records import trial_record as record
from grpo_ablate.launch import LauncherPool, lend_launchers
from grpo_ablate.storage.store import open_storage
from grpo_ablate.core.vocab import PREFIX_ROLE
from helpers import ROOT, TESTS, cli_env, cli_inprocess, write_study

pytestmark = pytest.mark.slow

STUDY = """\
study:
  name: branched
  sampler: ablation
  baseline: {num_generations: 8, temperature: 1.0}
  seeds: [0, 1]
  workers: 1
  output_dir: OUT
model: {name_or_path: "builtin:tiny"}
data: {task: addition, num_prompts: 200}
trainer:
  learning_rate: 2.0e-4
  per_device_train_batch_size: 16
  gradient_accumulation_steps: 1
  max_completion_length: 6
  beta: 0.0
  lr_scheduler_type: linear
  warmup_steps: 2
search:
  num_generations: [4, 8]
budget:
  max_steps: 2
  branch_from: warmup
  full_run: {max_steps: 100}
"""
_STEP = re.compile(r'^\[grpo-ablate\] (\{"step": \d+.*\})$', re.M)


def _study_file(folder: Path, **changes: str) -> Path:
    text = STUDY.replace("OUT", str(folder / "out"))
    for key, value in changes.items():
        text = text.replace(key, value)
    return write_study(folder, text)


def _trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    storage = open_storage(f"journal:///{out / 'study.journal'}")
    return optuna.load_study(study_name="branched", storage=storage).get_trials(deepcopy=False)


def trained_steps(trial_dir: str | Path) -> list[int]:
    """The optimizer steps this trial folder trained itself (its log echoes each; a resume's restored rows are not)."""
    text = (Path(trial_dir) / "log.txt").read_text()
    return [json.loads(m)["step"] for m in _STEP.findall(text)]


@pytest.fixture(scope="module")
def branched(tmp_path_factory, warm_session):
    folder = tmp_path_factory.mktemp("branched")
    path = _study_file(folder)
    with lend_launchers(LauncherPool(launchers={"warm": warm_session})):
        res = cli_inprocess("run", str(path), PYTHONPATH=str(TESTS))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return path, folder / "out", res, _trials(folder / "out")


def test_plan_lists_each_seeds_prefix_before_its_branches(tmp_path):
    res = cli_inprocess("plan", str(_study_file(tmp_path)))
    assert res.returncode == 0, res.stderr
    rows = re.findall(r"^\s+\d+\. (\S+)\s+G=(\d+), .*seed (\d+)$", res.stdout, re.M)
    assert rows == [(PREFIX_ROLE, "8", "0"), ("baseline", "8", "0"), ("num_generations=4", "4", "0"),
                    (PREFIX_ROLE, "8", "1"), ("baseline", "8", "1"), ("num_generations=4", "4", "1")]


def test_the_prefix_runs_once_per_seed_and_every_branch_starts_from_it(branched):
    _, out, res, trials = branched
    assert all(record.outcome(t).value == "completed" for t in trials) and len(trials) == 6
    prefixes = {record.seed_of(t): t for t in trials if record.is_prefix(t)}
    assert sorted(prefixes) == [0, 1]  # one per seed, never one per arm
    for t in trials:
        folder = record.trial_dir(t)
        if record.is_prefix(t):
            assert trained_steps(folder) == [1, 2] and record.branched_from(t) is None
            assert [p.name for p in (Path(folder) / "checkpoints").iterdir()] == ["checkpoint-2"]  # kept for good
        else:  # a branch trains only its own budget, from the step after its seed's prefix
            assert trained_steps(folder) == [3, 4], folder
            assert record.branched_from(t) == (prefixes[record.seed_of(t)].number, 2)
            spec = json.loads((Path(folder) / "spec.json").read_text())
            prefix = prefixes[record.seed_of(t)]
            assert spec["start_from"] == {"checkpoint": f"{record.trial_dir(prefix)}/checkpoints/checkpoint-2", "step": 2,
                                          "fingerprint": record.spec_fingerprint(prefix)}  # verified as a resume is
            rows = [json.loads(x) for x in (Path(folder) / "metrics.jsonl").read_text().splitlines()]
            assert [r["step"] for r in rows] == [3, 4]  # its result is about its own steps
    # the prefix is no arm's result: the report's arms and the race read through these
    assert all(not record.is_result(p) and record.arm_of(p) is None for p in prefixes.values())
    assert "queued 2 branch(es)" in res.stdout


def test_a_branch_starts_from_the_shared_checkpoint_bit_for_bit(branched, tmp_path):
    """The baseline branch's first step is the one a plain resume (transformers' own) of the prefix's checkpoint trains."""
    import torch

    from grpo_ablate.trainer.build import build_trial
    from grpo_ablate.contract.spec import TrialSpec

    _, out, _, trials = branched
    branch = next(t for t in trials if record.role_of(t) == "baseline" and record.seed_of(t) == 0)
    spec = TrialSpec.load(Path(record.trial_dir(branch)) / "spec.json")
    assert spec.start_from is not None
    plain = TrialSpec.from_json(spec.to_json())
    plain.trial_dir, plain.start_from, plain.checkpoint, plain.max_steps = str(tmp_path / "plain"), None, None, 3
    threads = torch.get_num_threads()
    torch.set_num_threads(int(spec.env.get("OMP_NUM_THREADS", threads)))  # the trial's own thread count
    try:
        built = build_trial(plain, log=lambda _: None, echo=False)
        built.trainer.train(resume_from_checkpoint=spec.start_from.checkpoint)
    finally:
        torch.set_num_threads(threads)
    resumed = json.loads((tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()[0])
    first = json.loads((Path(record.trial_dir(branch)) / "metrics.jsonl").read_text().splitlines()[0])
    assert resumed["step"] == first["step"] == 3
    for key in ("loss", "grad_norm", "reward", "learning_rate", "entropy"):
        assert resumed[key] == first[key], key


@pytest.mark.usefixtures("addition_model")  # its deadline times a trial's start, not the model's first build
def test_a_prefix_seals_its_last_step_even_when_the_study_takes_no_checkpoints(tmp_path, warm_session):
    """study.checkpoint_steps: null still seals the prefix's last step (checkpoint "final"), verified as a resume is."""
    from dataclasses import replace

    from grpo_ablate.contract import checkpoints
    from helpers import tiny_spec

    spec = replace(tiny_spec(tmp_path / "prefix", steps=2, num_prompts=200, per_device_train_batch_size=16),
                   checkpoint={"every": None, "keep": False, "final": True})
    assert warm_session.run(spec).outcome.value == "completed"
    sealed = checkpoints.sealed_checkpoints(spec.path)
    assert [c.step for c in sealed] == [2]
    assert checkpoints.verify(sealed[0], checkpoints.spec_fingerprint(json.loads(spec.to_json()))) is None


# ---------------------------------------------------------------- killed and rerun


def _sealed_between(folder: Path | None, low: int, high: int) -> bool:
    """Whether `folder` holds a sealed checkpoint of a step in [low, high]. A range, not one step: a study keeps
    only its latest checkpoint, so any one of them lives a single step (under a second on the tiny model)."""
    found = folder / "checkpoints" if folder is not None else None
    return found is not None and found.is_dir() and any(
        c.name.startswith("checkpoint-") and c.name[len("checkpoint-"):].isdigit()
        and low <= int(c.name[len("checkpoint-"):]) <= high for c in found.iterdir())


def _run_until(ready: "callable", study: Path, log: Path) -> None:
    """`grpo-ablate run` in its own process group, SIGKILLed (the whole group) once `ready()` is true."""
    with open(log, "a") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "run", str(study)], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, env=cli_env(PYTHONPATH=str(TESTS)), start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not ready():
            assert proc.poll() is None, f"the run ended (rc {proc.returncode}) first: " + log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it already ended: the assert above says how
            pass
        proc.wait(timeout=60)


def test_killing_the_run_during_the_prefix_and_during_a_branch_loses_nothing_and_trains_nothing_twice(tmp_path,
                                                                                                        warm_session):
    """One seed, one arm (the baseline: its branch is the one trial after the prefix), and longer trials than the
    module's study (a prefix of 12 steps, a branch of 8, a checkpoint every step). Each kill is sent once a
    checkpoint of the first half of the trial is sealed, so it lands several steps (seconds) before the trial could
    end; which step it lands after is the machine's, so the test reads where each retry resumed."""
    study = _study_file(tmp_path, **{"seeds: [0, 1]": "seeds: [0]\n  checkpoint_steps: 1", "[4, 8]": "[8]",
                                     "branch_from: warmup": "branch_from: 12", "max_steps: 2\n": "max_steps: 8\n"})
    out, log = tmp_path / "out", tmp_path / "run.log"
    # 1. killed in the prefix, once one of its checkpoints 1-6 is sealed (six or more steps before its end)
    _run_until(lambda: _sealed_between(out / "trials" / "00000", 1, 6), study, log)

    def branch_folder() -> Path | None:
        if not (out / "study.journal").exists():
            return None
        started = [t for t in _trials(out) if not record.is_prefix(t) and record.trial_dir(t)]
        return Path(record.trial_dir(started[0])) if started else None

    # 2. rerun: the prefix resumes; killed in the branch once one of its checkpoints 13-16 is sealed
    _run_until(lambda: _sealed_between(branch_folder(), 13, 16), study, log)
    # 3. rerun to the end (in this process, its trial in the suite's warm session: no kill here)
    with lend_launchers(LauncherPool(launchers={"warm": warm_session})):
        res = cli_inprocess("run", str(study), PYTHONPATH=str(TESTS))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    trials = _trials(out)
    done = [record.cell_key(t) for t in trials if record.outcome(t).value == "completed"]
    assert len(done) == len(set(done)) == 2 and sum(record.is_prefix(t) for t in trials
                                                     if record.outcome(t).value == "completed") == 1  # nothing lost
    trained: dict[str, list[int]] = {}
    resumed: dict[str, int] = {}
    for t in trials:
        key = record.cell_key(t) or ""
        if record.resumed_from(t) is not None:
            resumed[key] = record.resumed_from(t)
        if record.trial_dir(t) and (Path(record.trial_dir(t)) / "log.txt").exists():
            trained.setdefault(key, []).extend(trained_steps(record.trial_dir(t)))
    prefix = next(k for k in done if k.endswith("|prefix"))
    # each retry resumed its own checkpoint: the prefix's from its first half, the branch's from past the branch point
    got = sorted(resumed.values())
    assert len(got) == 2 and 1 <= got[0] <= 11 and 13 <= got[1] <= 19, (resumed, log.read_text()[-3000:])
    for key in done:
        wanted = set(range(1, 13)) if key == prefix else set(range(13, 21))
        assert set(trained[key]) == wanted, trained  # every step trained
        # a step up to the checkpoint a retry resumed is never trained twice; one after it at most twice (the
        # kill may land after a step and before its checkpoint: the most a kill may cost)
        last = resumed.get(key, 0)
        assert all(trained[key].count(s) == 1 for s in wanted if s <= last), trained
        assert all(trained[key].count(s) <= 2 for s in wanted), trained
