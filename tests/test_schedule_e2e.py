"""G schedules in real runs of the tiny built-in model: one run, G changing at the right step.

    HF_HUB_OFFLINE=1 python -m pytest -q tests/test_schedule_e2e.py

Every trial is real and runs as a study runs it (one process: the warm session; two: torchrun); a few steps each.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from grpo_ablate.contract.metrics import read_rows
from grpo_ablate.core.vocab import EVENTS_FILE, METRICS_FILE, Outcome, generations_text
from grpo_ablate.records import trial_record as record

from helpers import tiny_spec

pytestmark = pytest.mark.slow


def _run(session, tmp: Path, name: str, g: int | str, steps: int, **hardware) -> tuple[list[dict], list[dict]]:
    """One trial through the suite's warm session (a multi-process trial gets a process tree of its own there)."""
    trainer = {"num_generations": g, "seed": 0, **hardware.pop("trainer", {})}
    spec = tiny_spec(tmp / name, steps=steps, hardware={"num_processes": 1, **hardware}, **trainer)
    result = session.run(spec)
    assert result.outcome is Outcome.COMPLETED, f"{result.reason}\n{result.log_tail}"
    rows = read_rows(tmp / name / METRICS_FILE)
    events_file = tmp / name / EVENTS_FILE
    events = [json.loads(x) for x in events_file.read_text().splitlines()] if events_file.exists() else []
    return rows, events


def test_schedule_of_one_g_is_the_fixed_g_run(tmp_path, warm_session):
    """The equivalence: same seed, phases of the same G -> identical rewards per step (and one continuous file)."""
    fixed, none = _run(warm_session, tmp_path, "fixed", 4, 6)
    sched, events = _run(warm_session, tmp_path, "sched", "4->4@50%", 6)
    assert none == []
    assert [r["reward"] for r in sched] == [r["reward"] for r in fixed]
    assert [r["loss"] for r in sched] == [r["loss"] for r in fixed]
    assert [r["learning_rate"] for r in sched] == [r["learning_rate"] for r in fixed]
    assert [r["step"] for r in sched] == list(range(1, 7)) and {r["num_generations"] for r in sched} == {4}
    # the boundary was crossed (an event), and crossing it changed nothing
    assert [(e["step"], e["phase"], e["num_generations"]) for e in events] == [(1, 0, 4), (4, 1, 4)]


def test_two_phase_schedule_switches_at_its_step(finished_study):
    """The shared finished demo study's schedule arm: 2->8 at 50% of its 4 optimizer steps."""
    assert finished_study.run.returncode == 0, finished_study.run.stdout + finished_study.run.stderr
    (trial,) = [t for t in finished_study.load().get_trials(deepcopy=False) if t.params["num_generations"] == "2→8@50%"]
    folder = Path(record.trial_dir(trial))
    rows = read_rows(folder / METRICS_FILE)
    events = [json.loads(x) for x in (folder / EVENTS_FILE).read_text().splitlines()]
    assert [r["num_generations"] for r in rows] == [2, 2, 8, 8]  # 50% of 4 steps: steps 1-2 at G=2
    assert [r["step"] for r in rows] == list(range(1, 5))  # one run: the step count goes on
    assert [r["completions"] for r in rows] == [32] * 4  # the same generation batch in both phases
    assert events[0] == {"event": "phase", "step": 1, "phase": 0, "num_generations": 2, "schedule": "2→8@50%",
                         "reason": "start"}
    switch = events[1]
    assert (switch["step"], switch["phase"], switch["from"], switch["num_generations"]) == (3, 1, 2, 8)
    assert switch["reason"].startswith("progress: 2 of 4 optimizer steps done")
    groups = [json.loads(x) for x in (folder / "groups.jsonl").read_text().splitlines()]
    assert {g["num_generations"] for g in groups if g["step"] <= 2} == {2}
    assert {g["num_generations"] for g in groups if g["step"] >= 3} == {8}


def _first_step_meeting(rows: list[dict], threshold: float, window: int) -> int | None:
    seen: list[float] = []
    for r in rows:
        if r.get("frac_reward_zero_std") is None:
            continue
        seen.append(r["frac_reward_zero_std"])
        recent = seen[-window:]
        if len(recent) >= window and sum(recent) / window < threshold:
            return r["step"]
    return None


def _check_signal_switch(rows: list[dict], events: list[dict], threshold: float, window: int) -> None:
    """The switch was decided on the first step whose window met the condition, and took effect after it."""
    first_g = [r for r in rows if r["num_generations"] == 2]
    decided = _first_step_meeting(first_g, threshold, window)
    assert decided is not None, f"the condition never held: {[r.get('frac_reward_zero_std') for r in rows]}"
    switch = [e for e in events if e["phase"] == 1]
    assert len(switch) == 1 and switch[0]["decided_after"] == decided  # when it holds, not before
    start = switch[0]["step"]
    assert decided < start <= decided + 2  # the next round drawn after the decision (the loader reads one ahead)
    assert all(r["num_generations"] == 2 for r in rows if r["step"] < start)
    assert all(r["num_generations"] == 8 for r in rows if r["step"] >= start)


def test_signal_switch_fires_when_its_condition_holds_and_not_before(tmp_path, warm_session):
    # G=2 on this task starts with ~0.6-0.9 of its pairs agreeing; 0.6 over 2 steps is met within a few steps.
    rows, events = _run(warm_session, tmp_path, "signal", "2->8@zero_std<0.6[2]", 8)
    _check_signal_switch(rows, events, 0.6, 2)


def test_two_processes_switch_at_the_same_step(tmp_path, warm_session):
    """torchrun, world size 2: the decision is rank 0's, broadcast; both ranks train the same G every step."""
    name = "ddp"
    rows, events = _run(warm_session, tmp_path, name, "2->8@zero_std<0.6[2]", 8, command="auto", num_processes=2,
                        trainer={"per_device_train_batch_size": 16})
    _check_signal_switch(rows, events, 0.6, 2)
    log = (tmp_path / name / "log.txt").read_text()
    assert "world size 2" in log or json.loads((tmp_path / name / "result.json").read_text())["world_size"] == 2
    # a rank that trained another G would have split groups differently and hung or failed the all-gather
    assert len(rows) == 8


def test_ablation_with_a_schedule_arm_runs_and_reports_it(finished_study):
    """The shared finished demo study is this ablation: G=8 against the schedule 2->8 at half of 4 steps."""
    res, out = finished_study.run, finished_study.out
    assert res.returncode == 0, res.stdout + res.stderr
    st = finished_study.load()
    trials = st.get_trials(deepcopy=False)
    assert [t.params["num_generations"] for t in trials] == [8, "2→8@50%"]
    assert generations_text(record.arm_of(trials[1]).num_generations) == "2→8@50%" and record.role_of(trials[1]) == "num_generations=2→8@50%"
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    rows = read_rows(Path(record.trial_dir(trials[1])) / METRICS_FILE)
    assert [r["num_generations"] for r in rows] == [2, 2, 8, 8]
    html = (out / "report.html").read_text()
    assert "2→8@50%" in html
    assert "Dotted lines: where a G schedule changed phase" in html  # the switch is marked on the reward curves
    summary = json.loads((out / "summary.json").read_text())
    assert "2→8@50%" in json.dumps(summary, ensure_ascii=False)
