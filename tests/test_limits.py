"""What a study may spend: the derived trial timeout (study/limits.py), its warning, and the GPU-hour budget (gpu_hours.py).

Units on real Optuna FrozenTrials (no storage needed); the e2e test runs a CPU study whose
budget takes one trial and stops the next, with the exit status and the words it prints.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from helpers import ROOT, cli_inprocess, write_study
from optuna.distributions import IntDistribution
from optuna.trial import FrozenTrial, TrialState

from grpo_ablate.records import gpu_hours
from grpo_ablate.records import trial_record as record
from grpo_ablate.records.gpu_hours import TrialTime
from grpo_ablate.study import limits

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def _trial(number: int, seconds: float | None, outcome: str = "completed", state: TrialState = TrialState.COMPLETE,
           **attrs) -> FrozenTrial:
    end = T0 + dt.timedelta(seconds=seconds) if seconds is not None else None
    return FrozenTrial(number=number, state=state, value=1.0 if state == TrialState.COMPLETE else None, values=None,
                       datetime_start=T0, datetime_complete=end, params={"g": 4},
                       distributions={"g": IntDistribution(1, 8)}, user_attrs={record.OUTCOME: outcome, **attrs},
                       system_attrs={}, intermediate_values={}, trial_id=number)


def test_auto_timeout_is_twice_the_long_estimate_plus_slack_and_an_hour_without_one():
    seconds, words = limits.resolve_timeout("auto", TrialTime((8640.0, 41760.0), False, "assumptions"))
    assert seconds == 2 * 41760 + 600 and "long end" in words
    assert limits.resolve_timeout("auto", None)[0] == limits.NO_ESTIMATE_TIMEOUT_S
    assert limits.resolve_timeout(None, None)[0] is None
    assert limits.resolve_timeout(900, None) == (900.0, "15 min (study.trial_timeout)")


def test_a_set_timeout_below_the_estimate_is_warned_about():
    recipe = TrialTime((8640.0, 41760.0), False, "assumptions")  # 2.4 h to 11.6 h, as issue 28's recipe
    below = limits.timeout_warning(3600, recipe)
    assert below is not None and "every trial would be stopped" in below and "2.4 h" in below
    inside = limits.timeout_warning(20000, recipe)
    assert inside is not None and "slow trials would be stopped" in inside
    assert limits.timeout_warning(100000, recipe) is None
    assert limits.timeout_warning("auto", recipe) is None and limits.timeout_warning(10, None) is None


def test_the_measured_estimate_is_the_slowest_whole_completed_trial():
    trials = [_trial(0, 100), _trial(1, 300), _trial(2, 50, "failed", TrialState.FAIL),
              _trial(3, 30, resumed_from_step=8)]  # a resumed retry ran only its remainder
    est = gpu_hours.measured_estimate(trials)
    assert est is not None and est.seconds == (300, 300) and est.measured
    assert gpu_hours.measured_estimate([_trial(0, 50, "failed", TrialState.FAIL)]) is None


def test_the_budget_counts_every_attempt_and_refuses_the_trial_that_would_cross_it():
    study = (1.0, 2)  # 1 GPU-hour, trials of 2 GPUs
    trials = [_trial(0, 600), _trial(1, 300, "interrupted", TrialState.FAIL)]  # 900 s x 2 GPUs = 0.5 GPU-h spent
    b = gpu_hours.budget_of(*study, trials, None)
    assert b is not None and b.spent_h == pytest.approx(0.5) and b.left_h == pytest.approx(0.5)
    assert b.next_h == pytest.approx(600 * 2 / 3600) and b.may_start  # 0.5 + 0.33 <= 1
    trials.append(_trial(2, 600))
    b = gpu_hours.budget_of(*study, trials, None)  # 0.83 spent: one more (0.33) would cross 1.0
    assert not b.may_start and "would cross it" in b.refusal() and "0.8 GPU-h spent" in b.words()
    assert gpu_hours.budget_of(None, 2, trials, None) is None


def test_a_running_trial_holds_its_estimate_and_without_one_trials_run_one_at_a_time():
    study = (1.0, 1)
    running = _trial(0, None, "running", TrialState.RUNNING)
    planned = TrialTime((1000.0, 1800.0), False, "assumptions")
    b = gpu_hours.budget_of(*study, [running], planned, now=T0 + dt.timedelta(seconds=60))
    assert b.held_h == pytest.approx(0.5) and b.next_h == pytest.approx(0.5) and b.may_start  # 0.5 + 0.5 <= 1
    b = gpu_hours.budget_of(*study, [running], planned, now=T0 + dt.timedelta(seconds=2400))  # ran past its estimate
    assert b.held_h == pytest.approx(2400 / 3600) and not b.may_start
    unknown = gpu_hours.budget_of(*study, [running], None, now=T0 + dt.timedelta(seconds=60))
    assert unknown.next_h is None and not unknown.may_start  # wait for the first to measure
    assert gpu_hours.budget_of(*study, [], None).may_start  # nothing runs: one trial starts, to measure


OPENR1 = str(ROOT / "studies" / "openr1-1.5b-numina-8gpu.yaml")  # assumed hours per trial, 8 GPUs


def test_plan_derives_the_timeout_and_validate_warns_of_one_set_below_the_estimate():
    from grpo_ablate.config import load_study

    est = limits.planned_estimate(load_study(OPENR1))  # estimate.estimate_trial's range for the recipe
    assert est is not None and not est.measured and est.seconds[0] > 3600  # every trial is longer than an hour
    plan = json.loads(cli_inprocess("plan", OPENR1, "--json", "--set", "study.budget_gpu_hours=300").stdout)["limits"]
    assert plan["trial_timeout_s"] == pytest.approx(2 * est.seconds[1] + 600) and plan["timeout_warning"] is None
    per_trial_h = [s * 8 / 3600 for s in est.seconds]
    assert plan["trials_in_budget"] == [int(300 // per_trial_h[1]), int(300 // per_trial_h[0])]
    text = cli_inprocess("plan", OPENR1).stdout
    assert "(the long end of the estimate) + 10 min" in text and "GPU-hour budget: 1000;" in text
    low = cli_inprocess("validate", OPENR1, "--set", "study.trial_timeout=3600")
    assert low.returncode == 0
    assert "study.trial_timeout=3600 s is below one trial's assumed time" in low.stderr
    assert "every trial would be stopped and failed" in low.stderr


BUDGET_STUDY = """\
study:
  name: budget-e2e
  output_dir: {out}
  sampler: ablation
  seeds: [0]
  budget_gpu_hours: 0.0001
