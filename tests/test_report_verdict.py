"""The answer states its certainty: hand-built studies with known statistics (tests/_report_fixtures.py).

    pytest tests/test_report_verdict.py
"""

from __future__ import annotations

import json
import math

import pytest

from _report_fixtures import XSS, SeedRun, load_custom, make_custom_study, make_study
from grpo_ablate.report import write_outputs
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.findings import consistent
from grpo_ablate.report.html import render_html, target_cell
from grpo_ablate.report.records import load_trials
from grpo_ablate.stats.seeds import TOO_FEW, compare_to_baseline, detectable_difference, difference, seeds_needed, stat
from grpo_ablate.report.summary import summary_dict
from grpo_ablate.core.vocab import METRICS, Arm

BASE, G4, G2 = Arm(8, 32, 1.0), Arm(4, 32, 1.0), Arm(2, 32, 1.0)


def curve(final: float, start: float = 0.2, points: int = 5) -> tuple[float, ...]:
    return tuple(start + (final - start) * i / (points - 1) for i in range(points))


def runs(finals: dict[int, float], **kw) -> dict[int, SeedRun]:
    return {s: SeedRun(eval_curve=curve(f), **kw) for s, f in finals.items()}


# seed effects dominate the arms' spread; the per-seed differences are small and mixed
INCONCLUSIVE = {
    "baseline": (BASE, runs({0: 0.50, 1: 0.60, 2: 0.40})),
    "num_generations=4": (G4, runs({0: 0.52, 1: 0.58, 2: 0.45})),
    "num_generations=2": (G2, runs({0: 0.47, 1: 0.63, 2: 0.41})),
}
# the same seed effects, but G=4 gains 0.05-0.07 on every seed: only the paired test sees it
CLEAR = {
    "baseline": (BASE, runs({0: 0.30, 1: 0.50, 2: 0.70})),
    "num_generations=4": (G4, runs({0: 0.36, 1: 0.57, 2: 0.75})),
}


@pytest.fixture(scope="module")
def inconclusive(tmp_path_factory):
    storage, _ = make_custom_study(tmp_path_factory.mktemp("inc"), INCONCLUSIVE, evaluation={"num_prompts": 4})
    return load_custom(storage)


@pytest.fixture(scope="module")
def clear(tmp_path_factory):
    storage, _ = make_custom_study(tmp_path_factory.mktemp("clear"), CLEAR, evaluation={"num_prompts": 4})
    return load_custom(storage)


# ---------------------------------------------------------------- the statistics


def test_paired_comparison_on_shared_seeds_is_tighter_than_welch():
    base, arm = {0: 0.30, 1: 0.50, 2: 0.70}, {0: 0.36, 1: 0.57, 2: 0.75}
    c = compare_to_baseline(base, arm)
    assert c is not None and c.kind == "paired" and c.n == 3
    assert c.delta == pytest.approx(0.06) and c.sd == pytest.approx(0.01)
    half = 4.302653 * 0.01 / math.sqrt(3)  # t(0.975, df 2) x sd / sqrt(n)
    assert c.ci95 == pytest.approx((0.06 - half, 0.06 + half), abs=1e-6)
    assert c.clear is True and c.p_value < 0.01
    welch = difference(stat(base.values()), stat(arm.values()))
    assert welch is not None and welch.clear is False  # unpaired, the seeds' spread hides it
    # no shared seeds: Welch, and it says so
    w = compare_to_baseline({0: 1.0, 1: 2.0, 2: 3.0}, {3: 4.0, 4: 5.0, 5: 6.0})
    assert w is not None and w.kind == "welch" and "Welch" in w.words
    single = compare_to_baseline({0: 1.0}, {0: 2.0})
    assert single is not None and single.kind == "single seed" and single.ci95 is None and single.clear is None


