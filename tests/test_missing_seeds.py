"""The answer says when a seed is missing (issue 52 item 1): a branching study whose seed lost its prefix for good
ran none of that seed's arms, and its answer rests on the other seeds; it says so, first thing after the answer."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from grpo_ablate.report.data import missing_seeds
from grpo_ablate.report.publish import answer_lines
from grpo_ablate.records.trial_record import CELL, OUTCOME, REASON, ROLE
from grpo_ablate.core.vocab import PREFIX_ROLE, Arm, Cell


def _prefix(number: int, seed: int, state: TrialState, outcome: str | None = None, reason: str = ""):
    attrs = {ROLE: PREFIX_ROLE, CELL: Cell(Arm(4, 8, 1.0), seed, PREFIX_ROLE).key}
    if outcome:
        attrs[OUTCOME] = outcome
    if reason:
        attrs[REASON] = reason
    trial = optuna.trial.create_trial(state=state, user_attrs=attrs, values=[0.0] if state == TrialState.COMPLETE else None)
    trial.number = number
    return trial


def test_a_seed_whose_prefix_failed_for_good_is_missing_and_the_answer_says_so():
    prefixes = [_prefix(0, 0, TrialState.COMPLETE), _prefix(1, 1, TrialState.FAIL, "failed", "CUDA out of memory"),
                _prefix(2, 2, TrialState.FAIL, "interrupted", "lost"), _prefix(3, 2, TrialState.WAITING)]
    missing = missing_seeds(prefixes)
    assert missing == [{"seed": 1, "trial": 1, "outcome": "failed", "reason": "CUDA out of memory"}]  # seed 2 retries
    summary = {"verdict": {"lines": ["Use G=4."]}, "shared_prefix": {"seeds": [0, 1, 2], "missing_seeds": missing}}
    lines = answer_lines(summary)
    assert lines[:3] == ["Answer:", "  Use G=4.", "  Seed 1 is missing: its prefix (trial 1) failed (CUDA out of "
                         "memory), so none of its arms ran; this answer rests on seed(s) 0, 2 only."]
