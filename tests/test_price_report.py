"""The report of a branched study: each seed's shared prefix is no arm's trial, its compute is shown once, and the
verdict says the arms branched at step B (report/data.py, report/verdict.py, report/wording.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from optuna.distributions import IntDistribution
from optuna.trial import FrozenTrial, TrialState

from _report_fixtures import SeedRun, make_custom_study
from grpo_ablate.records import trial_record as record
from grpo_ablate.report.data import build_report_data, shared_prefix
from grpo_ablate.report.records import load_trials
from grpo_ablate.report.summary import summary_dict
from grpo_ablate.core.vocab import PREFIX_ROLE, Arm

BASE, G4 = Arm(8, 32, 1.0), Arm(4, 32, 1.0)


def _runs(finals: dict[int, float]) -> dict[int, SeedRun]:
    return {s: SeedRun(eval_curve=(0.2, (0.2 + f) / 2, f)) for s, f in finals.items()}


ARMS = {"baseline": (BASE, _runs({0: 0.30, 1: 0.50, 2: 0.70})),
        "num_generations=4": (G4, _runs({0: 0.36, 1: 0.57, 2: 0.75}))}
# the prefixes train the baseline arm to the branch step: far better held-out numbers would move the baseline's mean
# (and its seeds) if they were read as baseline trials
PREFIXES = {PREFIX_ROLE: (BASE, _runs({0: 0.99, 1: 0.99, 2: 0.99}))}


@pytest.fixture(scope="module")
def branched(tmp_path_factory):
    storage, _ = make_custom_study(tmp_path_factory.mktemp("branched"), {**ARMS, **PREFIXES},
                                   evaluation={"num_prompts": 4})
    attrs, frozen = load_trials(storage, "custom")
    return frozen, build_report_data("custom", attrs, frozen, storage_url=storage, branched_at=40)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    storage, _ = make_custom_study(tmp_path_factory.mktemp("plain"), ARMS, evaluation={"num_prompts": 4})
    attrs, frozen = load_trials(storage, "custom")
    return build_report_data("custom", attrs, frozen, storage_url=storage)


def test_a_prefix_is_no_arms_trial_and_the_answer_is_the_unbranched_ones(branched, plain):
    frozen, data = branched
    assert sum(1 for t in frozen if record.role_of(t) == PREFIX_ROLE) == 3  # they are in the storage
    assert all(r.role != PREFIX_ROLE for r in data.records) and len(data.records) == 6
    by = {a.config: a for a in data.arms}
    ref = {a.config: a for a in plain.arms}
    for arm in (BASE, G4):
        assert by[arm].metrics["eval_final_reward"].n == 3
        assert by[arm].metrics["eval_final_reward"].mean == pytest.approx(ref[arm].metrics["eval_final_reward"].mean)
    assert data.verdict.selection.pcs == pytest.approx(plain.verdict.selection.pcs)


def test_the_page_says_where_the_arms_branched_and_counts_the_prefix_once(branched, plain):
    _, data = branched
    assert data.branched_at == 40 and data.verdict.branched_at == 40
    said = " ".join(data.verdict.notes)
    assert "The arms branched at step 40" in said and "about G from step 40 on" in said
    assert "branched at step 40" in data.recommendation  # the paragraph summary.json and `run` print
    assert not any("branched" in n for n in plain.verdict.notes) and plain.shared_prefix is None
    sp = data.shared_prefix
    assert sp["prefixes"] == 3 and sp["seeds"] == [0, 1, 2] and sp["branch_step"] == 40
    assert sp["words"].startswith("shared prefix: ") and "over 3 seeds, counted once" in sp["words"]
    out = summary_dict(data)
    assert out["branched_at"] == 40 and out["shared_prefix"] == sp and out["verdict"]["branched_at"] == 40


def _ended(number: int, seed: int, hours: float) -> FrozenTrial:
    start = dt.datetime(2026, 1, 1)
    return FrozenTrial(number=number, state=TrialState.COMPLETE, value=0.5, datetime_start=start,
                       datetime_complete=start + dt.timedelta(hours=hours), params={"seed": seed},
                       distributions={"seed": IntDistribution(0, 10)},
                       user_attrs={record.ROLE: PREFIX_ROLE, record.SEED: seed}, system_attrs={},
                       intermediate_values={}, trial_id=number)


def test_the_shared_prefix_line_is_its_gpu_hours_once_per_seed():
    # two seeds' prefixes, one retried after an interruption: every attempt's wall time x 8 GPUs, once
    sp = shared_prefix([_ended(0, 0, 0.25), _ended(1, 1, 0.25), _ended(2, 1, 0.5)], 8, 335)
    assert sp["gpu_hours"] == pytest.approx(8.0) and sp["seeds"] == [0, 1] and sp["prefixes"] == 3
    assert sp["words"].startswith("shared prefix: 8.0 GPU-h over 2 seeds, counted once (the baseline trained to step 335")
    assert "from step 335 on" in sp["words"]
    cpu = shared_prefix([_ended(0, 0, 0.25)], 0, 5)
    assert cpu["gpu_hours"] is None and cpu["words"].startswith("shared prefix: 15 min of wall time over 1 seed")
    assert shared_prefix([], 8, None) is None
