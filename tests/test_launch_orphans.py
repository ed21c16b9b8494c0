"""A trial dies with its orchestrator: no orphan keeps training after a `kill -9` of the study.

    pytest tests/test_launch_orphans.py              # every kind of child: the helper, a warm session, advise's sampler
    pytest -m slow tests/test_launch_orphans.py      # real trials; a few minutes on 2 cores

Real processes throughout: a small script runs `run_trial` on a long tiny trial and is
SIGKILLed while the trial trains (one process, then torchrun with two ranks in their own
sessions); a worker started by hand watches a stand-in parent that is then killed; and a
parent that starts a child through the package's own code (children.die_with_parent, a
WarmSession, advise's `sample`) is SIGKILLed, after which its child must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.contract.env import PARENT_PID_ENV
from helpers import ROOT

STARTUP_DEADLINE_S = 240.0  # imports, warm start and the first step, on a busy 2-core machine
DEATH_DEADLINE_S = 30.0  # the worker polls its parent once a second


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def _long_trial(trial_dir: Path, processes: int):
    trainer = {**TINY_CPU_TRAINER, **({"per_device_train_batch_size": 16} if processes > 1 else {})}
    return spec_from_sections(trial_dir, data={"task": "addition", "num_prompts": 2000}, trainer=trainer,
                              budget={"max_steps": 100_000}, hardware={"num_processes": processes}, timeout_s=900)


def _trial_processes(parent_pid: int) -> list[psutil.Process]:
    """Live processes launched for a trial by `parent_pid` (they carry its pid in their environment)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(PARENT_PID_ENV) == str(parent_pid):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return out


def _wait_for_training(metrics: Path, watched: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if metrics.exists() and metrics.read_text().count("\n") >= 1:
            return
        if watched.poll() is not None:
            pytest.fail(f"exited with {watched.returncode} before training; log:\n{log.read_text() if log.exists() else ''}")
        time.sleep(0.5)
    pytest.fail(f"no training step within {STARTUP_DEADLINE_S:.0f} s; log:\n{log.read_text() if log.exists() else ''}")


def _wait_until_gone(procs: list[psutil.Process]) -> list[psutil.Process]:
    deadline = time.monotonic() + DEATH_DEADLINE_S
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.5)
    return _alive(procs)


def _assert_die_with(parent: subprocess.Popen, children: list[psutil.Process], what: str) -> None:
    """kill -9 the parent; every child must be gone within DEATH_DEADLINE_S."""
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    left = _wait_until_gone(children)
    assert not left, f"{what}: still alive {DEATH_DEADLINE_S:.0f} s after its parent was killed: {[p.cmdline() for p in left]}"


def _kill_all(procs: list[psutil.Process]) -> None:
    for proc in _alive(procs):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