def test_detectable_difference_and_seeds_needed_agree():
    mde = detectable_difference(0.1, 3)
    assert mde is not None and 0.3 < mde < 0.35  # df 2: t crit 4.30 plus the power margin
    assert seeds_needed(mde, 0.1) == 3  # the difference it can detect needs the seeds it has
    assert seeds_needed(0.1, 0.1) == 10  # a one-SD difference: about ten pairs
    assert detectable_difference(0.1, 10) < detectable_difference(0.1, 3)
    assert detectable_difference(0.0, 3) is None and seeds_needed(0.0, 0.1) is None


def test_difference_intervals_stay_inside_the_range_of_the_quantity():
    c = compare_to_baseline({0: 0.0, 1: 1.0, 2: 0.0}, {0: 1.0, 1: 0.0, 2: 1.0}, low=0.0, high=1.0)
    assert c is not None and c.ci95 is not None and -1.0 <= c.ci95[0] and c.ci95[1] <= 1.0


# ---------------------------------------------------------------- the answer


def test_inconclusive_study_says_no_clear_winner_with_what_it_could_detect(inconclusive):
    v = inconclusive.verdict
    assert v.kind == "no_clear_winner" and v.metric == "eval_final_reward"
    # the answer leads: the configuration most likely within min_effect of the best, how likely, the set
    # no configuration reaches the confidence (0.95): the baseline is kept, the closest contender named
    assert len(v.lines) == 3
    assert v.lines[0].startswith("Keep the baseline, num_generations=8, generation_batch_size=32, temperature=1: no "
                                 "configuration reaches probability 0.95 of being within 0.05 of the best held-out reward")
    assert "the closest, G=4, batch 32, T=1, has probability 0.9" in v.lines[0] and "not a frequency" in v.lines[0]
    assert v.lines[1].startswith("As good (not excluded from being within 0.05 of the best, simultaneous 95%): ")
    assert v.lines[2].startswith("Nothing is shown worse")
    sel = v.selection
    assert sel is not None and sel.kept and sel.recommended == "baseline" and sel.contender == "num_generations=4"
    assert sel.leader == "num_generations=4" and 0.9 < sel.pcs < 0.95
    assert set(v.selection.eps_best) == set(INCONCLUSIVE)  # three seeds exclude nobody
    assert "No configuration is clearly better than the baseline" in v.words and "(not detected)" in v.words
    assert v.detectable is not None and v.detectable > 0
    assert "could only detect a difference of about" in v.words and "80% power" in v.words
    assert v.seeds_for is not None and v.seeds_for[1] > 3 and "seeds would be needed" in v.words
    assert v.comparison is not None and v.comparison.kind == "model paired" and "paired t test" in v.words
    # every arm generated the same tokens: the page says they cost the same
    assert v.recommended == BASE and v.reason == "baseline_kept" and "They cost the same" in v.words
    assert inconclusive.recommendation == v.words


def test_a_cheaper_arm_that_is_not_confidently_as_good_is_named_but_not_recommended(tmp_path):
    arms = dict(INCONCLUSIVE)
    arms["num_generations=2"] = (G2, runs({0: 0.47, 1: 0.63, 2: 0.41}, tokens_per_completion=3.0))
    storage, _ = make_custom_study(tmp_path, arms, evaluation={})
    v = load_custom(storage).verdict
    assert v.kind == "no_clear_winner" and v.selection.cheapest == "num_generations=2" and v.recommended == BASE
    assert "The cheapest of these" not in v.words
    assert ("Cheaper, but not within 0.05 of the best with probability 0.95: G=2, batch 32, T=1 (768 generated "
            "tokens per trial") in v.lines[1]


def test_two_equivalent_arms_recommend_the_cheaper_one(tmp_path):
    """Issue 49's single recommendation: G=2 and the baseline both reach the confidence (the third arm is far
    behind), G=2 is cheaper per trial: the answer names G=2, and no line names another configuration as the
    cheapest as good."""
    arms = {"baseline": (BASE, runs({s: 0.80 + 0.01 * (s % 3) for s in range(6)})),
            "num_generations=2": (G2, runs({s: 0.80 + 0.01 * ((s + 1) % 3) for s in range(6)},
                                           tokens_per_completion=3.0)),
            "num_generations=4": (G4, runs({s: 0.40 + 0.01 * (s % 2) for s in range(6)}))}
    storage, _ = make_custom_study(tmp_path, arms, evaluation={})
    v = load_custom(storage).verdict
    sel = v.selection
    assert set(sel.confident) == {"baseline", "num_generations=2"} and not sel.kept
    assert v.recommended == G2 and v.reason == "cheapest_confident"
    assert v.lines[0].startswith("Use num_generations=2") and "the cheapest of the 2 configurations that reach" in v.lines[0]
    assert "The recommended one is also the cheapest of these" in v.lines[1]


