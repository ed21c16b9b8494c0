"""A warm session behaves as a fresh process: what a trial changes is restored, or detected and the session replaced.

    pytest tests/test_launch_fresh.py              # SessionBaseline.restore on every switch, in this process
    pytest -m slow tests/test_launch_fresh.py      # real trials whose rewards leave state (tests/session_rewards.py)

The slow tests compare held-out rewards bit for bit with a process of its own
(GRPO_ABLATE_LAUNCHER=process's launcher): `session_rewards:probe` turns the process state a
reward can see into its reward values. And a trial's whole process tree ends with it, in both
launchers: a reward's grandchildren (one in a session of its own) are gone after the trial.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

import session_rewards
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.trainer.launchers import ProcessLauncher
from grpo_ablate.trainer.launchers.warm import SESSION_ATTEMPT_LOG
from grpo_ablate.trainer.session import SessionBaseline
from grpo_ablate.vocab import LOG_FILE, METRICS_FILE, RESULT_FILE, Outcome
from helpers import ROOT, TESTS

CPU = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# held-out state as rewards, plus what no session can restore (a counter on `sys`, threads, processes...)
MEASURED = [{"name": "task"}, {"name": "session_rewards:probe"}, {"name": "session_rewards:sys_counter"},
            {"name": "session_rewards:leave_unrestorable"}]


def test_restore_puts_back_every_switch_a_trial_can_flip():
    session_rewards.state()  # the libraries' lazy set-up (transformers' logger), done before a session's baseline too
    baseline = SessionBaseline()
    before = session_rewards.state()
    before.pop("rng")
    try:
        session_rewards.flip_restorable(grad_and_device=True)
        flipped = session_rewards.state()
        changed = {k for k in before if flipped[k] != before[k]}
        # every class the session restores is changed by the attack (else this test could not fail)
        assert changed >= {"warning_filters", "warning_once_cache", "root_logger", "transformers_logger",
                           "user_logger", "sigusr1", "stdout", "grad", "default_device", "anomaly", "tf32", "sdpa",
                           "dynamo_frames", "start_method", "umask", "recursion_limit"}, changed
    finally:
        baseline.restore(dict(os.environ))
    after = session_rewards.state()
    after.pop("rng")
    assert after == before


def test_what_a_restore_cannot_undo_is_named():
    baseline = SessionBaseline()
    import builtins
    import sys
    import threading

    fd = os.open(os.devnull, os.O_RDONLY)
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="left-running", daemon=True)
    thread.start()
    sys.grpo_ablate_calls = 1
    builtins.grpo_ablate_left = True
    try:
        found = "\n".join(baseline.unrestorable())
    finally:
        os.close(fd)
        release.set()
        thread.join()
        del sys.grpo_ablate_calls, builtins.grpo_ablate_left
    assert "left-running" in found and "grpo_ablate_calls" in found and "grpo_ablate_left" in found
    assert f"{fd} -> /dev/null" in found
    assert baseline.unrestorable() == []


# --------------------------------------------------------------------------------------------- real trials


def _spec(folder: Path, rewards: list, env: dict | None = None):
    return spec_from_sections(folder, data={"task": "addition", "num_prompts": 200}, trainer=dict(TINY_CPU_TRAINER),
                              rewards=rewards, budget={"max_steps": 2}, hardware={}, env=dict(env or CPU), timeout_s=600)


def _rewards(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / METRICS_FILE).read_text().splitlines()]
    return [{k: v for k, v in row.items() if k == "step" or "reward" in k} for row in rows]


def _probes(folder: Path) -> list[str]:
    return [line for line in (folder / LOG_FILE).read_text().splitlines() if line.startswith("PROBE ")]


def _assert_as_fresh(folder: Path, fresh: Path) -> None:
    assert _probes(folder) == _probes(fresh), "the process state the probe saw differs from a fresh process's"
    assert _rewards(folder) == _rewards(fresh)


def _gone(pids: list[int], deadline_s: float = 20.0) -> list[int]:
    """The pids still alive (and not zombies) after waiting up to `deadline_s`."""
    end = time.monotonic() + deadline_s
    while True:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.5)


def _grandchildren(path: Path, runs: int) -> list[int]:
    pids = [int(line) for line in path.read_text().split()]
    assert len(pids) == 2 * runs, pids
    return pids


@pytest.fixture
def reward_env(tmp_path, monkeypatch):
    """tests/ importable by the trials; HF_HUB_OFFLINE left for the launcher to set (the built-in model)."""
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}:{ROOT}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv(session_rewards.GRANDCHILDREN, str(tmp_path / "grandchildren.txt"))
    return tmp_path / "grandchildren.txt"


@pytest.mark.slow
def test_a_session_trial_rewards_as_a_fresh_process_whatever_the_trial_before_it_left(warm_session, tmp_path, reward_env):
    """Four session trials and one process: the fewest that show each class (a session start costs ~20 s here)."""
    fresh = tmp_path / "fresh"
    reference = ProcessLauncher().run(_spec(fresh, MEASURED))
    assert reference.outcome is Outcome.COMPLETED, reference.log_tail
    assert '"hub_offline": true' in _probes(fresh)[0]  # the built-in demo's trial is offline
    assert "process(es) running, ended now" in (fresh / LOG_FILE).read_text()  # a process of its own ends its tree too
    started = warm_session.processes_started

    # a module that a registry refuses to take twice: the session's failure is settled by a fresh process
    first = warm_session.run(_spec(tmp_path / "registry-1", [{"name": "task"}, {"name": "registry_rewards:registered"}]))
    assert first.outcome is Outcome.COMPLETED, first.log_tail
    attacked = warm_session.run(_spec(tmp_path / "registry-2", [{"name": "task"}, {"name": "registry_rewards:registered"},
                                                               {"name": "session_rewards:attack_restorable"}]))
    assert attacked.outcome is Outcome.COMPLETED, attacked.log_tail
    assert "already registered as pytree node" in (tmp_path / "registry-2" / SESSION_ATTEMPT_LOG).read_text()

    # what a session restores (the attack above flipped it all): the next trial sees a fresh process's state
    after = warm_session.run(_spec(tmp_path / "after-restorable", MEASURED))
    assert after.outcome is Outcome.COMPLETED, after.log_tail
    assert json.loads((tmp_path / "after-restorable" / RESULT_FILE).read_text())["session_trial"] == 2
    _assert_as_fresh(tmp_path / "after-restorable", fresh)
    # what no restore undoes (the measured rewards leave it): named in the log, processes ended, the session replaced
    log = (tmp_path / "after-restorable" / LOG_FILE).read_text()
    for words in ("names added or replaced on `sys`: ['grpo_ablate_calls']", "left-by-a-reward",
                  "atexit handler(s) registered", "`builtins`: ['grpo_ablate_left']", "-> /dev/null",
                  "process(es) left running"):
        assert words in log, words
    # the attack (a counter kept on `sys`): trial 1 got [1.2, 1.3, 1.3] against a fresh process's [0.7, 0.8, 0.8]
    again = warm_session.run(_spec(tmp_path / "again", MEASURED))
    assert again.outcome is Outcome.COMPLETED, again.log_tail
    _assert_as_fresh(tmp_path / "again", fresh)
    assert warm_session.processes_started - started == 3
    assert _gone(_grandchildren(reward_env, runs=3)) == []  # the process's and both session trials'
