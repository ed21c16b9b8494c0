"""Per-prompt G and dynamic sampling in real runs of the tiny built-in model (warm session: one process).

    HF_HUB_OFFLINE=1 python -m pytest -q tests/test_g_policy_e2e.py

The equivalences: per-prompt G with g_min = g_max = G, and dynamic sampling on batches with no
zero-spread group, are the fixed-G run to the bit (rewards, loss, learning rate per step); and a
dynamic run on the plain task drops groups and counts them against the completions budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_ablate.contract.metrics import read_rows
from grpo_ablate.core.vocab import METRICS_FILE, Outcome

from helpers import tiny_spec

pytestmark = pytest.mark.slow

SPREAD = [{"name": "task"}, {"name": "helpers_rewards:position_tiebreak"}]  # every group has spread


def _run(session, tmp: Path, name: str, g, steps: int, rewards=()) -> list[dict]:
    spec = tiny_spec(tmp / name, steps=steps, rewards=rewards, num_generations=g, seed=0)
    result = session.run(spec)
    assert result.outcome is Outcome.COMPLETED, f"{result.reason}\n{result.log_tail}"
    return read_rows(tmp / name / METRICS_FILE)


def _same(a: list[dict], b: list[dict]) -> None:
    for key in ("step", "reward", "loss", "learning_rate"):
        assert [r[key] for r in a] == [r[key] for r in b], key


def test_per_prompt_g_and_dynamic_sampling_reduce_to_fixed_g(warm_session, tmp_path):
    fixed = _run(warm_session, tmp_path, "fixed", 4, 4, SPREAD)
    adaptive = _run(warm_session, tmp_path, "adaptive", "adaptive:4[4-4]", 4, SPREAD)
    dynamic = _run(warm_session, tmp_path, "dynamic", "dynamic:4", 4, SPREAD)
    assert len(fixed) == 4
    _same(fixed, adaptive)
    _same(fixed, dynamic)
    assert all(r["g_sizes"] == [4] * 8 and len(r["g_alloc"]) == 8 for r in adaptive)
    assert all(r["completions"] == 32 and r["completions_dropped"] == 0 and r["informative_groups"] == 8
               for r in dynamic)


def test_dynamic_sampling_drops_and_counts_every_completion(warm_session, tmp_path):
    rows = _run(warm_session, tmp_path, "dynamic-drops", "dynamic:4[1]", 3)
    made = sum(r["completions"] for r in rows)
    assert sum(r["completions_dropped"] for r in rows) > 0  # the plain 0/1 task has zero-spread groups
    assert all(r["completions"] - r["completions_dropped"] == 32 for r in rows)  # it trains on the batch
    assert all(r["completions"] in (32, 64) and r.get("extra_rounds", 0) <= 1 for r in rows)  # the cap
    # the budget (3 steps x 32 = 96 completions) counts what was generated: fewer steps than 3
    assert made >= 96 and made - rows[-1]["completions"] < 96 and len(rows) < 3


def test_two_processes_reduce_to_fixed_g(tmp_path):
    """The same equivalences under torchrun with 2 processes (gloo): the allocation is decided on
    rank 0 and broadcast, dynamic sampling's refill decision is taken over both processes. The
    fixed run also shows what any torchrun trial must: both processes counted in world_size and
    in the generation batch (16 per device x 2), and a process tree of its own, its start-up timed."""
    from grpo_ablate.launch import run_trial

    def run(name, g):
        spec = tiny_spec(tmp_path / name, steps=3, rewards=SPREAD, num_generations=g, seed=0,
                         per_device_train_batch_size=16, hardware={"num_processes": 2, "command": "auto"})
        result = run_trial(spec)
        assert result.outcome is Outcome.COMPLETED, f"{result.reason}\n{result.log_tail}"
        return result, read_rows(tmp_path / name / METRICS_FILE)

    result, fixed = run("fixed", 4)
    assert result.world_size == 2 and result.timings["startup_seconds"] > 0  # a session's start-up is not timed
    resolved = json.loads((tmp_path / "fixed" / "resolved_config.json").read_text())
    assert resolved["world_size"] == 2 and resolved["generation_batch_size"] == 32
    assert "torch.distributed.run" in (tmp_path / "fixed" / "log.txt").read_text()
    assert [r["completions"] for r in fixed] == [32, 32, 32]
    _same(fixed, run("adaptive", "adaptive:4[4-4]")[1])
    _, dynamic = run("dynamic", "dynamic:4")
    _same(fixed, dynamic)
    assert all(r["completions"] == 32 and r["completions_dropped"] == 0 for r in dynamic)