def test_a_baseline_the_page_excludes_is_not_kept_when_no_arm_reaches_the_confidence(tmp_path):
    """G=2 and G=4 tie near 0.8 with seed noise (neither reaches 0.95 of being within 0.05 of the best) and the
    baseline sits 0.3 below both on every seed: the page excludes it from the as-good set, so "keep the baseline"
    would contradict it. The answer names the most probable configuration instead, says why, and lists the
    baseline as worse; nothing on the page recommends it."""
    arms = {"baseline": (BASE, runs({s: 0.50 + 0.01 * (s % 3) for s in range(6)})),
            "num_generations=4": (G4, runs(dict(enumerate((0.80, 0.88, 0.72, 0.84, 0.76, 0.80))))),
            "num_generations=2": (G2, runs(dict(enumerate((0.86, 0.74, 0.81, 0.73, 0.87, 0.79)))))}
    storage, _ = make_custom_study(tmp_path, arms, evaluation={})
    v = load_custom(storage).verdict
    sel = v.selection
    assert not sel.confident and not sel.kept and not v.kept and "baseline" in sel.excluded
    assert sel.reference_excluded == "baseline" and v.reason == "baseline_excluded"
    assert v.recommended != BASE and v.recommended_name == max(sel.p_within, key=sel.p_within.get)
    assert v.lines[0].startswith(f"Use {v.recommended_name}") and "is excluded from being within 0.05" in v.lines[0]
    assert "so it is not kept; no configuration reaches probability 0.95" in v.lines[0]
    assert "Keep the baseline" not in v.words and v.lines[2].startswith("Worse") and "G=8" in v.lines[2]
    assert summary_dict(load_custom(storage))["verdict"]["reason"] == "baseline_excluded"


def test_clear_study_names_the_winner_and_the_paired_comparison(clear):
    v = clear.verdict
    assert v.kind == "winner" and v.recommended == G4 and v.reason == "cheapest_confident"
    assert v.lines[0].startswith("Use num_generations=4, generation_batch_size=32, temperature=1: probability")
    assert v.lines[0].endswith("; it is clearly better than the baseline.")
    assert "paired t test over 3 shared seeds" in v.words and "95% interval" in v.words
    # p = 0.036 alone; 0.046 in the page's family (the answer's calls hold 80% of the 5% while the table has
    # other metrics to test)
    assert "p = 0.036" in v.words and "adjusted p = 0.046" in v.words
    assert "Holm" in v.calls_method and v.calls_method.startswith("t tests of one model")
    assert v.comparison.kind == "model paired" and v.comparison.p_value < 0.05
    d = clear.deltas["num_generations=4"]["eval_final_reward"]
    # the effects table reads the answer's model and family: the same interval, the same call
    assert d.comparison.kind == "model paired" and d.diff.clear is True and d.better is True
    assert d.diff.ci95 == pytest.approx(v.comparison.ci95) and d.p_adjusted == pytest.approx(0.046, abs=5e-4)


def test_the_answer_rests_on_held_out_reward_even_when_the_objective_is_training_reward(tmp_path):
    arms = {k: (a, {s: SeedRun(eval_curve=r.eval_curve, metrics={"reward_per_hour": 100.0 + s})
                    for s, r in rs.items()}) for k, (a, rs) in CLEAR.items()}
    storage, _ = make_custom_study(tmp_path, arms, evaluation={}, objectives=(("reward_per_hour", "maximize"),))
    data = load_custom(storage)
    assert data.has_eval and data.verdict.metric == "eval_final_reward" and data.verdict.recommended == G4
    assert any("held-out prompts" in n for n in data.verdict.notes)


