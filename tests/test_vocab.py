"""The shared vocabulary: arm and cell codecs round-trip, and every registry agrees with its code."""

from __future__ import annotations

import pytest

from grpo_ablate.storage.store import mask_url
from grpo_ablate.core.vocab import (
    BUILTIN_REWARDS,
    BUILTIN_TASKS,
    DIAGNOSTIC_METRICS,
    HEADLINE_METRICS,
    TARGET_METRICS,
    METRICS,
    Arm,
    Cell,
    Outcome,
    metric,
    reward_names,
)


def test_arm_knobs_round_trip_and_keys_stay_stable():
    for arm in (Arm(8, 64, 0.9), Arm(2, 16, 1.0), Arm(16, 256, 0.65)):
        assert Arm.from_mapping(arm.as_dict()) == arm
    assert Arm(8, 64, 0.9).key == "G8xB64|T0.9"
    assert not hasattr(Arm, "from_key")  # a key is matched on, never parsed back into knobs


def test_an_arm_stored_with_g_as_text_is_not_parsed_back():
    """G becomes a value from text only in the study-file loader: a stored label (an older study's) reads as no arm."""
    assert Arm.from_mapping({"num_generations": "4→8@40%", "generation_batch_size": 64, "temperature": 1.0}) is None
    assert Arm.from_mapping({"num_generations": "8", "generation_batch_size": 64, "temperature": 1.0}) is None
    assert Arm.from_mapping({"num_generations": 8, "generation_batch_size": "64", "temperature": "1"}) == Arm(8, 64, 1.0)


def test_cell_attrs_round_trip():
    cell = Cell(Arm(4, 32, 0.7), seed=3, role="num_generations=4")
    assert Cell.from_attrs(cell.as_attrs()) == cell
    assert cell.key == "G4xB32|T0.7|seed3"
    assert Cell.from_attrs({"num_generations": 4}) is None


def test_metric_registry_partitions_and_bounds():
    parts = [set(HEADLINE_METRICS), set(DIAGNOSTIC_METRICS), set(TARGET_METRICS)]
    assert set().union(*parts) == set(METRICS) and sum(map(len, parts)) == len(METRICS)
    assert METRICS["stability_variance"].clip(-0.5) == 0.0
    assert METRICS["distinct_frac"].clip(1.5) == 1.0
    assert metric("from_an_old_version").label == "from an old version"


def test_task_names_are_rewards_and_outcomes_are_strings():
    assert set(BUILTIN_TASKS) <= set(reward_names())
    assert set(BUILTIN_REWARDS) <= set(reward_names())
    assert Outcome("oom") is Outcome.OOM and Outcome.INTERRUPTED.retried and not Outcome.FAILED.retried


@pytest.mark.parametrize("url, shown", [
    ("postgresql://grpo:s3cr%40t@db:5432/x", "postgresql://grpo:***@db:5432/x"),
    ("postgresql+psycopg://u:p@h/db?sslmode=require", "postgresql+psycopg://u:***@h/db?sslmode=require"),
    ("postgresql://grpo@db/x", "postgresql://grpo@db/x"),
    ("runs/x/study.journal", "runs/x/study.journal"),
])
def test_mask_url_hides_only_the_password(url, shown):
    assert mask_url(url) == shown
