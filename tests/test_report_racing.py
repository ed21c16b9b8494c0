"""The report's racing section: dropped arms by their labels, the round, the seeds and the reason."""

from __future__ import annotations

from optuna.trial import create_trial

from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.html import racing_view, render_html
from grpo_ablate.records.trial_record import StudyAttrs
from grpo_ablate.study.search.early_rank import race_decides_at
from grpo_ablate.core.vocab import Arm, Cell


def _data(race: dict | None, arms: tuple[Arm, ...] = ()):
    """The report of a raced study whose trials ran `arms` (the page names an arm by its trial's knobs)."""
    attrs = StudyAttrs(config={"study": {"racing": {"confidence": 0.95, "first_round_seeds": 2}}}, racing=race)
    trials = [create_trial(value=0.0, user_attrs=Cell(a, 0, "grid").as_attrs()) for a in arms]
    return build_report_data("race", attrs, trials)


def test_racing_section_names_dropped_arms_and_the_decision():
    worse, best = Arm(8, 32, 1.0), Arm(2, 32, 1.0)
    race = {"round": 2, "decided": True, "leader": best.key, "live": [best.key],
            "dropped": [{"arm": worse.key, "round": 1, "seeds": [0, 1], "p_value": 0.012,
                         "reason": f"worse than {best.key} by -0.2 on 2 shared seed(s) (paired one-sided t-test p=0.012 < 0.05)"}]}
    view = racing_view(_data(race, (worse, best)))
    assert view is not None and view["confidence"] == 0.95 and view["first_round_seeds"] == 2
    assert view["state"] == f"was decided after round 2: {best.label} leads"
    assert view["rows"] == [{"arm": worse.label, "round": 1, "seeds": "0, 1", "why": race["dropped"][0]["reason"]}]
    html = render_html(_data(race, (worse, best)), figures=[])
    assert "Arms dropped by racing" in html and worse.label in html
    said = render_html(_data({**race, "decides_at": race_decides_at()}, (worse, best)), figures=[])  # the page says which point
    assert "The race decides on the final evaluation point only" in said and "final evaluation point" not in html


def test_no_racing_no_section_and_undecided_race_lists_the_contenders():
    assert racing_view(_data(None)) is None
    assert "Arms dropped by racing" not in render_html(_data(None), figures=[])
    a, b = Arm(2, 32, 1.0), Arm(4, 32, 1.0)
    view = racing_view(_data({"round": 3, "decided": False, "live": [a.key, b.key], "dropped": []}, (a, b)))
    assert view["state"] == f"used every seed; still in contention: {a.label}, {b.label}" and view["rows"] == []
