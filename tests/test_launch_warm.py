"""The warm session: each trial in a fresh fork of a pre-imported template, so it starts as a fresh process would.

    pytest tests/test_launch_warm.py              # which trials run in a session, and under what environment
    pytest -m slow tests/test_launch_warm.py      # real trials: bit-identical rewards after a polluter and a failure

The slow test's reward module (written into the test's folder) keeps state at module level and
leaves the environment polluted, as a study's own reward file might: a session that
let state cross trials would change the next trial's rewards or fail it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.launch import LAUNCHER_ENV, ProcessLauncher, WarmSession, launcher_for, launcher_name
from grpo_ablate.launch.warm import _startup_key
from grpo_ablate.core.vocab import METRICS_FILE, RESULT_FILE, Outcome

ROOT = Path(__file__).resolve().parents[1]
CPU = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _spec(folder: Path, rewards: list | None = None, env: dict | None = None, **hardware):
    return spec_from_sections(folder, data={"task": "addition", "num_prompts": 200}, trainer=dict(TINY_CPU_TRAINER),
                              rewards=rewards or ["task"], budget={"max_steps": 2}, hardware=hardware,
                              env=env if env is not None else dict(CPU), timeout_s=600)


def test_only_the_thread_counts_may_change_inside_a_session():
    base = {"PATH": "/bin", **CPU}
    assert _startup_key(base) == _startup_key({**base, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"})
    assert _startup_key(base) == _startup_key({**base, "GRPO_ABLATE_LAUNCHED_AT": "123.0"})
    assert _startup_key(base) == _startup_key({**base, "PYTEST_CURRENT_TEST": "tests/x.py::y (call)"})  # changes every test phase
    assert _startup_key(base) != _startup_key({k: v for k, v in base.items() if k != "OMP_NUM_THREADS"})  # unset: the default
    assert _startup_key(base) != _startup_key({**base, "OMP_NUM_THREADS": "2"})  # OMP and MKL disagree: not applicable
    assert _startup_key(base) != _startup_key({**base, "CUDA_VISIBLE_DEVICES": "0"})
    assert _startup_key(base) != _startup_key({**base, "PYTHONHASHSEED": "0"})


def test_a_study_runs_single_process_cpu_trials_in_a_warm_session(tmp_path, monkeypatch):
    monkeypatch.delenv(LAUNCHER_ENV, raising=False)
    cpu = _spec(tmp_path / "a")
    assert launcher_name(cpu) == "warm" and isinstance(launcher_for(cpu), WarmSession)
    assert launcher_for(cpu) is launcher_for(_spec(tmp_path / "b"))  # one session per worker thread
    gpu = _spec(tmp_path / "c", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert launcher_name(gpu) == "process" and isinstance(launcher_for(gpu), ProcessLauncher)
    assert launcher_name(gpu, probe=True) == "warm"  # a probe's one-step points on a GPU share a session too
    assert launcher_name(_spec(tmp_path / "d", num_processes=2)) == "process"
    assert launcher_name(_spec(tmp_path / "e", vllm={"mode": "colocate"})) == "process"
    assert launcher_name(_spec(tmp_path / "g", launcher="process")) == "process"  # hardware.launcher
    assert launcher_name(_spec(tmp_path / "h", env={"CUDA_VISIBLE_DEVICES": "0"}, launcher="warm")) == "warm"
    monkeypatch.setenv(LAUNCHER_ENV, "process")
    assert launcher_name(cpu) == "process"
    monkeypatch.setenv(LAUNCHER_ENV, "warm")
    assert launcher_name(gpu) == "warm" and launcher_name(_spec(tmp_path / "f", num_processes=2)) == "process"
    monkeypatch.setenv(LAUNCHER_ENV, "kubernetes")
    with pytest.raises(ValueError, match="GRPO_ABLATE_LAUNCHER"):
        launcher_name(cpu)


_STATEFUL_REWARDS = '''
import os

SEEN = set()  # module state: a fresh process starts with nothing seen


def novelty(prompts, completions, **kwargs):
    """1 for a completion this process has not scored before, else 0."""
    if os.environ.get("GRPO_ABLATE_TEST_POLLUTED"):
        raise RuntimeError("a previous trial's environment leaked into this one")
    return _score(completions)


def _score(completions):
    out = []
    for completion in completions:
        out.append(0.0 if str(completion) in SEEN else 1.0)
        SEEN.add(str(completion))
    return out


def pollute(prompts, completions, **kwargs):
    import torch

    out = _score(completions)
    os.environ["GRPO_ABLATE_TEST_POLLUTED"] = "1"
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True, warn_only=True)
    return out


def broken(prompts, completions, **kwargs):
    raise ValueError("broken on purpose")
'''


def _rewards(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / METRICS_FILE).read_text().splitlines()]
    return [{k: v for k, v in row.items() if k == "step" or "reward" in k} for row in rows]


def _session_pid(folder: Path) -> int:
    return json.loads((folder / RESULT_FILE).read_text())["session_pid"]


@pytest.mark.slow
def test_each_trial_runs_in_a_fresh_fork_and_rewards_exactly_as_the_one_before_it_did(tmp_path, monkeypatch):
    (tmp_path / "stateful_rewards.py").write_text(textwrap.dedent(_STATEFUL_REWARDS))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{ROOT}")  # the study's reward file, importable by every trial
    measured = [{"name": "task"}, {"name": "stateful_rewards:novelty"}]
    with WarmSession() as session:
        polluter = session.run(_spec(tmp_path / "polluter", [{"name": "stateful_rewards:pollute"}],
                                     env={**CPU, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}))
        assert polluter.outcome is Outcome.COMPLETED, polluter.log_tail
        after_polluter = session.run(_spec(tmp_path / "after-polluter", measured))
        assert after_polluter.outcome is Outcome.COMPLETED, after_polluter.log_tail
        failed = session.run(_spec(tmp_path / "failed", [{"name": "stateful_rewards:broken"}]))
        assert failed.outcome is Outcome.FAILED and "broken on purpose" in (failed.reason or "")
        after_failure = session.run(_spec(tmp_path / "after-failure", measured))
        assert after_failure.outcome is Outcome.COMPLETED, after_failure.log_tail
        assert session.processes_started == 4  # a fresh fork for every trial, thrown away after it
    names = ("polluter", "after-polluter", "failed", "after-failure")
    assert len({_session_pid(tmp_path / name) for name in names}) == 4
    expected = _rewards(tmp_path / "after-failure")
    assert len(expected) == 2
    assert _rewards(tmp_path / "after-polluter") == expected  # after a polluter, as after a failure: bit-identical