_ORCHESTRATOR = """
import sys
from grpo_ablate.launch import run_trial
from grpo_ablate.contract.spec import TrialSpec
run_trial(TrialSpec.load(sys.argv[1]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2], ids=["python", "torchrun"])
@pytest.mark.usefixtures("addition_model")  # its deadline times a trial's start, not the model's first build
def test_trial_dies_with_a_sigkilled_orchestrator(tmp_path, processes):
    spec = _long_trial(tmp_path / "t", processes)
    spec_path = spec.save()
    orchestrator = subprocess.Popen([sys.executable, "-c", _ORCHESTRATOR, str(spec_path)], env=_env())
    trial: list[psutil.Process] = []
    try:
        _wait_for_training(spec.path / "metrics.jsonl", orchestrator, spec.path / "log.txt")
        trial = _trial_processes(orchestrator.pid)
        workers = [p for p in trial if "grpo_ablate.trainer.worker" in " ".join(p.cmdline())]
        assert len(workers) >= processes, [p.cmdline() for p in trial]
        _assert_die_with(orchestrator, trial, "the trial")
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
            orchestrator.wait()
        _kill_all(trial)


@pytest.mark.slow
def test_worker_ends_its_process_group_when_the_orchestrator_is_gone(tmp_path):
    """No parent-death signal here: the worker's own watch of GRPO_ABLATE_PARENT_PID ends it."""
    stand_in = subprocess.Popen(["sleep", "600"])  # plays the orchestrator; left a zombie when killed
    spec = _long_trial(tmp_path / "t", 1)
    spec_path = spec.save()
    log = spec.path / "log.txt"
    with log.open("wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "grpo_ablate.trainer.worker", str(spec_path)], stdout=out,
                                  stderr=subprocess.STDOUT, env={**_env(), PARENT_PID_ENV: str(stand_in.pid)},
                                  start_new_session=True)
    try:
        _wait_for_training(spec.path / "metrics.jsonl", worker, log)
        stand_in.send_signal(signal.SIGKILL)  # not reaped yet: a zombie counts as gone
        worker.wait(timeout=DEATH_DEADLINE_S)
        assert worker.returncode == -signal.SIGKILL
        assert f"the orchestrator (pid {stand_in.pid}) is gone" in log.read_text()
    finally:
        for proc in (worker, stand_in):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_worker_refuses_to_start_when_the_orchestrator_is_already_gone(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    spec = _long_trial(tmp_path / "t", 1)
    done = subprocess.run([sys.executable, "-m", "grpo_ablate.trainer.worker", str(spec.save())], capture_output=True,
                          text=True, env={**_env(), PARENT_PID_ENV: str(gone.pid)}, timeout=120)
    assert done.returncode == 1 and "gone before the trial started" in done.stdout


@pytest.mark.slow
def test_a_failing_progress_callback_does_not_leave_the_trial_running(tmp_path):
    from grpo_ablate.launch import run_trial

    spec = _long_trial(tmp_path / "t", 1)

    def broken(row: dict) -> None:
        raise RuntimeError("the study's storage went away")

    # this worker's own earlier children (the suite's warm session, when a test before used it) are not this trial's
    before = {p.pid for p in _trial_processes(os.getpid())}
    with pytest.raises(RuntimeError, match="storage went away"):
        run_trial(spec, on_progress=broken)
    assert not [p for p in _alive(_trial_processes(os.getpid())) if p.pid not in before]


# ---------------------------------------------------------------- every child the tool starts


_HELPER_PARENT = """
import subprocess, sys, time
from grpo_ablate.core.children import die_with_parent
child = subprocess.Popen(["sleep", "600"], start_new_session=True, preexec_fn=die_with_parent())
print(child.pid, flush=True)
time.sleep(600)
"""

_WARM_PARENT = """
import sys, time
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.launch import WarmSession, trial_environment
spec = spec_from_sections(sys.argv[1], data={"task": "addition"}, budget={"max_steps": 100000}, timeout_s=900)
spec.path.mkdir(parents=True, exist_ok=True)
session = WarmSession()
session.start(spec, trial_environment(spec), spec.path / "log.txt")
print(session.pid, flush=True)
time.sleep(600)
"""

_ADVISE_PARENT = """
import sys
from pathlib import Path
from grpo_ablate.config import load_study
from grpo_ablate.preflight.advise import sample
sample(load_study(sys.argv[1]), k=4, num_prompts=64, temperatures=[1.0], seed=0, folder=Path(sys.argv[2]))
"""

_ADVISE_STUDY = """\
study: {{name: orphans, output_dir: {out}, sampler: tpe, n_trials: 2}}
model: {{name_or_path: "builtin:tiny"}}
data: {{task: addition, num_prompts: 200}}
rewards: [task]
trainer: {{per_device_train_batch_size: 16, max_completion_length: 6, beta: 0.0}}
search: {{num_generations: [2, 4]}}
budget: {{max_steps: 5}}
"""


def _children_named(parent: subprocess.Popen, words: str, count: int = 1) -> list[psutil.Process]:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        found = []
        for child in psutil.Process(parent.pid).children(recursive=True):
            try:
                if words in " ".join(child.cmdline()):
                    found.append(child)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        if len(found) >= count:
            return found
        if parent.poll() is not None:
            pytest.fail(f"the parent exited with {parent.returncode} before starting its child")
        time.sleep(0.2)
    pytest.fail(f"not {count} child(ren) running {words!r} within {STARTUP_DEADLINE_S:.0f} s")


@pytest.mark.parametrize("kind", ["helper", "warm-session", "advise-sampler"])
def test_every_kind_of_child_dies_with_a_sigkilled_parent(tmp_path, kind):
    """A real parent starts its child through the package's own code, then gets kill -9."""
    if kind == "helper":
        args, words = ["-c", _HELPER_PARENT], "sleep 600"
    elif kind == "warm-session":
        # the session template and the session it forked (below the template, so twice the kill's path)
        args, words = ["-c", _WARM_PARENT, str(tmp_path / "t")], "grpo_ablate.trainer.session"
    else:
        study = tmp_path / "study.yaml"
        study.write_text(_ADVISE_STUDY.format(out=tmp_path / "run"))
        args, words = ["-c", _ADVISE_PARENT, str(study), str(tmp_path / "advise")], "grpo_ablate.trainer.sample"
    parent = subprocess.Popen([sys.executable, *args], env=_env(), stdout=subprocess.DEVNULL)
    child: list[psutil.Process] = []
    try:
        child = _children_named(parent, words, count=2 if kind == "warm-session" else 1)
        _assert_die_with(parent, child, kind)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        _kill_all(child)


# ---------------------------------------------------------------- what a reward starts dies with the run

_TREE_ORCHESTRATOR = """
import sys
from grpo_ablate.launch import ProcessLauncher, WarmSession
from grpo_ablate.contract.spec import TrialSpec
launcher = {"process": ProcessLauncher, "warm": WarmSession}[sys.argv[2]]()
launcher.run(TrialSpec.load(sys.argv[1]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["process", "warm"])
def test_what_a_reward_started_dies_with_a_sigkilled_orchestrator(tmp_path, launcher):
    """kill -9 of the orchestrator while a reward's children run: a Popen child in its own session, a daemon's
    double fork and a setsid fork of the trial process. Within DEATH_DEADLINE_S none is left (issue 43)."""
    from helpers import TESTS

    spec = spec_from_sections(tmp_path / "t", data={"task": "addition", "num_prompts": 2000}, trainer=dict(TINY_CPU_TRAINER),
                              rewards=[{"name": "task"}, {"name": "helpers_rewards:spawn_orphans"}],
                              budget={"max_steps": 100_000}, timeout_s=900, env={"CUDA_VISIBLE_DEVICES": ""})
    pids_file = tmp_path / "pids"
    env = {**_env(), "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]), "ORPHAN_PIDS_FILE": str(pids_file)}
    orchestrator = subprocess.Popen([sys.executable, "-c", _TREE_ORCHESTRATOR, str(spec.save()), launcher], env=env)
    spawned: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while not (pids_file.exists() and len(pids_file.read_text().split()) >= 3):
            assert orchestrator.poll() is None, f"the orchestrator ended ({orchestrator.returncode}) before the reward ran"
            assert time.monotonic() < deadline, f"the reward started nothing within {STARTUP_DEADLINE_S:.0f} s"
            time.sleep(0.5)
        spawned = [psutil.Process(int(pid)) for pid in pids_file.read_text().split()]
        assert len(_alive(spawned)) == 3
        _assert_die_with(orchestrator, spawned, f"what a reward started ({launcher} launcher)")
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
            orchestrator.wait()
        _kill_all(spawned)


_MARKED_PARENT = """
import os, subprocess, sys, time
from grpo_ablate.core.children import TREE_ENV, tree_token
env = {**os.environ, TREE_ENV: tree_token()}
setsid = subprocess.Popen(["sleep", "600"], start_new_session=True, env=env)
double = subprocess.run(["sh", "-c", "setsid sleep 601 >/dev/null 2>&1 & echo $!"], env=env, capture_output=True, text=True)
print(setsid.pid, double.stdout.split()[0], flush=True)
time.sleep(600)
"""


def test_the_tree_supervisor_ends_every_marked_process_when_its_run_is_killed(tmp_path):
    """No trial needed: a parent marks a setsid child and a double-forked one (left to PID 1) and is SIGKILLed."""
    parent = subprocess.Popen([sys.executable, "-c", _MARKED_PARENT], env=_env(), stdout=subprocess.PIPE, text=True)
    children: list[psutil.Process] = []
    try:
        line = parent.stdout.readline()
        children = [psutil.Process(int(pid)) for pid in line.split()]
        assert len(_alive(children)) == 2, line
        supervisors = [p for p in psutil.Process(parent.pid).children() if "--supervise" in p.cmdline()]
        assert len(supervisors) == 1 and psutil.Process(children[1].pid).ppid() != parent.pid  # one orphaned already
        _assert_die_with(parent, children + supervisors, "a marked setsid child and a double fork, and the supervisor")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        _kill_all(children)