def test_metrics_from_the_files_equal_those_the_trial_side_records(tmp_path):
    a = load_custom(make_custom_study(tmp_path / "a", CLEAR, evaluation={})[0])
    b = load_custom(make_custom_study(tmp_path / "b", CLEAR, evaluation={}, write_eval_attrs=True)[0])
    for x, y in zip(a.arms, b.arms):
        for m in ("eval_start_reward", "eval_final_reward", "eval_gain", "eval_auc", "eval_gain_per_million_tokens"):
            assert x.metrics[m].mean == pytest.approx(y.metrics[m].mean)
    base = a.arms[0].metrics
    assert base["eval_final_reward"].mean == pytest.approx(0.5) and base["eval_gain"].mean == pytest.approx(0.3)
    assert base["eval_auc"].mean == pytest.approx((0.2 + 0.5) / 2)  # a straight line: its mean height
    assert base["eval_gain_per_million_tokens"].mean == pytest.approx(0.3 / (256 * 4 / 1e6))


# ---------------------------------------------------------------- censoring


def test_an_unreachable_target_is_not_reached_never_averaged(tmp_path):
    arms = {
        "baseline": (BASE, runs({0: 0.50, 1: 0.55, 2: 0.60})),  # never reaches 0.9
        "num_generations=4": (G4, {0: SeedRun(eval_curve=(0.2, 0.5, 0.92, 0.95, 0.95)),
                                   1: SeedRun(eval_curve=(0.2, 0.6, 0.7, 0.91, 0.93)),
                                   2: SeedRun(eval_curve=(0.2, 0.4, 0.5, 0.6, 0.7))}),  # seed 2 never does
    }
    storage, out = make_custom_study(tmp_path, arms, evaluation={"target": 0.9})
    data = load_custom(storage)
    assert data.target == 0.9 and "0.9" in data.target_words
    base, g4 = data.arms
    t = base.targets["completions_to_target"]
    assert (t.n, t.reached, t.median_is_bound) == (3, 0, True)
    assert target_cell(t) == "not reached (0/3; budget 256)"
    t4 = g4.targets["completions_to_target"]
    assert (t4.reached, t4.median, t4.median_is_bound) == (2, 192.0, False)  # 128, 192 and a censored 256
    assert target_cell(t4) == "2/3 reached, median 192"
    assert "completions_to_target" not in g4.metrics  # never a mean over seeds
    html = render_html(data, [])
    assert html.count("not reached") >= 4  # the arm's cell and each censored trial
    paths = write_outputs(data, out / "report.html")
    summary = json.loads(paths["summary_json"].read_text())
    arm = next(a for a in summary["arms"] if a["key"] == G4.key)
    assert arm["targets"]["completions_to_target"]["reached"] == 2
    import pandas as pd

    trials = pd.read_csv(paths["trials_csv"])
    censored = trials[trials["target_reached"] == False]  # noqa: E712
    assert len(censored) == 4 and set(censored["completions_to_target"]) == {256}


def test_the_default_target_is_half_the_baseline_gain(inconclusive):
    assert inconclusive.target == pytest.approx(0.2 + 0.5 * 0.3)  # start 0.2, mean gain 0.3
    assert "0.5 of the baseline's mean held-out gain" in inconclusive.target_words


# ---------------------------------------------------------------- ranges


def test_every_interval_stays_inside_its_metric_range(tmp_path, inconclusive, clear):
    storage, _ = make_study(tmp_path)
    attrs, frozen = load_trials(storage, "fixture-ablation")
    for data in (build_report_data("fixture-ablation", attrs, frozen), inconclusive, clear):
        for a in data.arms:
            for name, s in a.metrics.items():
                m = METRICS.get(name)
                if m is None or s.ci95 is None:
                    continue
                lo, hi = s.ci95
                assert m.low is None or lo >= m.low, (a.name, name, s)
                assert m.high is None or hi <= m.high, (a.name, name, s)


