"""A warm session's trial starts as a fresh process does, whatever the trial before it changed: each is a fresh fork.

    pytest tests/test_launch_fresh.py              # the process state a reward can change, and a probe sees
    pytest -m slow tests/test_launch_fresh.py      # real trials whose rewards leave state (tests/session_rewards.py)

The slow test compares rewards bit for bit with a process of its own (ProcessLauncher):
`session_rewards:probe` turns the process state a reward can see into its reward values, after
`session_rewards:disturb` changed every kind of state issue 43 found crossing trials. And a
trial's whole process tree ends with it, in both launchers: a reward's grandchildren (one in a
session of its own) are gone after the trial.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import session_rewards
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.launch import ProcessLauncher
from grpo_ablate.core.vocab import LOG_FILE, METRICS_FILE, RESULT_FILE, Outcome
from helpers import ROOT, TESTS

CPU = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# the process state as rewards, plus what lingers (a counter on `sys`, threads, processes, descriptors...)
MEASURED = [{"name": "task"}, {"name": "session_rewards:probe"}, {"name": "session_rewards:sys_counter"},
            {"name": "session_rewards:leave_unrestorable"}]
DISTURB = [{"name": "task"}, {"name": "session_rewards:disturb"}, {"name": "session_rewards:attack_restorable"},
           {"name": "session_rewards:sys_counter"}, {"name": "session_rewards:leave_unrestorable"}]


def test_disturb_changes_every_kind_of_state_the_probe_sees():
    """In a throwaway process: each kind `disturb` changes is seen changed by the probe (else the slow test proves nothing)."""
    script = ("import json, session_rewards as s; before = s.process_state(); s.disturb([], []); "
              "print(json.dumps([before, s.process_state()], default=str))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{TESTS}:{ROOT}"})
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = json.loads(done.stdout.splitlines()[-1])
    unchanged = sorted(k for k in before if before[k] == after[k])
    if len(os.sched_getaffinity(0)) == 1:
        unchanged.remove("affinity")  # one CPU: nothing to narrow
    assert unchanged == [], unchanged


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
def test_a_session_trial_rewards_as_a_fresh_process_whatever_the_trial_before_it_changed(warm_session, tmp_path, reward_env):
    """A process of its own, then a session trial that changes every kind of process state and leaves threads,
    descriptors and processes behind, then a session trial that must see exactly what the fresh process saw."""
    fresh = tmp_path / "fresh"
    reference = ProcessLauncher().run(_spec(fresh, MEASURED))
    assert reference.outcome is Outcome.COMPLETED, reference.log_tail
    assert '"hub_offline": true' in _probes(fresh)[0]  # the built-in demo's trial is offline
    assert "process(es) running, ended now" in (fresh / LOG_FILE).read_text()  # a process of its own ends its tree too
    started = warm_session.processes_started

    disturbed = warm_session.run(_spec(tmp_path / "disturbed", DISTURB))
    assert disturbed.outcome is Outcome.COMPLETED, disturbed.log_tail
    assert "DISTURBED " in (tmp_path / "disturbed" / LOG_FILE).read_text()
    after = warm_session.run(_spec(tmp_path / "after", MEASURED))
    assert after.outcome is Outcome.COMPLETED, after.log_tail
    _assert_as_fresh(tmp_path / "after", fresh)  # priority, C-level env, gc, threads...: none crossed
    again = warm_session.run(_spec(tmp_path / "again", MEASURED))
    assert again.outcome is Outcome.COMPLETED, again.log_tail
    _assert_as_fresh(tmp_path / "again", fresh)  # and the measured trial's own leftovers did not reach this one
    pids = {json.loads((tmp_path / name / RESULT_FILE).read_text())["session_pid"] for name in ("disturbed", "after", "again")}
    assert len(pids) == 3 and warm_session.processes_started - started == 3  # a fresh fork per trial
    assert _gone(_grandchildren(reward_env, runs=4)) == []  # the process's and the three session trials'
