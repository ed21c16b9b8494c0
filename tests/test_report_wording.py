"""The answer's words from hand-built records (report/wording.py reads only `report.verdict.Verdict`).

    pytest tests/test_report_wording.py

No study, no storage: each test builds the record the statistics would return and checks the
three lines (what to use and how sure; what is as good and the cheapest; what is worse) and that
each detail is said once.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from grpo_ablate.report.verdict import ArmVerdict, Stuck, Verdict
from grpo_ablate.report.wording import LINES, answer_lines, bounded_interval, details
from grpo_ablate.stats.seeds import Comparison, MetricStat
from grpo_ablate.stats.selection import Selection
from grpo_ablate.core.vocab import Arm

BASE, G2, COLD = Arm(8, 32, 1.0), Arm(2, 32, 1.0), Arm(8, 32, 0.3)
NAMES = {"baseline": BASE.label, "g2": G2.label, "cold": COLD.label}


def selection(rec: str, pcs: float | None, eps_best: tuple[str, ...], excluded: dict[str, str] | None = None,
              costs: dict[str, float] | None = None, seeds: int = 4, p: dict[str, float] | None = None,
              kept: bool = False, contender: str | None = None) -> Selection:
    arms = ("baseline", "g2", "cold")
    probs = ({a: (pcs or 0.0) if a == rec else 0.1 for a in arms} | (p or {})) if pcs is not None else {}
    return Selection(rec, pcs, probs, eps_best, excluded or {}, {a: 0.5 for a in arms}, 0.05, 0.05,
                     min(eps_best, key=lambda a: (costs or {}).get(a, 0.0)) if costs else None,
                     costs or {}, {a: seeds for a in arms}, 0.95, rec, kept, contender)


def arm(name: str, config: Arm, delta: float, call: str, p_adj: float) -> ArmVerdict:
    c = Comparison("paired", delta, (delta - 0.05, delta + 0.05), 0.01, 4, 0.03)
    return ArmVerdict(name, config, 0.5 + delta, 4, c, call == "better", call == "worse", 1000.0, call, None, p_adj)


def record(**kw) -> Verdict:
    base = dict(kind="no_clear_winner", metric="eval_final_reward", direction="maximize", recommended=G2,
                recommended_name="g2", reason="most_likely_best", names=NAMES, min_effect=0.05,
                cost_unit="generated tokens per trial", baseline=BASE, baseline_name="baseline", baseline_mean=0.6,
                calls_method="Holm", recommended_stat=MetricStat(4, 0.97, 0.03, (0.92, 1.02), (0.95, 1.0, 0.93, 1.0)),
                arms=(arm("g2", G2, 0.057, "undecided", 0.2), arm("cold", COLD, -0.387, "worse", 0.001)),
                selection=selection("g2", 0.98, ("g2", "baseline"), {"cold": "g2"},
                                    costs={"g2": 1000.0, "baseline": 1600.0, "cold": 1600.0}))
    base.update(kw)
    return Verdict(**base)  # type: ignore[arg-type]


def test_three_lines_say_what_to_use_what_is_as_good_and_cheapest_and_what_is_worse():
    lines = answer_lines(record())
    assert len(lines) == LINES
    use, good, worse = lines
    assert use == ("Use num_generations=2, generation_batch_size=32, temperature=1: probability 0.98 that it is "
                   "within 0.05 of the best held-out reward (a model posterior, not a frequency; 4 seeds per "
                   "configuration).")
    assert good.startswith("As good (not excluded from being within 0.05 of the best, simultaneous 95%): "
                           f"{BASE.label}.") and "The recommended one is also the cheapest of these (1,000" in good
    assert worse == f"Worse (held-out reward): {COLD.label} (-0.387 vs the baseline, clearly worse)."


def test_a_cheaper_as_good_arm_is_never_named_the_cheapest_when_another_is_recommended():
    """Issue 49: the three lines never say "use A" and "the cheapest as good: B" with A != B. A cheaper arm that is
    as good but not confidently within min_effect is named with its probability, not as the answer."""
    v = record(selection=selection("g2", 0.97, ("g2", "baseline"), costs={"g2": 2000.0, "baseline": 1600.0},
                                   p={"baseline": 0.62}))
    use, good, _ = answer_lines(v)
    assert use.startswith("Use num_generations=2") and "The cheapest of these" not in good
    assert good.endswith(f"Cheaper, but not within 0.05 of the best with probability 0.95: {BASE.label} (1,600 "
                         "generated tokens per trial; probability 0.62); the recommended one costs 2,000 generated "
                         "tokens per trial.")
    v = record(selection=selection("g2", 0.97, ("g2", "baseline"), costs={"g2": 1600.0, "baseline": 1600.0}))
    assert answer_lines(v)[1].endswith("They cost the same (1,600 generated tokens per trial).")


def test_an_arm_with_fewer_than_three_seeds_is_named_in_the_headline_not_dropped_silently():
    sel = selection("g2", 0.99, ("g2", "baseline", "cold"), costs={"g2": 1.0, "baseline": 2.0})
    sel = replace(sel, p_within={"g2": 0.99, "baseline": 0.3}, seeds={"g2": 4, "baseline": 4, "cold": 2})
    use = answer_lines(record(selection=sel))[0]
    assert f"left out of it, with fewer than 3 seeds (nothing tested): {COLD.label} (2 seeds)" in use


def test_the_design_guarantee_is_said_as_a_frequency_beside_the_posterior():
    from grpo_ablate.report.verdict_record import Guarantee

    fixed = details(record(guarantee=Guarantee(0.71, "fixed", 3, 4)))
    assert any("The design's guarantee (a frequency): had one configuration led every other by 0.05 or more, a study "
               "of this design (3 configurations x 4 seeds" in d and "probability 0.71 (Bechhofer" in d for d in fixed)
    race = details(record(guarantee=Guarantee(0.9, "elimination", 3, 12, True, ("g2", "baseline"))))
    assert any("at least 0.90 whenever it leads every other by 0.05" in d and "are each within 0.05 of every other"
               in d for d in race)


def test_no_arm_confident_keeps_the_baseline_and_names_the_closest_contender():
    v = record(recommended=BASE, recommended_name="baseline", reason="baseline_kept",
               selection=selection("baseline", 0.41, ("g2", "baseline"), p={"g2": 0.80}, kept=True, contender="g2"))
    use = answer_lines(v)[0]
    assert use.startswith("Keep the baseline, num_generations=8") and "no configuration reaches probability 0.95" in use
    assert f"the closest, {G2.label}, has probability 0.80" in use and "not a frequency" in use


def test_alone_in_the_set_and_nothing_worse_are_said_plainly():
    v = record(selection=selection("g2", 0.99, ("g2",), costs={"g2": 1.0}), arms=())
    assert answer_lines(v)[1].startswith("No other configuration is as good")
    v = record(selection=selection("g2", 0.6, ("g2", "baseline", "cold")), arms=(arm("g2", G2, 0.01, "undecided", 1.0),))
    assert answer_lines(v)[2].startswith("Nothing is shown worse")


def test_a_winner_and_keeping_the_baseline_lead_differently():
    assert answer_lines(record(kind="winner"))[0].endswith("; it is clearly better than the baseline.")
    keep = record(recommended=BASE, recommended_name="baseline", reason="baseline_cheapest_confident",
                  selection=selection("baseline", 0.96, ("baseline", "g2")))
    assert answer_lines(keep)[0].startswith("Keep the baseline, num_generations=8")


def test_details_follow_once_and_never_repeat_the_lines():
    v = record(detectable=0.1, detectable_relative=0.17, seeds_for=(0.057, 12), detect_n=4, closest="g2",
               comparison=Comparison("paired", 0.057, (0.007, 0.107), 0.04, 4, 0.03))
    lines, more = answer_lines(v), details(v)
    text = "\n".join((*lines, *more))
    assert len(set(more)) == len(more)
    for d in more:
        assert text.count(d) == 1 and not any(d in line for line in lines)
    assert any(d.startswith("Against the baseline (") and "Holm" in d for d in more)  # the method as the record names it
    assert any("model posterior, not a frequency" in d for d in more)
    assert any("about 12 seeds would be needed" in d for d in more)
    assert any("adjusted p = 0.0010" in d or "adjusted p = 0.001" in d for d in more)


def test_an_interval_of_a_bounded_metric_stays_inside_or_says_why_not():
    assert bounded_interval((0.92, 1.02), 0.0, 1.0) == "0.920 to 1.00"
    assert bounded_interval((0.92, 1.02), None, None, (0.95, 1.0)) == \
        "0.920 to 1.02 (not cut to [0, 1]: the reward functions declare no range)"
    assert bounded_interval((2.0, 3.0), None, None, (2.5,)) == "2.00 to 3.00"  # not a [0, 1] quantity: nothing to say
    mean = next(d for d in details(record()) if d.startswith(f"{G2.label}: held-out reward 0.970"))
    assert "not cut to [0, 1]" in mean
    assert "not cut" not in next(d for d in details(record(metric_low=0.0, metric_high=1.0)) if "0.970" in d)


def test_single_seed_and_cannot_rank_and_no_data_have_their_own_lines():
    untested = record(kind="untested", reason="best_mean_untested", selection=selection("g2", None, ("g2", "baseline")))
    lines = answer_lines(untested)
    assert lines[0].startswith("Try num_generations=2")
    two = record(kind="untested", reason="best_mean_untested",
                 selection=selection("g2", None, ("g2", "baseline"), seeds=2))
    assert "from 2 seeds per configuration, fewer than the 3 a test needs" in answer_lines(two)[0]
    assert "nothing can be excluded" in lines[1] and "add seeds (study.seeds)" in lines[2]
    stuck = record(kind="cannot_rank", selection=None, stuck=Stuck(True, True, "eval_gain",
                                                                      gains=(("baseline", MetricStat(2, 0.0, 0.0, (0.0, 0.0), (0.0, 0.0))),),
                                                                      never_solved=16, always_solved=0, num_prompts=16))
    lines = answer_lines(stuck)
    assert len(lines) == LINES and lines[0].startswith("This study cannot rank G") and lines[2].startswith("What to do")
    assert any("advise found 16 of 16 prompts never solved" in d for d in details(stuck))
    assert len(answer_lines(replace(record(), kind="no_data"))) == 1


@pytest.mark.parametrize("kind", ["winner", "no_clear_winner", "no_baseline"])
def test_summary_json_carries_the_lines_and_the_record(kind):
    v = record(kind=kind)
    v = replace(v, lines=answer_lines(v), details=details(v))
    d = v.as_dict()
    assert d["lines"] == list(v.lines) and d["probability"] == 0.98 and d["as_good"] == ["g2", "baseline"]
    assert d["worse"] == ["cold"] and d["words"].startswith(v.lines[0])