# ---------------------------------------------------------------- timing noise


def test_timing_noise_larger_than_the_arm_differences_points_to_the_token_twin(tmp_path):
    def arm_runs(rph: list[float], rpmt: list[float]) -> dict[int, SeedRun]:
        secs = [10.0, 20.0, 14.0]  # the same work, timed on a busy machine: CV about 33%
        return {s: SeedRun(train_seconds=secs[s], metrics={"reward_per_hour": rph[s], "reward_per_million_tokens": rpmt[s]})
                for s in range(3)}

    arms = {"baseline": (BASE, arm_runs([100.0, 50.0, 70.0], [400.0, 410.0, 405.0])),
            "num_generations=4": (G4, arm_runs([104.0, 52.0, 74.0], [500.0, 520.0, 505.0]))}
    storage, _ = make_custom_study(tmp_path, arms, objectives=(("reward_per_hour", "maximize"),))
    data = load_custom(storage)
    v = data.verdict
    assert not data.has_eval
    assert v.timing is not None and v.timing.exceeds and v.timing.cv > 0.3 and v.timing.arm_spread < 0.1
    note = next(w for w in data.warnings if w.kind == "timing_noise")
    assert "cannot separate" in note.message and "reward_per_million_tokens" in note.message
    assert "eval_gain" not in note.message  # no held-out evaluation here: no held-out twin to point to
    assert v.metric == "reward_per_million_tokens" and v.recommended == G4 and v.kind == "winner"
    assert any("token-based twin" in n for n in v.notes)


def test_steady_timing_keeps_the_time_metric(tmp_path):
    arms = {"baseline": (BASE, {s: SeedRun(train_seconds=10.0, metrics={"reward_per_hour": 100.0 + s}) for s in range(3)}),
            "num_generations=4": (G4, {s: SeedRun(train_seconds=10.0, metrics={"reward_per_hour": 150.0 + s})
                                       for s in range(3)})}
    storage, _ = make_custom_study(tmp_path, arms, objectives=(("reward_per_hour", "maximize"),))
    data = load_custom(storage)
    assert data.verdict.metric == "reward_per_hour"
    assert not any(w.kind == "timing_noise" for w in data.warnings)


# ---------------------------------------------------------------- one recommendation


def test_warnings_never_contradict_the_answer(tmp_path, inconclusive, clear):
    # the baseline repeats itself at T=1 (the old advice: "use a smaller G") but the answer keeps it
    storage, _ = make_custom_study(tmp_path / "dup", INCONCLUSIVE, evaluation={}, distinct={"baseline": 0.3})
    dup = load_custom(storage)
    w = next(f for f in dup.warnings if f.kind == "near_duplicates")
    assert consistent(w, dup.verdict.recommended)
    # G=2 wins and most of its groups have no spread (the old advice: "raise num_generations")
    arms = {"baseline": CLEAR["baseline"], "num_generations=2": (G2, CLEAR["num_generations=4"][1])}
    storage, _ = make_custom_study(tmp_path / "zero", arms, evaluation={}, zero_spread={"num_generations=2": 0.8,
                                                                                      "baseline": 0.7})
    zero = load_custom(storage)
    assert zero.verdict.recommended == G2
    by_arm = {f.arm: f for f in zero.warnings if f.kind == "zero_spread"}
    assert "larger num_generations" not in by_arm[G2].message
    assert "larger num_generations" not in by_arm[BASE].message  # that would point away from G=2
    fixture_storage, _ = make_study(tmp_path / "fixture")
    attrs, frozen = load_trials(fixture_storage, "fixture-ablation")
    fixture = build_report_data("fixture-ablation", attrs, frozen)
    for data in (dup, zero, inconclusive, clear, fixture):
        for f in data.warnings:
            assert consistent(f, data.verdict.recommended), (f.kind, f.message, data.verdict.recommended)


# ---------------------------------------------------------------- what a person and a machine read


