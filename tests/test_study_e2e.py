"""`grpo-ablate run` end to end: real GRPO trials on the tiny offline model, driven through the CLI
(a process of its own where a signal or a kill is under test; else in this process, cli_inprocess,
its trials in the suite's warm session where they complete: fixtures_warm.study_here).

Covers: ablation plan run and resumed with nothing repeated; OOM stored as a violated
constraint on a COMPLETE trial; consecutive failures stop the study, and a study whose every
trial failed exits 1; Ctrl-C/SIGTERM (also while a trial starts) records the running trial and
the rerun finishes the study; a full disk requeues trials; a kill -9 of the run is recovered.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.artifacts import get_all_artifact_meta

from helpers import ROOT, cli_env, cli_inprocess, fill_disk, tmpfs
from grpo_ablate.storage.store import open_storage
from grpo_ablate.records import trial_record as record

pytestmark = pytest.mark.slow

# Small and quick: the tiny model, a handful of optimizer steps per trial.
QUICK = ["--set", "budget.max_steps=3", "--set", "study.seeds=[0]", "--set", "study.workers=1"]


def _study(tmp: Path, name: str) -> list[str]:
    return ["--set", f"study.name={name}", "--set", f"study.output_dir={tmp / name}"]


def _load(tmp: Path, name: str, storage: str | None = None) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=open_storage(storage or str(tmp / name / "study.journal")))


def _by_outcome(study: optuna.Study) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        key = record.outcome(t).value
        out[key] = out.get(key, 0) + 1
    return out


def test_ablation_runs_records_and_resumes(finished_study, tmp_path):
    """The shared finished demo study: every record a trial leaves, then reruns (on copies) that run
    no trial (in this process: cli_inprocess)."""
    first = finished_study.run
    assert first.returncode == 0, first.stdout + first.stderr
    st = finished_study.load()
    trials = st.get_trials(deepcopy=False)
    assert len(trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    base = trials[0]
    assert record.role_of(base) == "baseline" and record.arm_of(base).num_generations == 8
    for t in trials:
        assert record.outcome(t).value == "completed"
        recorded = record.recorded_metrics(t, ("reward_per_hour", "stability_variance", "samples_per_second",
                                               "tokens_per_second", "reward_per_million_tokens", "peak_memory_mb"))
        assert all(v is not None for v in recorded.values()), recorded
        assert t.constraints == {"oom": -1.0}  # feasible
        rows = [json.loads(x) for x in Path(record.trial_dir(t), "metrics.jsonl").read_text().splitlines()]
        assert len(rows) == 4
    # artifacts for the dashboard
    storage = open_storage(str(finished_study.out / "study.journal"))
    arts = [a for t in trials for a in get_all_artifact_meta(t, storage=storage)]
    assert len(arts) >= 2
    # the report's answer, in its words, with its path; no per-trial "best" naming one seed
    assert "\nAnswer:\n  " in first.stdout and "Report: " in first.stdout and "Best trials" not in first.stdout

    copy = tmp_path / "copy"
    shutil.copytree(finished_study.out, copy)
    again = cli_inprocess("run", *finished_study.args(copy))
    assert again.returncode == 0, again.stderr
    assert len(finished_study.load(copy).get_trials(deepcopy=False)) == 2  # nothing re-run
    assert "(2/2 trials finished)" in again.stdout

    # issue 28: a planned study stopped by the user's own n_trials is not a failure: exit 0, the queued cells named
    limited = tmp_path / "limited"
    shutil.copytree(finished_study.out, limited)
    asked = cli_inprocess("run", *finished_study.args(limited), "--set", "study.seeds=[0, 1]", "--n-trials", "2", "--no-report")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "Note: study.n_trials=2 reached; 2 planned trial(s) are still queued" in asked.stdout

    # issue 23: a study never ends with cells queued and exit 0 without saying so
    args = ("run", *finished_study.args(copy))
    finished_study.load(copy).enqueue_trial({}, user_attrs={record.ROLE: "advise", record.CELL: "G4xB32|T0.5-s0"})  # an arm the plan lost
    lost = cli_inprocess(*args)
    assert lost.returncode == 1, lost.stdout + lost.stderr
    assert "1 queued trial(s) that never ran (G4xB32|T0.5-s0)" in lost.stderr and "no longer part" in lost.stderr
    more_seeds = cli_inprocess(*args, "--set", "study.seeds=[0, 1]", "--set", "study.n_trials=2", "--no-report")
    assert more_seeds.returncode == 1, more_seeds.stdout + more_seeds.stderr  # the lost arm is still a failure
    assert "queued 2 planned trial(s)" in more_seeds.stdout and "raise study.n_trials to 5" in more_seeds.stderr
    assert "study.n_trials=2 was reached first" in more_seeds.stderr
    assert len(finished_study.load(copy).get_trials(deepcopy=False)) == 5  # nothing ran

    # issue 23: another study in the same folder is refused, and nothing of the first is touched
    trial_dirs = sorted(p.name for p in (copy / "trials").iterdir())
    other = cli_inprocess("run", "studies/tiny-cpu.yaml", *QUICK, "--set", "study.name=abl2",
                    "--set", f"study.output_dir={copy}", "--no-report")
    assert other.returncode == 2 and f"belongs to the study '{finished_study.name}'" in other.stderr, other.stdout + other.stderr
    assert sorted(p.name for p in (copy / "trials").iterdir()) == trial_dirs


def test_oom_is_a_violated_constraint_not_a_failure(study_here, tmp_path):
    args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", *QUICK, *_study(tmp_path, "oom"), "--no-report",
            "--set", "num_generations=[2, 8]", "--set", "study.baseline={num_generations: 2}",
            "--set", "rewards=[{name: task}, {name: 'helpers_rewards:oom_for_large_groups', weight: 0.0}]"]
    res = study_here(*args)
    assert res.returncode == 0, res.stdout + res.stderr
    st = _load(tmp_path, "oom")
    by_g = {record.arm_of(t).num_generations: t for t in st.get_trials(deepcopy=False)}
    big = by_g[8]
    assert big.state == optuna.trial.TrialState.COMPLETE and record.outcome(big).value == "oom"
    assert big.constraints["oom"] > 0  # violated: the sampler learns the boundary
    assert record.outcome(by_g[2]).value == "completed"
    assert st.best_trials and all(record.outcome(t).value == "completed" for t in st.best_trials)


def test_a_study_whose_every_trial_ran_out_of_memory_exits_1(study_here, tmp_path):
    """issue 23, item 8: all-OOM is not a success; the message says what ran out and what to do."""
    args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", *QUICK, *_study(tmp_path, "alloom"), "--no-report",
            "--set", "num_generations=[8]", "--set", "study.baseline={num_generations: 8}",
            "--set", "rewards=[{name: task}, {name: 'helpers_rewards:oom_for_large_groups', weight: 0.0}]"]
    res = study_here(*args)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "no trial fit in memory: 1 of 1 finished trial(s) ran out of memory (at G=8" in res.stderr, res.stderr
    assert "grpo-ablate probe" in res.stderr and "Traceback" not in res.stderr
    assert _by_outcome(_load(tmp_path, "alloom")) == {"oom": 1}


def test_consecutive_failures_stop_the_study(tmp_path):
    args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", *QUICK, *_study(tmp_path, "fail"), "--no-report",
            "--set", "sampler=random", "--set", "study.n_trials=6", "--set", "study.max_consecutive_failures=2",
            "--set", "rewards=['helpers_rewards:always_raises']"]
    res = cli_inprocess(*args, PYTHONPATH=str(ROOT / "tests"))  # its own warm session: failures end it
    assert res.returncode == 1
    assert "2 trials failed in a row" in res.stderr and "always_raises" in res.stderr
    st = _load(tmp_path, "fail")
    assert len(st.get_trials(deepcopy=False)) == 2
    assert all(t.state == optuna.trial.TrialState.FAIL for t in st.get_trials(deepcopy=False))


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {seconds:.0f} s")


def _has_rows(path: Path) -> bool:
    return path.exists() and path.read_text().count("\n") >= 1


# Far more steps than the tiny model trains in the test's window: the stop always finds it running.
ENDLESS = "budget.max_steps=100000"


def test_interrupt_records_trial_and_rerun_finishes(study_here, tmp_path):
    """Ctrl-C mid-trial (SIGTERM, as a batch system sends, takes the same handler: the next test sends it)."""
    sig, name = signal.SIGINT, "int"
    plan = ["--set", "study.seeds=[0]", *_study(tmp_path, name), "--no-report", "--set", "num_generations=[2, 4]",
            "--set", "study.baseline={num_generations: 2}", "--set", "study.workers=1"]  # one endless trial at a time
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", "--set", ENDLESS,
                             *plan], cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / name / "trials" / "00000" / "metrics.jsonl"
    try:
        _wait_for(lambda: _has_rows(metrics), 180, "the first trial never logged a step")
    except AssertionError:
        proc.kill()
        raise
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, out + err
    st = _load(tmp_path, name)
    first = st.get_trials(deepcopy=False)[0]
    assert record.outcome(first).value == "interrupted", out + err
    kept = metrics.read_text().count("\n")
    assert 1 <= kept < 100000  # stopped early, partial metrics kept

    res = study_here("run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", "--set", "budget.max_steps=3", *plan)
    assert res.returncode == 0, res.stdout + res.stderr
    st = _load(tmp_path, name)
    complete = [t for t in st.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    cells = sorted((record.arm_of(t).num_generations, record.seed_of(t)) for t in complete)
    assert cells == [(2, 0), (4, 0)]  # each arm exactly once: nothing lost, nothing repeated


def test_a_stop_while_a_trial_starts_is_not_missed(tmp_path):
    """SIGTERM (a batch system's stop; Ctrl-C takes the same handler) as soon as the trial is registered
    (its folder exists), long before its first step."""
    name = "early"
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", "--set", ENDLESS,
                             "--set", "study.seeds=[0]", *_study(tmp_path, name), "--no-report",
                             "--set", "num_generations=[2]", "--set", "study.baseline={}", "--set", "study.workers=1"],
                            cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    folder = tmp_path / name / "trials" / "00000"
    try:
        _wait_for(folder.exists, 120, "the first trial was never registered")
    except AssertionError:
        proc.kill()
        raise
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=180)  # a missed stop would train 100000 steps
    assert proc.returncode == 130, out + err
    assert (folder / "STOP").read_text().strip() == "interrupted"
    trials = _load(tmp_path, name).get_trials(deepcopy=False)
    assert record.outcome(trials[0]).value == "interrupted", out + err
    assert trials[1].state == optuna.trial.TrialState.WAITING and record.retry_of(trials[1]) == 0


def test_a_study_whose_every_trial_failed_exits_1_with_the_reasons(study_here, tmp_path):
    args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", *QUICK, *_study(tmp_path, "allfail"), "--no-report",
            "--set", "sampler=random", "--set", "study.n_trials=1",
            "--set", "rewards=['helpers_rewards:always_raises']"]
    res = cli_inprocess(*args, PYTHONPATH=str(ROOT / "tests"))  # its own warm session: a failure ends it
    assert res.returncode == 1, res.stdout + res.stderr
    assert "every trial of the study failed" in res.stderr and "always_raises" in res.stderr
    again = study_here(*args)  # nothing left to run: still a failed study
    assert again.returncode == 1 and "every trial of the study failed" in again.stderr


def test_a_full_disk_requeues_the_trials_and_the_rerun_runs_every_cell(study_here, tmp_path):
    """A real tmpfs, filled up: the orchestrator cannot write the trials' files (issue 9, B2)."""
    disk = tmp_path / "disk"
    with tmpfs(disk, "16m"):
        journal = tmp_path / "study.journal"  # the storage is elsewhere: only the trial files are on the full disk
        args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", *QUICK, "--no-report", "--set", "study.name=full",
                "--set", f"study.output_dir={disk / 'full'}", "--storage", str(journal),
                "--set", "num_generations=[2, 4]", "--set", "study.baseline={num_generations: 2}",
                "--set", "study.max_consecutive_failures=2"]
        (disk / "full").mkdir()
        # the folder was first used while there was room (issue 23: its owner is recorded then)
        from grpo_ablate.config import load_study
        from grpo_ablate.study.owner import claim_output_dir

        claim_output_dir(load_study("studies/tiny-cpu.yaml", ["study.name=full", f"study.output_dir={disk / 'full'}",
                                                              f"study.storage={journal}"]))
        fill_disk(disk)
        res = cli_inprocess(*args)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "No space left on device" in res.stderr
        st = _load(tmp_path, "full", str(journal))
        states = [(t.state.name, record.outcome(t).value) for t in st.get_trials(deepcopy=False)]
        assert states == [("FAIL", "interrupted")] * 2 + [("WAITING", "queued")] * 2, states

        (disk / "filler").unlink()
        res = study_here(*args)
        assert res.returncode == 0, res.stdout + res.stderr
        st = _load(tmp_path, "full", str(journal))
        complete = [t for t in st.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
        assert sorted(record.arm_of(t).num_generations for t in complete) == [2, 4]


def test_a_journal_on_a_disk_that_fills_mid_trial_ends_with_its_trials_not_recorded_never_running(study_here, tmp_path):
    """Round 5: after the journal's disk filled up, the run stopped and its summary said "Trials: running 2" while
    nothing ran. The journal and the trials on a real tmpfs, filled once both trials train: the run stops, and the
    trials it could not record are "not recorded", with why and what to do."""
    import threading

    disk = tmp_path / "disk"
    with tmpfs(disk, "16m"):
        args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", "--no-report", "--set", "study.name=jfull",
                "--set", f"study.output_dir={disk / 'jfull'}", "--set", "num_generations=[2, 4]",
                "--set", "study.baseline={num_generations: 2}", "--set", "study.seeds=[0]", "--set", "study.workers=2",
                "--set", "budget.max_steps=400"]
        rows = [disk / "jfull" / "trials" / n / "metrics.jsonl" for n in ("00000", "00001")]
        filled = threading.Event()

        def fill_once_both_train() -> None:
            deadline = time.monotonic() + 600
            while not all(r.exists() and r.stat().st_size > 0 for r in rows):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.2)
            fill_disk(disk)
            filled.set()

        filler = threading.Thread(target=fill_once_both_train, daemon=True)
        filler.start()
        res = study_here(*args)
        filler.join(60)
        (disk / "filler").unlink(missing_ok=True)
    assert filled.is_set(), "the run ended before both trials trained: the test proved nothing"
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    summary = next(line for line in res.stdout.splitlines() if line.startswith("Trials: "))
    assert "running" not in summary and "not recorded" in summary, res.stdout[-3000:]
    assert "Not recorded: trial" in res.stdout and "this run ended without recording it" in res.stdout, res.stdout


def test_killed_run_on_journal_storage_is_finished_by_the_next_run(study_here, tmp_path):
    """kill -9 of the whole run (no heartbeat storage): the next run requeues the dead trial and finishes."""
    import psutil

    args = ["run", "studies/tiny-cpu.yaml", "--set", "temperature=1.0", "--set", "study.seeds=[0]", *_study(tmp_path, "kill"), "--no-report",
            "--set", "num_generations=[2]", "--set", "study.baseline={}", "--set", "study.workers=1"]
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", *args, "--set", "budget.max_steps=200"], cwd=ROOT,
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "kill" / "trials" / "00000" / "metrics.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
        time.sleep(0.5)
    assert metrics.exists()
    for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
        try:
            p.kill()
        except psutil.Error:
            pass
    proc.wait(timeout=30)
    res = study_here(*args, "--set", "budget.max_steps=2")
    assert res.returncode == 0, res.stdout + res.stderr
    st = _load(tmp_path, "kill")
    states = [(t.state.name, record.outcome(t).value) for t in st.get_trials(deepcopy=False)]
    assert states == [("FAIL", "interrupted"), ("COMPLETE", "completed")]
