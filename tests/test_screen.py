"""The screen before any training: its drop rule on values, the rules it uses held to their measured agreement,
and a real screen on the CPU task that drops an arm it shows dominated, with the reason in plan and the report.

    pytest tests/test_screen.py               # the rule and the committed agreement figures
    pytest -m slow tests/test_screen.py       # a real screen (advise + probe) on the tiny model, then the report
"""

from __future__ import annotations

import json

import pytest

from helpers import ROOT, TESTS, cli_inprocess, write_study
from grpo_ablate.config import load_study
from grpo_ablate.files.reader import Owner
from grpo_ablate.files.screen_file import load_screen
from grpo_ablate.preflight.screen_rule import ALL_RULES, RULES, SIGNAL_RATIO, Point, drops, kept, signal_per_step
from grpo_ablate.plan.cells import study_plan
from grpo_ablate.plan.price import planned_price

AGREEMENT = ROOT / "benchmarks/data/screen_agreement.json"


def _p(key: str, per_step: float | None, seconds: float | None = 1.0, **kw) -> Point:
    return Point(key, key, 8, 1.0, signal_per_step=per_step, seconds_per_step=seconds, **kw)


def test_signal_per_step_is_the_prompts_with_reward_spread():
    assert signal_per_step(32, 8, 0.25) == 3.0 and signal_per_step(32, 2, 0.9) == pytest.approx(1.6)
    assert signal_per_step(448, 16, 0.0, steps_per_generation=4) == 7.0


def test_an_arm_far_below_another_in_signal_is_dominated_and_the_baseline_never_is():
    points = [_p("base", 1.0, baseline=True), _p("a", 3.0), _p("b", 1.9), _p("c", 2.5)]
    out = drops(points)
    assert set(out) == {"b"} and out["b"].rule == "dominated" and out["b"].by == "a"  # 3.0 / 1.9 >= 1.5; base kept
    assert "1/1.58" in out["b"].reason and "agreed with training on the CPU tasks" in out["b"].reason
    assert kept(points, out) == ["base", "a", "c"]
    # a dominating arm that is far slower in the probe does not dominate: that gain is not free
    slow = [_p("base", 1.0, baseline=True), _p("a", 3.0, seconds=2.0), _p("b", 1.9, seconds=1.0)]
    assert drops(slow) == {}
    # an arm with no prediction is kept: nothing shows it dominated
    assert "n" not in drops([_p("base", 1.0, baseline=True), _p("a", 3.0), _p("n", None)])


def test_what_cannot_run_leaves_first_and_the_rules_not_shown_drop_nothing():
    points = [_p("base", 1.0, baseline=True, out_of_memory="CUDA out of memory"), _p("a", 1.1),
              _p("x", 5.0, infeasible="generation batch 448 is not divisible by 5"),
              _p("z", 1.05, zero_spread=0.95), _p("s", 1.0, seconds=3.0)]
    out = drops(points)
    assert out["base"].rule == "out_of_memory" and out["x"].rule == "infeasible"  # the baseline too: it cannot run
    assert "z" not in out and "s" not in out  # no_spread and slower are measured, not used
    assert drops(points, rules=ALL_RULES)["z"].rule == "no_spread" and drops(points, rules=ALL_RULES)["s"].rule == "slower"
    assert not drops([p for p in points if p.key != "x"], rules=ALL_RULES).get("a")  # 1.1 vs 1.05: not far apart
    with pytest.raises(ValueError, match="unknown screen rule"):
        drops(points, rules=("psychic",))


def test_the_rules_the_screen_uses_are_those_whose_drops_agreed_with_training():
    """benchmarks/screen.py scored every rule against the committed many-seed tables: the tool drops arms only
    by a rule every one of whose drops agreed, at the ratio it uses; the zero-spread rule is out because it
    dropped the best arm of a table."""
    figures = json.loads(AGREEMENT.read_text())
    shown = {(s["rule"], s["ratio"]) for s in figures["summary"] if s["shown"]}
    assert ("dominated", SIGNAL_RATIO) in shown and set(RULES) == {"infeasible", "out_of_memory", "dominated"}
    assert not next(s for s in figures["summary"] if s["rule"] == "no_spread")["shown"]
    dominated = next(s for s in figures["summary"] if s["rule"] == "dominated" and s["ratio"] == SIGNAL_RATIO)
    assert dominated["drops"] >= 3 and dominated["tables"] >= 5  # shown on several tables, not on one