model: {{name_or_path: builtin:tiny}}
data: {{task: addition, num_prompts: 400}}
trainer: {{learning_rate: 2.0e-4, per_device_train_batch_size: 32, max_completion_length: 6, beta: 0.0}}
hardware: {{gpus: 1}}
search: {{num_generations: [2, 4]}}
budget: {{max_steps: 3}}
"""


@pytest.mark.slow
def test_a_study_stops_before_the_trial_that_would_cross_its_gpu_hour_budget(study_here, tmp_path):
    out = tmp_path / "run"
    study = write_study(tmp_path, BUDGET_STUDY.format(out=out))
    run = study_here("run", str(study), CUDA_VISIBLE_DEVICES="")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "GPU-hour budget" in run.stdout and "spent" in run.stdout and "left" in run.stdout
    # no recipe and no budget.full_run: no run to price it against, so no price line (issue 53: quiet where nothing is wrong)
    assert "Price:" not in run.stdout and "in units of your run" not in run.stdout
    assert "[trial 0] completed" in run.stdout and "[trial 1]" not in run.stdout  # the first measured, the second refused
    assert "would cross it" in run.stdout and "1 queued trial(s) did not run" in run.stdout
    summary = json.loads((out / "summary.json").read_text())["gpu_budget"]  # the report shows spent and left
    assert summary["budget_gpu_hours"] == 0.0001 and summary["spent_gpu_hours"] > 0 and summary["left_gpu_hours"] == 0
    page = (out / "report.html").read_text()
    assert summary["words"] in page and "in units of your run" not in page  # nor in the report's header