def test_summary_carries_the_answer_and_its_statistics(clear, inconclusive):
    v = summary_dict(clear)["verdict"]
    assert v["kind"] == "winner" and v["comparison"] == "model paired" and v["p_value"] < 0.05
    assert v["recommended"]["key"] == G4.key and v["words"] == clear.recommendation
    assert len(v["ci95"]) == 2 and v["metric"] == "eval_final_reward"
    w = summary_dict(inconclusive)["verdict"]
    assert w["kind"] == "no_clear_winner" and w["detectable_difference"] > 0 and w["seeds_needed"]["seeds"] > 3
    json.dumps(summary_dict(inconclusive), allow_nan=False)


def test_held_out_completions_side_by_side(clear):
    assert [s["arm"] for s in clear.eval_samples] == ["baseline", "num_generations=4"]
    first = clear.eval_samples[0]
    assert first["seed"] == 0 and [p["prompt"] for p in first["prompts"]] == ["47+8=", "19+3="]
    start, end = first["prompts"][0]["start"][0], first["prompts"][0]["end"][0]
    assert start == {"text": f"50 {XSS}", "reward": 0.0, "length": 3}
    assert end["reward"] is not None and end["length"] == 3
    html = render_html(clear, [])
    assert 'id="samples"' in html and "What each configuration generates" in html
    assert XSS not in html and "reward 0 · 3 tokens" in html


def test_prompts_to_label_show_the_arm_and_every_reward(clear):
    top = clear.prompts.iloc[0]
    assert top["example_arm"] in {BASE.label, G4.label}
    assert len(top["example_rewards"]) == len(top["example_completions"]) == 8 or \
        len(top["example_rewards"]) == len(top["example_completions"]) == 4
    assert set(top["example_rewards"]) == {0.0, 1.0}
    html = render_html(clear, [])
    assert "ties go to the prompt seen in more groups" in html


def test_held_out_curve_is_drawn_against_tokens(clear):
    from grpo_ablate.report.curves import plot_eval_vs_tokens
    from grpo_ablate.report.plots import all_figures

    (fig,) = all_figures(clear, [plot_eval_vs_tokens])
    assert fig.uri is not None and fig.uri.startswith("data:image/png;base64,")
    assert len(clear.evals) == 6 * 5 and {"trial", "generated_tokens", "reward", "num_generations"} <= set(clear.evals)


def test_power_stays_finite_with_two_seeds():
    """scipy's noncentral t returns NaN far in its lower tail (df 1): the demo's two seeds hit it."""
    mde = detectable_difference(20.0, 2)
    assert mde is not None and 200 < mde < 260
    assert seeds_needed(mde, 20.0) == 2 and seeds_needed(1.0, 20.0) == 1001  # beyond MAX_SEEDS


def test_group_completions_pair_texts_with_rewards_old_and_new():
    from grpo_ablate.report.records import group_completions

    new = {"completions": [{"text": "55", "reward": 1.0}, {"text": "54", "reward": 0.0}]}
    assert group_completions(new) == (["55", "54"], [1.0, 0.0])
    old = {"completions": ["55", "54"], "rewards": [1.0, 0.0]}  # a rewards list as long as the texts
    assert group_completions(old) == (["55", "54"], [1.0, 0.0])
    capped = {"completions": ["55", "54"], "rewards": [1.0, 0.0, 0.0, 1.0]}  # 4 texts kept of 8: no pairing
    assert group_completions(capped) == (["55", "54"], [None, None])
    assert group_completions({}) == ([], [])


def test_single_seed_study_only_suggests_something_to_try(tmp_path):
    arms = {"baseline": (BASE, runs({0: 0.5})), "num_generations=4": (G4, runs({0: 0.6}))}
    data = load_custom(make_custom_study(tmp_path, arms, evaluation={})[0])
    v = data.verdict
    assert v.kind == "untested" and v.recommended == G4 and v.reason == "best_mean_untested"
    assert v.words.startswith("Try num_generations=4") and "no test was possible" in v.words
    assert v.comparison is not None and v.comparison.kind == TOO_FEW and v.comparison.p_value is None
    assert [w.kind for w in data.warnings if w.kind == "single_seed"] == ["single_seed"]
