"""`grpo-ablate compare`: per-arm deltas of tracked metrics, exit 1 on a regression, 2 on bad input."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from _report_fixtures import STUDY_NAME, make_study
from grpo_ablate.commands.compare import compare_main
from grpo_ablate.report.regression import DEFAULT_TOLERANCE, CompareError, compare_summaries, parse_tolerances
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.records import load_trials
from grpo_ablate.report.summary import summary_dict


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> dict:
    storage, _ = make_study(tmp_path_factory.mktemp("cmp"),
                            objectives=(("reward_per_hour", "maximize"), ("peak_memory_mb", "minimize")))
    attrs, frozen = load_trials(storage, STUDY_NAME)
    return summary_dict(build_report_data(STUDY_NAME, attrs, frozen))


def _arm(s: dict, key: str) -> dict:
    return next(a for a in s["arms"] if a["key"] == key)


def _write(tmp_path: Path, name: str, s: dict) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(s))
    return str(p)


def _run(a: str, b: str, tol: list[str] | None = None, as_json: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = compare_main(a, b, tol or [], as_json=as_json, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_parse_tolerances():
    assert parse_tolerances(["reward_per_hour=0.1", "peak_memory_mb=5%"]) == {"reward_per_hour": 0.1, "peak_memory_mb": 0.05}
    for bad in ("reward_per_hour", "=0.1", "reward_per_hour=x", "reward_per_hour=-0.1", "reward_per_hour=nan"):
        with pytest.raises(CompareError, match="--tolerance"):
            parse_tolerances([bad])


def test_identical_studies_pass(summary, tmp_path):
    a = _write(tmp_path, "a.json", summary)
    code, out, err = _run(a, a)
    assert code == 0 and err == ""
    assert "no regression in 8 check(s)" in out  # 4 arms x 2 objectives, 10% each by default


def test_rows_judge_each_metric_in_its_direction(summary):
    b = copy.deepcopy(summary)
    _arm(b, "G4xB16|T1")["metrics"]["reward_per_hour"]["mean"] = 4.0  # 5.0 -> 4.0: 20% worse
    _arm(b, "G8xB16|T1")["metrics"]["reward_per_hour"]["mean"] = 2.5  # 2.0 -> 2.5: better
    _arm(b, "G8xB16|T1")["metrics"]["peak_memory_mb"]["mean"] = 880.0  # 800 -> 880: 10% more memory
    rows = {(r.key, r.metric): r for r in compare_summaries(summary, b, {"reward_per_hour": 0.1, "peak_memory_mb": 0.05})}
    r = rows[("G4xB16|T1", "reward_per_hour")]
    assert (r.a, r.b, r.change, r.worsening, r.status) == (5.0, 4.0, pytest.approx(-0.2), pytest.approx(0.2), "REGRESSION")
    assert rows[("G8xB16|T1", "reward_per_hour")].status == "better"
    mem = rows[("G8xB16|T1", "peak_memory_mb")]
    assert (mem.direction, mem.worsening, mem.status) == ("minimize", pytest.approx(0.1), "REGRESSION")
    assert rows[("G16xB16|T1", "reward_per_hour")].status == "ok"
    assert (r.n_a, r.n_b) == (3, 3)  # the seeds behind each mean


def test_a_change_within_tolerance_is_neither_better_nor_worse(summary, tmp_path):
    b = copy.deepcopy(summary)
    _arm(b, "G8xB16|T1")["metrics"]["reward_per_hour"]["mean"] = 2.1  # 2.0 -> 2.1: +5%, inside 10%
    rows = {(r.key, r.metric): r for r in compare_summaries(summary, b, {"reward_per_hour": 0.1})}
    assert rows[("G8xB16|T1", "reward_per_hour")].status == "ok"
    code, out, _ = _run(_write(tmp_path, "a.json", summary), _write(tmp_path, "b.json", b), ["reward_per_hour=0.1"])
    line = next(x for x in out.splitlines() if x.startswith("baseline") and "+5.0%" in x)
    assert code == 0 and "within tolerance" in line and "better" not in line and "3/3" in line and "±10%" in line


def test_regression_beyond_tolerance_exits_1(summary, tmp_path):
    b = copy.deepcopy(summary)
    _arm(b, "G4xB16|T1")["metrics"]["reward_per_hour"]["mean"] = 4.0
    a_path, b_path = _write(tmp_path, "a.json", summary), _write(tmp_path, "b.json", b)
    code, out, _ = _run(a_path, b_path, ["reward_per_hour=0.1"])
    assert code == 1
    assert "REGRESSION" in out and "num_generations=4" in out and "-20.0%" in out
    assert _run(a_path, b_path, ["reward_per_hour=0.25"])[0] == 0
    assert _run(a_path, b_path, ["reward_per_hour=20%"])[0] == 0  # exactly at the tolerance is allowed


def test_default_tracks_the_objectives_at_ten_percent(summary, tmp_path):
    assert DEFAULT_TOLERANCE == 0.1
    b = copy.deepcopy(summary)
    _arm(b, "G8xB16|T1")["metrics"]["peak_memory_mb"]["mean"] = 1000.0  # +25% memory
    code, out, _ = _run(_write(tmp_path, "a.json", summary), _write(tmp_path, "b.json", b))
    assert code == 1 and "peak_memory_mb" in out


def test_an_arm_that_no_longer_completes_is_a_regression(summary, tmp_path):
    b = copy.deepcopy(summary)
    arm = _arm(b, "G16xB16|T1")
    for m in arm["metrics"].values():
        m.update(mean=None, std=None, ci95=None, n=0)
    code, out, _ = _run(_write(tmp_path, "a.json", summary), _write(tmp_path, "b.json", b), ["reward_per_hour=0.1"])
    assert code == 1 and "no completed trial in B" in out


def test_new_arms_are_listed_not_judged(summary, tmp_path):
    b = copy.deepcopy(summary)
    extra = copy.deepcopy(_arm(b, "G4xB16|T1"))
    extra.update(arm="num_generations=2", key="G2xB16|T1", num_generations=2)
    b["arms"].append(extra)
    code, out, _ = _run(_write(tmp_path, "a.json", summary), _write(tmp_path, "b.json", b), ["reward_per_hour=0.1"])
    assert code == 0 and "num_generations=2" in out and "new" in out


def test_json_output_and_run_folder_input(summary, tmp_path):
    (tmp_path / "run").mkdir()
    _write(tmp_path / "run", "summary.json", summary)
    code, out, _ = _run(str(tmp_path / "run"), str(tmp_path / "run"), ["reward_per_hour=0.1"], as_json=True)
    payload = json.loads(out)
    assert code == 0 and payload["ok"] is True and payload["regressions"] == 0
    assert payload["tolerances"] == {"reward_per_hour": 0.1}
    assert {r["status"] for r in payload["rows"]} == {"ok"} and len(payload["rows"]) == 4


@pytest.mark.parametrize("case", ["missing", "not_json", "not_summary", "bad_tol", "unknown_metric", "disjoint"])
def test_bad_input_exits_2(summary, tmp_path, case):
    a = _write(tmp_path, "a.json", summary)
    b, tol = a, ["reward_per_hour=0.1"]
    if case == "missing":
        b = str(tmp_path / "nope.json")
    elif case == "not_json":
        (tmp_path / "b.json").write_text("{not json")
        b = str(tmp_path / "b.json")
    elif case == "not_summary":
        b = _write(tmp_path, "b.json", {"hello": 1})
    elif case == "bad_tol":
        tol = ["reward_per_hour"]
    elif case == "unknown_metric":
        tol = ["reward_per_day=0.1"]
    elif case == "disjoint":
        other = copy.deepcopy(summary)
        for arm in other["arms"]:
            arm["key"] = arm["key"].replace("B16", "B32")
        b = _write(tmp_path, "b.json", other)
    code, out, err = _run(a, b, tol)
    assert code == 2 and out == "" and err.startswith("grpo-ablate compare: ")


def test_study_file_supplies_tolerances(summary, tmp_path):
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    b = copy.deepcopy(summary)
    _arm(b, "G4xB16|T1")["metrics"]["reward_per_hour"]["mean"] = 4.0  # 20% worse
    _write(out_dir, "summary.json", b)
    study = tmp_path / "nightly.yaml"
    study.write_text(
        f"study:\n  name: {STUDY_NAME}\n  output_dir: {out_dir}\n  sampler: ablation\n"
        "data:\n  task: addition\nbudget:\n  max_steps: 10\n"
        "compare:\n  tolerances:\n    reward_per_hour: 0.3\n"
    )
    a = _write(tmp_path, "a.json", summary)
    assert _run(a, str(study))[0] == 0  # the file allows 30%
    assert _run(a, str(study), ["reward_per_hour=0.1"])[0] == 1  # the command line wins


def test_study_file_without_summary_is_summarised_from_its_storage(tmp_path):
    _, out_dir = make_study(tmp_path)
    study = tmp_path / "s.yaml"
    study.write_text(f"study:\n  name: {STUDY_NAME}\n  output_dir: {out_dir}\n  sampler: ablation\n"
                     "data:\n  task: addition\nbudget:\n  max_steps: 10\n")
    assert not (out_dir / "summary.json").exists()
    code, out, _ = _run(str(study), str(study))
    assert code == 0 and "no regression in 4 check(s)" in out  # the objective over 4 arms


def test_a_count_cannot_be_tracked(summary, tmp_path):
    a = _write(tmp_path, "a.json", summary)
    code, out, err = _run(a, a, ["steps=0.1"])  # the registry gives steps no direction
    assert code == 2 and out == "" and "steps is a count" in err


def test_arms_without_a_key_match_on_their_knobs(summary):
    b = copy.deepcopy(summary)
    for arm in b["arms"]:
        del arm["key"]  # a summary written by hand, or by an older version
    rows = compare_summaries(summary, b, {"reward_per_hour": 0.1})
    assert {r.status for r in rows} == {"ok"} and {r.key for r in rows} == {a["key"] for a in summary["arms"]}


def test_the_two_answers_are_shown_and_matched(summary, tmp_path):
    assert summary["verdict"]["kind"] == "winner" and summary["verdict"]["comparison"] == "model paired"
    a = _write(tmp_path, "a.json", summary)
    code, out, _ = _run(a, a)
    assert code == 0 and "answer A: winner, recommends G4xB16|T1" in out and "the answers agree" in out
    b = copy.deepcopy(summary)
    b["verdict"]["recommended"]["key"] = "G8xB16|T1"
    b["verdict"]["kind"] = "no_clear_winner"
    code, out, _ = _run(a, _write(tmp_path, "b.json", b), as_json=True)
    payload = json.loads(out)
    assert code == 0 and payload["verdicts"]["agree"] is False  # news, not a regression
    assert payload["verdicts"]["b"]["kind"] == "no_clear_winner"


@pytest.mark.parametrize("change", ["name", "objective", "direction", "space"])
def test_two_different_studies_are_refused_unless_told(summary, tmp_path, change):
    """Issue 43: `compare` of two unrelated studies said "the answers agree ... no regression" and exited 0."""
    from grpo_ablate.commands.cli import main

    other = copy.deepcopy(summary)
    if change == "name":
        other["study"] = "another-study"
    elif change == "objective":
        other["objectives"] = [{"metric": "final_reward", "direction": "maximize"}] + other["objectives"][1:]
    elif change == "direction":
        other["objectives"][0]["direction"] = "minimize"
    else:
        other["space"] = {**summary["space"], "temperature": [0.7, 1.0]}
    a, b = _write(tmp_path, "a.json", summary), _write(tmp_path, "b.json", other)
    code, out, err = _run(a, b)
    assert code == 2 and out == "" and "are not the same study" in err and "--allow-different" in err
    assert {"name": "study name", "objective": "objectives", "direction": "objectives", "space": "search space"}[change] in err
    out_buf, err_buf = io.StringIO(), io.StringIO()
    code = compare_main(a, b, ["reward_per_hour=0.1"], out=out_buf, err=err_buf, allow_different=True)
    assert code == 0 and "note: A and B are different studies" in out_buf.getvalue()
    assert main(["compare", a, b, "--tolerance", "reward_per_hour=0.1", "--allow-different"]) == 0
    assert main(["compare", a, b]) == 2


def test_the_same_study_compares_and_an_older_summary_without_a_space_is_said(summary, tmp_path):
    assert summary["space"] == {"num_generations": [4, 8, 16], "temperature": [0.3, 1.0]}
    old = copy.deepcopy(summary)
    del old["space"]  # written before summaries recorded the space (sweeps/baselines/nightly-summary.json)
    code, out, _ = _run(_write(tmp_path, "old.json", old), _write(tmp_path, "new.json", summary))
    assert code == 0 and "note: A's summary does not record its search space" in out
