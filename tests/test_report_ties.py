"""Ties are never certainty, anywhere on the page: the effects table, the answer and summary.json all
read stats/model.py's one model (issue 40's example: two seeds whose differences repeat exactly);
and after a race that stopped early every call is held to the level its last look spent.

    pytest tests/test_report_ties.py
"""

from __future__ import annotations

import json

import pytest

from _report_fixtures import SeedRun, load_custom, make_custom_study
from grpo_ablate.report.arms import DELTA_METHOD, baseline_deltas
from grpo_ablate.report.html import render_html
from grpo_ablate.report.summary import summary_dict
from grpo_ablate.report.verdict import decide
from grpo_ablate.stats.calls import calls
from grpo_ablate.stats.seeds import TOO_FEW
from grpo_ablate.records.race_record import calls_level
from grpo_ablate.core.vocab import Arm

BASE, G4 = Arm(8, 32, 1.0), Arm(4, 32, 1.0)
METRIC = "eval_final_reward"
TIE = {"base": {0: .5, 1: .6}, "a": {0: .5625, 1: .6625}}  # the example: differences repeat, sd 0
TIE3 = {"base": {0: .5, 1: .6, 2: .7}, "a": {0: .5625, 1: .6625, 2: .7625}}  # three tied pairs


def study(values: dict[str, dict[int, float]]) -> dict[str, tuple[Arm, dict[int, SeedRun]]]:
    """The values as held-out curves ending there (the report derives eval_final_reward from the last point)."""
    return {"baseline": (BASE, {s: SeedRun(eval_curve=(0.2, v)) for s, v in values["base"].items()}),
            "num_generations=4": (G4, {s: SeedRun(eval_curve=(0.2, v)) for s, v in values["a"].items()})}


def trues(obj: object, key: str) -> list[object]:
    """Every value of `key` anywhere in a JSON document that is exactly True."""
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == key and v is True] + [x for v in obj.values() for x in trues(v, key)]
    if isinstance(obj, list):
        return [x for v in obj for x in trues(v, key)]
    return []


def test_the_tie_example_is_no_call_and_three_tied_pairs_are_not_certainty():
    two = calls(TIE, "base", min_effect=0.05)["a"]
    assert two.call == "undecided" and two.p_adjusted is None and two.difference is None  # 2 pairs: no test
    three = calls(TIE3, "base", min_effect=0.05)["a"]
    d = three.difference
    assert d is not None and d.se > 0 and 0 < d.interval()[0] < d.mean < d.interval()[1]
    assert three.p_adjusted is not None and three.p_adjusted > 1e-3  # the floored spread: p not 0


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    storage, _ = make_custom_study(tmp_path_factory.mktemp("tie"), study(TIE), evaluation={"num_prompts": 4})
    return load_custom(storage)


@pytest.fixture(scope="module")
def tied3(tmp_path_factory):
    storage, _ = make_custom_study(tmp_path_factory.mktemp("tie3"), study(TIE3), evaluation={"num_prompts": 4})
    return load_custom(storage)


def test_two_tied_seeds_are_not_better_anywhere_on_the_page(tied):
    d = tied.deltas["num_generations=4"][METRIC]
    assert d.diff.delta == pytest.approx(0.0625) and d.better is True  # the mean moved the good way ...
    assert d.diff.clear is None and d.call is None and d.p_adjusted is None  # ... but two seeds test nothing
    assert d.comparison is not None and d.comparison.kind == TOO_FEW and d.diff.ci95 is None
    assert "fewer than the 3 a test needs: no call" in d.words and "better," not in d.words
    v = tied.verdict
    arm = next(a for a in v.arms if a.name == "num_generations=4")
    assert not arm.better and arm.call != "better" and arm.comparison is not None and arm.comparison.p_value is None
    assert v.kind != "winner" and "clearly better" not in v.words
    summary = json.loads(json.dumps(summary_dict(tied), default=str))
    assert summary["deltas_vs_baseline"]["num_generations=4"][METRIC]["better"] is None
    assert summary["deltas_vs_baseline"]["num_generations=4"][METRIC]["method"] == DELTA_METHOD
    assert not trues(summary, "better") and not trues(summary, "clearly_better") and not trues(summary, "clear")
    page = render_html(tied, [])
    assert "better clear" not in page and "clearly better" not in page


def test_three_tied_pairs_keep_the_floored_spread_on_the_page(tied3):
    d = tied3.deltas["num_generations=4"][METRIC]
    assert d.comparison is not None and d.comparison.kind == "model paired"
    lo, hi = d.diff.ci95
    assert hi - lo > 0.01 and d.p_adjusted is not None and d.p_adjusted > 1e-3  # a tie, not a certainty
    v = tied3.verdict
    arm = next(a for a in v.arms if a.name == "num_generations=4")
    # the table's call is the answer's: one model, one Holm family on the answer's metric
    assert arm.p_adjusted == pytest.approx(d.p_adjusted) and (arm.call == "better") == bool(d.diff.clear)
    assert arm.comparison.ci95 == pytest.approx(d.diff.ci95)


def test_a_race_that_stopped_early_holds_every_call_to_its_last_looks_level(tmp_path):
    assert calls_level(None) == 0.05 and calls_level({"design": "anytime", "path": [{"level": 0.001}]}) == 0.05
    race = {"design": "group_sequential", "path": [{"round": 1, "level": 0.0002}]}
    assert calls_level(race) == 0.0002  # stopped at an early look: its spent level
    assert calls_level({**race, "path": [*race["path"], {"round": 2, "level": 0.05}]}) == 0.05  # ran to the end
    clear = {"base": {0: 0.30, 1: 0.50, 2: 0.70}, "a": {0: 0.36, 1: 0.57, 2: 0.75}}  # Holm-adjusted p 0.036
    data = load_custom(make_custom_study(tmp_path, study(clear), evaluation={"num_prompts": 4})[0])
    assert data.verdict.kind == "winner"  # at 5%
    args = (data.arms, data.records, data.objectives, data.metrics, data.has_eval)
    strict = decide(*args, level=calls_level(race))
    assert strict.kind != "winner" and not any(a.better for a in strict.arms) and "0.0002" in strict.calls_method
    deltas = baseline_deltas(data.arms, data.metrics, calls_level(race))
    assert deltas["num_generations=4"][METRIC].diff.clear is False  # the effects table holds the same level
