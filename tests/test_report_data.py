"""Report data extraction, asserted on values: a real journal study built by hand (tests/_report_fixtures.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from _report_fixtures import PROMPTS, STUDY_NAME, XSS, make_study
from grpo_ablate.contract.metrics import read_jsonl
from grpo_ablate.report import write_outputs
from grpo_ablate.report.arms import study_baseline
from grpo_ablate.report.data import build_report_data
from grpo_ablate.stats.zero_spread import zero_spread
from grpo_ablate.report.objectives import pareto_front
from grpo_ablate.report.records import TrialRecord, load_trials, outcome_of
from grpo_ablate.stats.seeds import difference, stat, t975
from grpo_ablate.report.summary import summary_dict, trials_frame
from grpo_ablate.core.vocab import Arm

T2 = 4.303  # t(0.975, df=2): three seeds


def _data(tmp_path: Path, **kw):
    storage, _ = make_study(tmp_path, **kw)
    attrs, frozen = load_trials(storage, STUDY_NAME)
    return build_report_data(STUDY_NAME, attrs, frozen, storage_url=storage)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return _data(tmp_path_factory.mktemp("study"))


# ---------------------------------------------------------------- statistics


def test_stat_mean_std_and_t_interval():
    s = stat([1.0, 2.0, 3.0])
    assert (s.n, s.mean, s.std) == (3, 2.0, 1.0)
    assert s.ci95 == pytest.approx((2 - T2 / math.sqrt(3), 2 + T2 / math.sqrt(3)))


def test_stat_single_seed_has_no_interval_and_ignores_missing():
    s = stat([None, 1.5, float("nan"), "x"])
    assert (s.n, s.mean, s.std, s.ci95) == (1, 1.5, None, None)
    assert stat([]).mean is None


def test_t_quantiles_round_down_to_the_wider_value():
    assert t975(4) == 2.776
    assert t975(4.9) == 2.776
    assert t975(35) == 2.042  # between 30 and 40: use 30's (wider)
    assert t975(1000) == 1.960


def test_welch_difference_of_two_three_seed_arms():
    d = difference(stat([1.0, 2.0, 3.0]), stat([4.0, 5.0, 6.0]))
    assert d is not None
    assert (d.delta, d.relative) == (3.0, 1.5)
    half = 2.776 * math.sqrt(2 / 3)  # Welch df = 4 for equal variances and n
    assert d.ci95 == pytest.approx((3 - half, 3 + half))
    assert d.clear is True
    d = difference(stat([1.0, 2.0, 3.0]), stat([1.5, 2.5, 3.5]))
    assert d is not None and d.clear is False
    d = difference(stat([1.0, 2.0, 3.0]), stat([1.5]))
    assert d is not None and d.clear is None and d.ci95 is None


def test_zero_spread_probability_matches_the_published_numbers():
    assert zero_spread(2, 0.1) == pytest.approx(0.82)
    assert round(zero_spread(8, 0.1), 2) == 0.43
    assert round(zero_spread(16, 0.1), 2) == 0.19


def test_pareto_front_respects_directions():
    pts = [(0, (1.0, 10.0)), (1, (2.0, 10.0)), (2, (0.5, 5.0)), (3, (2.0, 20.0))]
    assert pareto_front(pts, ["maximize", "minimize"]) == {1, 2}
    assert pareto_front(pts, ["maximize", "maximize"]) == {3}


def test_outcome_from_state_when_the_objective_wrote_none():
    assert outcome_of("COMPLETE", {}, {"oom": 1.0}) == "oom"
    assert outcome_of("COMPLETE", {}, {"oom": 0.0}) == "completed"
    assert outcome_of("PRUNED", {}, {}) == "pruned"
    assert outcome_of("FAIL", {}, {}) == "failed"
    assert outcome_of("RUNNING", {}, {}) == "running"
    assert outcome_of("FAIL", {"outcome": "interrupted"}, {}) == "interrupted"


def test_baseline_is_the_stored_arm_else_the_baseline_role():
    def rec(n: int, arm: Arm, role: str) -> TrialRecord:
        return TrialRecord(n, "COMPLETE", "completed", None, role, arm, 0, {}, {}, None, None)

    recs = [rec(0, Arm(4, 16, 1.0), "num_generations=4"), rec(1, Arm(8, 16, 1.0), "temperature=1"),
            rec(2, Arm(8, 16, 0.7), "temperature=0.7"), rec(3, Arm(8, 32, 1.0), "baseline")]
    assert study_baseline(Arm(8, 16, 1.0).as_dict(), recs) == Arm(8, 16, 1.0)  # the stored attr wins over a role
    assert study_baseline({"num_generations": 8, "generation_batch_size": 16, "temperature": 0.7}, recs) == Arm(8, 16, 0.7)
    assert study_baseline(Arm(2, 16, 1.0).as_dict(), recs) is None  # the study's baseline never ran
    # studies without the attr (or with something that is not an arm): the trials whose role is "baseline"
    assert study_baseline(None, recs) == Arm(8, 32, 1.0)
    assert study_baseline({"num_generations": 8}, recs) == Arm(8, 32, 1.0)
    assert study_baseline(None, recs[:3]) is None


def test_studies_written_before_role_name_arms_from_the_arm_attr(tmp_path):
    data = _data(tmp_path, role_attr="arm")
    assert [a.name for a in data.arms] == ["baseline", "num_generations=4", "temperature=0.3", "num_generations=16"]
    assert data.records[1].role == "num_generations=4"


def test_read_jsonl_skips_a_half_written_line(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1}\n[1, 2]\n\n{"step": 2}\n{"step": 3, "re')
    rows, bad = read_jsonl(p)
    assert [r["step"] for r in rows] == [1, 2]
    assert bad == 2
    assert read_jsonl(tmp_path / "missing.jsonl") == ([], 0)


# ---------------------------------------------------------------- the fixture study


def test_trial_records_and_counts(data):
    assert data.counts == {"completed": 9, "pruned": 1, "oom": 1, "failed": 1, "interrupted": 0, "running": 0,
                           "queued": 0}
    oom = data.records[6]
    assert (oom.outcome, oom.state, oom.config, oom.seed) == ("oom", "COMPLETE", Arm(16, 16, 1.0), 1)
    assert oom.reason.startswith("CUDA out of memory")
    assert data.records[11].outcome == "failed" and XSS in data.records[11].reason
    assert data.records[0].metrics["reward_per_hour"] == 1.0
    assert data.records[0].metrics["frac_reward_zero_std"] == 0.25  # derived from metrics.jsonl


def test_arms_grouped_by_configuration_with_seed_statistics(data):
    assert [a.name for a in data.arms] == ["baseline", "num_generations=4", "temperature=0.3", "num_generations=16"]
    base, g4, t03, g16 = data.arms
    assert base.is_baseline and data.baseline == Arm(8, 16, 1.0)
    rph = base.metrics["reward_per_hour"]
    assert (rph.n, rph.mean, rph.std) == (3, 2.0, 1.0)
    assert rph.half_width == pytest.approx(T2 / math.sqrt(3))
    assert g4.metrics["reward_per_hour"].mean == 5.0
    assert (t03.n, t03.metrics["reward_per_hour"].mean, t03.outcomes) == (2, 2.0, {"completed": 2, "failed": 1})
    assert g16.seeds == (0,) and g16.outcomes == {"completed": 1, "oom": 1, "pruned": 1}
    assert g16.metrics["reward_per_hour"].ci95 is None
    # diagnostics pool every trial that logged them: G=16's completed and pruned seeds
    assert g16.metrics["frac_reward_zero_std"].n == 2
    assert g16.metrics["completions_clipped_ratio"].mean == pytest.approx(0.8)
    assert t03.metrics["distinct_frac"].mean == pytest.approx(0.25)


def test_best_and_deltas_vs_baseline(data):
    best = data.best["reward_per_hour"]
    assert best is not None and best.arm.config == Arm(4, 16, 1.0)
    assert (best.stat.mean, best.stat.n) == (5.0, 3)
    d = data.deltas["num_generations=4"]["reward_per_hour"]
    assert (d.diff.delta, d.diff.relative, d.better, d.diff.clear) == (3.0, 1.5, True, True)
    assert "150% higher" in d.words and "better" in d.words and "larger than the seed-to-seed spread" in d.words
    same = data.deltas["temperature=0.3"]["reward_per_hour"]
    assert same.better is None and "the same as" in same.words
    single = data.deltas["num_generations=16"]["reward_per_hour"]
    assert single.better is False and single.diff.relative == pytest.approx(-0.25) and single.diff.clear is None
    assert "single seed" in single.words
    mem = data.deltas["num_generations=4"]["peak_memory_mb"]  # minimize: lower is better
    assert mem.diff.relative == pytest.approx(-0.5) and mem.better is True


def test_recommendation_names_the_winner_and_why(data):
    text = data.recommendation
    assert text.startswith("Use num_generations=4, generation_batch_size=16, temperature=1: probability ")
    assert "; it is clearly better than the baseline" in data.verdict.lines[0]
    # the arms the probability leaves out (fewer than 3 seeds) are named in the headline, never dropped silently
    assert data.verdict.lines[0].endswith("left out of it, with fewer than 3 seeds (nothing tested): G=8, batch 16, "
                                          "T=0.3 (2 seeds), G=16, batch 16, T=1 (1 seed).")
    assert "150% higher" in text and "5.00 vs 2.00" in text


def test_warnings_the_data_supports(data):
    kinds = [w.kind for w in data.warnings]
    assert kinds == ["near_duplicates", "truncated", "zero_spread", "oom", "failed"]
    by = {w.kind: w for w in data.warnings}
    assert "25%" in by["near_duplicates"].message and "temperature 0.3 is low for G=8" in by["near_duplicates"].message
    assert "80%" in by["truncated"].message
    # measured success rate p = mean of the groups' reward means = (0.9 + 0.5 + 0.2) / 3
    assert data.success_p == pytest.approx(1.6 / 3) and data.success_p_unit
    assert "75%" in by["zero_spread"].message and f"{zero_spread(4, 1.6 / 3) * 100:.0f}%" in by["zero_spread"].message
    assert "began at num_generations=16 with generation batch 16" in by["oom"].message
    assert "at the edge of memory" in by["oom"].message
    assert by["oom"].trials == (6,)
    assert by["failed"].trials == (11,) and "reward function crashed" in by["failed"].message


def test_prompts_ranked_by_within_group_variance(data):
    p = data.prompts
    assert list(p["prompt"]) == [PROMPTS[1], PROMPTS[2], PROMPTS[0]]
    top = p.iloc[0]
    assert (top["groups"], top["trials"]) == (20, 10)  # 10 trials with files x 2 steps
    assert top["mean_reward_var"] == pytest.approx(0.25) and top["mean_reward"] == pytest.approx(0.5)
    assert top["example_completions"][0] == f"answer {XSS} one"


def test_steps_keep_every_number_and_tolerate_missing_reward_keys(data):
    s = data.steps
    assert len(s) == 10 * 10
    assert {"trial", "role", "num_generations", "seed", "outcome", "step", "reward", "num_tokens",
            "rewards/count_char/mean", "completions_clipped_ratio", "peak_memory_mb"} <= set(s.columns)
    g16 = s[(s["trial"] == 2)]
    assert g16["reward"].isna().sum() == 3  # steps 3, 6, 9 logged no reward keys


def test_unreadable_line_becomes_a_note(tmp_path):
    data = _data(tmp_path, corrupt_last_line=True)
    note = [w for w in data.warnings if w.kind == "unreadable"]
    assert len(note) == 1 and note[0].severity == "info" and note[0].message.startswith("1 line(s)")
    assert len(data.steps) == 100


def test_multi_objective_pareto_and_importances(tmp_path):
    data = _data(tmp_path, objectives=(("reward_per_hour", "maximize"), ("peak_memory_mb", "minimize")))
    assert data.objectives == [("reward_per_hour", "maximize"), ("peak_memory_mb", "minimize")]
    assert data.pareto == {9}  # G=4 seed 2: the most reward per hour at the least memory
    assert set(data.importances) == {"reward_per_hour", "peak_memory_mb"}
    assert set(data.importances["peak_memory_mb"]) == {"num_generations", "temperature", "seed"}
    assert max(data.importances["peak_memory_mb"], key=data.importances["peak_memory_mb"].get) == "num_generations"
    assert data.best["peak_memory_mb"].arm.config == Arm(4, 16, 1.0)


def test_summary_json_schema(data):
    s = summary_dict(data)
    assert {"study", "objectives", "best", "arms", "baseline", "deltas_vs_baseline", "warnings", "versions",
            "trials"} <= set(s)
    assert s["study"] == STUDY_NAME
    assert s["objectives"] == [{"metric": "reward_per_hour", "direction": "maximize"}]
    best = s["best"]["reward_per_hour"]
    assert best["params"] == {"num_generations": 4, "generation_batch_size": 16, "temperature": 1.0}
    assert (best["mean"], best["n"]) == (5.0, 3)
    assert best["ci95"] == pytest.approx([5 - T2 / math.sqrt(3), 5 + T2 / math.sqrt(3)])
    arm = s["arms"][0]
    assert (arm["arm"], arm["key"], arm["n"]) == ("baseline", "G8xB16|T1", 3)
    assert arm["metrics"]["reward_per_hour"]["mean"] == 2.0 and arm["metrics"]["reward_per_hour"]["std"] == 1.0
    assert s["baseline"] == {"arm": "baseline", "num_generations": 8, "generation_batch_size": 16, "temperature": 1.0}
    assert s["deltas_vs_baseline"]["num_generations=4"]["reward_per_hour"]["relative"] == 1.5
    assert s["trials"] == data.counts
    assert s["metrics"]["peak_memory_mb"]["direction"] == "minimize"
    json.dumps(s, allow_nan=False)


def test_exports_written_beside_the_page(data, tmp_path):
    paths = write_outputs(data, tmp_path / "out" / "report.html")
    assert {"html", "trials_csv", "steps_csv", "steps_parquet", "prompts_csv", "summary_json"} <= set(paths)
    trials = pd.read_csv(paths["trials_csv"])
    assert len(trials) == 12 and list(trials["outcome"]).count("completed") == 9
    assert trials.loc[0, "value_reward_per_hour"] == 1.0
    steps = pd.read_csv(paths["steps_csv"])
    assert len(steps) == 100
    assert len(pd.read_parquet(paths["steps_parquet"])) == 100
    prompts = pd.read_csv(paths["prompts_csv"])
    assert list(prompts["prompt"])[0] == PROMPTS[1]
    assert json.loads(prompts.loc[0, "example_completions"])[0] == f"answer {XSS} one"
    summary = json.loads(paths["summary_json"].read_text())
    assert summary["best"]["reward_per_hour"]["mean"] == 5.0
    assert (paths["html"].stat().st_mode & 0o044) == 0o044  # readable by others, like any file the user writes


def test_trials_frame_has_objective_values_and_metrics(data):
    df = trials_frame(data)
    assert list(df["trial"]) == list(range(12))
    assert df.loc[6, "outcome"] == "oom" and pd.isna(df.loc[6, "reward_per_hour"])
    assert df.loc[1, "reward_per_hour"] == 4.0


def test_empty_study(tmp_path):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = str(tmp_path / "study.journal")
    optuna.create_study(study_name="empty", storage=JournalStorage(JournalFileBackend(path)))
    attrs, frozen = load_trials(path, "empty")
    data = build_report_data("empty", attrs, frozen)
    assert data.arms == [] and data.best == {"reward_per_hour": None}
    assert data.recommendation.startswith("No configuration completed yet")
    assert data.prompts.empty and data.steps.empty
    paths = write_outputs(data, tmp_path / "report.html")
    assert paths["html"].exists() and "steps_parquet" not in paths


def test_missing_study_is_a_clear_error(tmp_path):
    from grpo_ablate.config import StudyError

    with pytest.raises(StudyError, match="run `grpo-ablate run`"):
        load_trials(str(tmp_path / "nope.journal"), "x")
    storage, _ = make_study(tmp_path)
    with pytest.raises(StudyError, match="no study named 'other'"):
        load_trials(storage, "other")


def test_interrupted_and_running_trials_are_notes_not_warnings():
    from grpo_ablate.report.findings import find_warnings

    def rec(n: int, outcome: str) -> TrialRecord:
        return TrialRecord(n, "FAIL", outcome, None, "baseline", Arm(8, 16, 1.0), 0, {}, {}, None, None)

    found = find_warnings([rec(0, "interrupted"), rec(1, "running"), rec(2, "running")], [])
    assert [(f.kind, f.severity, f.trials) for f in found] == [("interrupted", "info", (0,)), ("running", "info", (1, 2))]
    assert found[1].message == "2 trial(s) were still running when this report was written: #1, #2."


def test_generated_tokens_count_completion_tokens_only():
    from grpo_ablate.report.records import steps_rows

    r = TrialRecord(0, "COMPLETE", "completed", None, "baseline", Arm(8, 16, 1.0), 0, {}, {}, None, None)
    rows = steps_rows(r, [{"step": 1, "num_tokens": 500, "completion_tokens": 96},
                          {"step": 2, "num_tokens": 1000},  # a step that logged no generation
                          {"step": 3, "num_tokens": 1500, "completion_tokens": 100}])
    assert [x["generated_tokens"] for x in rows] == [96, 96, 196]
    assert rows[0]["num_generations"] == 8 and rows[0]["trial"] == 0
    fallback = steps_rows(r, [{"step": 1, "num_tokens": 500}])
    assert fallback[0]["generated_tokens"] == 500


def test_the_page_says_which_learning_rate_schedule_the_trials_ran():
    from grpo_ablate.report.data import _lr_schedule

    assert _lr_schedule({"budget": {"max_steps": 100, "full_run": {"max_steps": 300}}}) == "prefix"  # a recipe's default
    assert _lr_schedule({"budget": {"max_steps": 100}}) == "compressed"
    assert _lr_schedule({"budget": {"lr_schedule": "compressed", "full_run": {"max_steps": 300}}}) == "compressed"
    assert _lr_schedule({}) is None