def _tiny(tmp_path, confirm: bool):
    return write_study(tmp_path, f"""\
        study:
          name: screen-test
          output_dir: {tmp_path / 'run'}
          sampler: ablation
          baseline: {{num_generations: 8, temperature: 1.0}}
          seeds: [0, 1, 2]
          racing: {{design: elimination, confidence: 0.95, first_round_seeds: 3}}
          min_effect: 0.05
        model: {{name_or_path: builtin:tiny}}
        data: {{task: addition, num_prompts: 200}}
        trainer: {{learning_rate: 2.0e-4, per_device_train_batch_size: 32, max_completion_length: 6, beta: 0.0,
                   lr_scheduler_type: constant, warmup_steps: 0}}
        search: {{num_generations: [8, 2], temperature: [1.0, 0.5]}}
        screen: {{k: 8, prompts: 32, probe_steps: 1, confirm: {str(confirm).lower()}}}
        budget: {{max_steps: 10, full_run: {{max_steps: 2000}}}}
        evaluation: {{num_prompts: 32, temperature: 0, samples_per_prompt: 1, points: 0}}
        """)


def test_before_the_screen_runs_the_plan_is_its_maximum_and_the_screen_alone_trains_nothing(tmp_path):
    study = load_study(_tiny(tmp_path, confirm=True))
    assert {c.arm.key for c in study_plan(study)} == {"G8xB32|T1", "G2xB32|T1", "G8xB32|T0.5"}
    price = planned_price(study)
    # 3 arms x 3 seeds of 10 steps, and the screen on top: advise's 32 x 8 x 2 completions at 32 a step (16 steps'
    # worth) and one probe step for each of the 2 (G, batch) pairs
    assert price.trials == 9 and price.screen == pytest.approx((18 / 2000, 18 / 2000))
    assert price.multiple[1] == pytest.approx((90 + 18) / 2000)
    alone = load_study(_tiny(tmp_path, confirm=False))
    assert study_plan(alone) == [] and planned_price(alone).trials == 0
    res = cli_inprocess("plan", str(_tiny(tmp_path, confirm=True)))
    assert res.returncode == 0 and "Screen (no training" in res.stdout and "Not run yet" in res.stdout


@pytest.mark.slow
def test_a_screen_on_the_cpu_task_drops_the_arm_it_shows_dominated_and_the_report_says_why(tmp_path, monkeypatch):
    """addition at T=0.5: the starting model's groups mostly agree, so G=8 at T=0.5 predicts a fraction of the
    prompts with a gradient per step that G=2 at T=1 does (trained 40 seeds: 0.616 against 0.757,
    benchmarks/data/sequential_table.json). The screen drops it, plan trains the two arms left, and a study that is
    the screen alone reports a screen, not a verdict, with the drop and its reason.

    The arms do the same work per step (32 completions), so any gap in the probe's one-step timings here is this
    shared machine's load: the timing guard (its own test above) is set out of reach, or a loaded moment would keep
    the arm."""
    from grpo_ablate.preflight import screen_rule

    monkeypatch.setattr(screen_rule, "SLOWER_RATIO", float("inf"))
    path = _tiny(tmp_path, confirm=False)
    # the screen's probe points in the startup environment of the suite's warm session (helpers.TRIAL_ENV's tests/
    # on the path, no GPU), so they fork from its template rather than start one of their own (~5 CPU s of imports)
    res = cli_inprocess("run", str(path), PYTHONPATH=str(TESTS), CUDA_VISIBLE_DEVICES="")
    assert res.returncode == 0, res.stderr
    assert "Nothing to train: the study is the screen alone" in res.stdout
    study = load_study(path)
    screen = load_screen(study.output_dir, Owner.of(study))
    assert screen is not None and [d.key for d in screen.dropped] == ["G8xB32|T0.5"]
    assert screen.dropped[0].rule == "dominated" and screen.dropped[0].by == "G2xB32|T1"
    assert screen.kept == ["G8xB32|T1", "G2xB32|T1"]
    page = (study.output_dir / "report.html").read_text()
    assert "This study is a screen, not a verdict" in page and "Dropped G=8, batch 32, T=0.5: predicted 1/" in page
    # switched on, the confirm stage trains only the arms the screen kept (the screen is not run twice)
    on = load_study(path, ["screen.confirm=true"])
    assert {c.arm.key for c in study_plan(on)} == {"G8xB32|T1", "G2xB32|T1"} and len(study_plan(on)) == 6
    plan = cli_inprocess("plan", str(path), "--set", "screen.confirm=true")
    assert "dropped G=8, batch 32, T=0.5: predicted 1/" in plan.stdout and "Trial plan (6 trials" in plan.stdout
