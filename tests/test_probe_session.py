"""Probe points in warm sessions: each point in a fresh fork of the template, an out-of-memory point's included.

    pytest tests/test_probe_session.py             # which trials run in a session
    pytest -m slow tests/test_probe_session.py     # real 1-step trials of the tiny model

Real trials only. An in-process out-of-memory error is a real MemoryError raised inside
training by tests/helpers_rewards.py (as CUDA's error would be on a GPU); the CPU cap's kill of
a whole session is covered by tests/test_probe.py's boundary test.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from grpo_ablate.config import load_study
from grpo_ablate.preflight.probe import measure_point
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.launch import LauncherPool, shares_a_session
from grpo_ablate.core.vocab import LOG_FILE, MEMORY_FILE, RESULT_FILE, Arm, Cell, Outcome
from helpers import TRIAL_ENV, write_study
from grpo_ablate.contract.spec import VllmSpec



def _study(tmp_path: Path, rewards: str = "[task]"):
    path = write_study(tmp_path, f"""\
        study: {{name: session-test, output_dir: {tmp_path / 'run'}, sampler: tpe, n_trials: 2, trial_timeout: 300}}
        model: {{name_or_path: "builtin:tiny"}}
        data: {{task: addition, num_prompts: 500}}
        rewards: {rewards}
        trainer: {{per_device_train_batch_size: 16, max_completion_length: 6, beta: 0.0}}
        hardware: {{command: python}}
        search: {{num_generations: [2, 8], generation_batch_size: [16, 32]}}
        budget: {{max_steps: 20}}
        """)
    return load_study(path)


def _suite_trial_env(monkeypatch) -> None:
    """The environment of the suite's warm-session trials (helpers.TRIAL_ENV: tests/ importable for helpers_rewards,
    no GPU, one thread), so these points fork from that session's template instead of starting one of their own (an
    interpreter's imports, ~5 CPU s): a point built here has no CPU slot's thread count and no CUDA_VISIBLE_DEVICES,
    each a startup key of its own."""
    for key, value in TRIAL_ENV.items():
        monkeypatch.setenv(key, value)


def _result(folder: Path) -> dict:
    return json.loads((folder / RESULT_FILE).read_text())


@pytest.mark.slow
def test_each_point_gets_a_fresh_fork_and_an_in_process_oom_reaches_no_other_point(tmp_path, monkeypatch):
    _suite_trial_env(monkeypatch)  # helpers_rewards, in the session's process
    study = _study(tmp_path, "[{name: task}, {name: 'helpers_rewards:oom_for_large_groups', weight: 0.0}]")
    root = tmp_path / "points"
    with LauncherPool(probe=True) as pool:
        first = measure_point(study, 2, 16, root / "a", steps=1, pool=pool)
        oom = measure_point(study, 8, 16, root / "b", steps=1, pool=pool)  # MemoryError inside training
        last = measure_point(study, 2, 32, root / "c", steps=1, pool=pool)
        assert pool.processes_started == 3  # a fresh fork of the template per point
    assert (first.fits, oom.fits, last.fits) == (True, False, True)
    assert oom.outcome == Outcome.OOM.value and "MemoryError" in (oom.reason or "")
    pids = {_result(root / name)["session_pid"] for name in "abc"}
    assert len(pids) == 3, pids
    for name in "abc":  # each point leaves a trial's own files
        assert (root / name / LOG_FILE).stat().st_size > 0 and (root / name / MEMORY_FILE).exists()
    assert "simulated" in (root / "b" / LOG_FILE).read_text() and "simulated" not in (root / "c" / LOG_FILE).read_text()
    assert first.steps == last.steps == 1 and last.seconds_per_step
    # A fork's peak is a fresh process's: an earlier point's memory is not in it.
    alone = measure_point(study, 2, 32, root / "alone", steps=1)
    assert last.peak_memory_mb <= alone.peak_memory_mb * 1.1, (last.peak_memory_mb, alone.peak_memory_mb)


@pytest.mark.slow
def test_a_point_past_its_timeout_is_killed_and_the_next_gets_a_fresh_process(tmp_path, monkeypatch):
    _suite_trial_env(monkeypatch)  # the test above's startup environment: its template serves
    study = _study(tmp_path)
    # 2,000 steps cannot finish in a second, even forked from a template that did every import already
    slow = build_spec(study, Cell(Arm(2, 16, 1.0), 0, "probe"), tmp_path / "slow", probe_steps=2000)
    slow.timeout_s = 1.0
    normal = build_spec(study, Cell(Arm(2, 16, 1.0), 0, "probe"), tmp_path / "normal", probe_steps=1)
    assert shares_a_session(normal)
    with LauncherPool(probe=True) as pool:
        timed_out = pool.for_spec(slow).run(slow)
        ok = pool.for_spec(normal).run(normal)
        assert pool.processes_started == 2
    assert timed_out.outcome is Outcome.INTERRUPTED and "timeout" in (timed_out.reason or "")
    assert ok.outcome is Outcome.COMPLETED and _result(tmp_path / "normal")["steps"] == 1


def test_multi_process_trials_keep_a_process_each(tmp_path):
    study = _study(tmp_path)
    spec = build_spec(study, Cell(Arm(2, 16, 1.0), 0, "probe"), tmp_path / "x")
    spec.hardware = replace(spec.hardware, num_processes=2, command="torchrun")
    assert not shares_a_session(spec)
    spec.hardware = replace(spec.hardware, num_processes=1, command="python", vllm=VllmSpec(mode="colocate"))
    assert not shares_a_session(spec)
