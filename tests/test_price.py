"""The study's price in units of the run it tunes (cost.price, plan/price.py), and init fitting a study to it."""

from __future__ import annotations

import pickle
import re

import pytest
import yaml

from helpers import ROOT, cli_inprocess
from grpo_ablate.plan.branching import branch_step
from grpo_ablate.commands.init import write_study
from grpo_ablate.plan.draft import InitAnswers
from grpo_ablate.plan.design import MIN_SEEDS, effect_for_seeds, seeds_to_decide
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.core.cost import Branching, RunShare, fmt_multiple, fmt_range, parse_share, price, study_total, warmup_steps
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.records.gpu_hours import budget_of
from grpo_ablate.records import trial_record as record
from grpo_ablate.stats.selection import bechhofer_seeds
from grpo_ablate.plan.price import planned_price, prefix_estimate, price_line, resolve_budget, spent_price

FIXTURES = ROOT / "tests/fixtures/open-r1"
DEMO = FIXTURES / "qwen2.5-1.5b-instruct-grpo-config_demo.yaml"
CODE = FIXTURES / "qwen2.5-1.5b-instruct-grpo-config_demo_code.yaml"  # max_steps 500, warmup_ratio 0.03
NUMINA_TIR_TRAIN_PROMPTS = 72_441  # AI-MO/NuminaMath-TIR's train split (tests/test_fidelity.py)


def test_the_multiple_is_gpu_hours_over_gpu_hours_at_the_same_rates():
    p = price(12, study_h=(48.0, 48.0), full_run_h=(120.0, 120.0), study_steps=None, full_run_steps=None)
    assert p.multiple == (0.4, 0.4) and p.words() == "this study costs 0.4x your run (48 of 120 GPU-h)"
    ranged = price(12, study_h=(40.0, 160.0), full_run_h=(100.0, 400.0), study_steps=None, full_run_steps=None,
                   at_most=True)
    assert ranged.multiple == (0.4, 0.4)  # each end over the same end: the rates' uncertainty cancels
    assert ranged.words() == ("this study costs at most 0.4x your run (40-160 of 100-400 GPU-h, each end at the same "
                              "assumed rates)")
    steps = price(12, study_h=None, full_run_h=None, study_steps=1200, full_run_steps=1000, no_hours="a CPU study")
    assert steps.multiple == (1.2, 1.2) and "1.2x your run in optimizer steps" in steps.words()
    assert "a CPU study" in steps.words()
    unknown = price(3, study_h=(1.0, 2.0), full_run_h=None, study_steps=None, full_run_steps=None,
                    unknown="set budget.full_run.prompts")
    assert unknown.multiple is None and unknown.words().endswith("unknown: set budget.full_run.prompts")
    assert fmt_multiple(0.42, 0.44) == "0.42-0.44x" and fmt_multiple(12.2) == "12x"


def test_a_budget_may_be_a_share_of_the_full_run():
    assert parse_share("0.5x") == 0.5 and parse_share(" 2X ") == 2.0 and parse_share(".25x") == 0.25
    assert parse_share("0x") is None and parse_share("0.5") is None and parse_share(0.5) is None
    share = RunShare(0.5, 120.0)
    assert float(share) == 60.0 and share.share == 0.5 and pickle.loads(pickle.dumps(share)).share == 0.5
    with pytest.raises(StudyError, match="share of the full run"):  # never read as 0.5 GPU-hours
        budget_of("0.5x", 8, [], None)


def _study(tmp_path, recipe=DEMO, *, prompts: int | None = NUMINA_TIR_TRAIN_PROMPTS, extra: str = "", name="p"):
    path = tmp_path / f"{name}.yaml"
    full = f", full_run: {{prompts: {prompts}}}" if prompts else ""
    path.write_text(f"study: {{name: {name}, sampler: ablation, output_dir: {tmp_path / name}, seeds: [0, 1, 2]{extra}}}\n"
                    f"trainer_from: {recipe}\nhardware: {{gpus: 8, vllm: {{mode: server}}}}\n"
                    f"search: {{num_generations: [7, 14]}}\nbudget: {{max_steps: 50{full}}}\n")
    return path


def test_plan_states_the_price_in_units_of_the_full_run(tmp_path):
    study = load_study(_study(tmp_path))
    est = estimate_trial(study)
    p = planned_price(study, est)
    assert p.trials == 6 and est.full_run_steps == 283
    lo, hi = est.study_gpu_hours(6), est.full_run_gpu_hours
    assert p.multiple == pytest.approx((min(lo[0] / hi[0], lo[1] / hi[1]), max(lo[0] / hi[0], lo[1] / hi[1])))
    assert 6 * 50 / 283 < p.multiple[0] < 6 * 60 / 283  # six trials of 50 of 283 steps, plus their start-up
    res = cli_inprocess("plan", str(_study(tmp_path)))
    assert res.returncode == 0, res.stderr
    assert f"Price: {p.words()}." in res.stdout
    js = cli_inprocess("plan", str(_study(tmp_path)), "--json")
    import json

    assert json.loads(js.stdout)["price"]["multiple"] == pytest.approx(list(p.multiple))


def test_an_unknown_full_run_names_the_key_that_fixes_it(tmp_path):
    res = cli_inprocess("plan", str(_study(tmp_path, prompts=None)))
    assert res.returncode == 0, res.stderr
    assert "Price: this study's price in units of your run is unknown" in res.stdout
    assert "set budget.full_run.prompts" in res.stdout
    cpu = cli_inprocess("plan", str(ROOT / "studies/tiny-cpu.yaml"))
    assert "no full run to compare with" in cpu.stdout and "budget.full_run.max_steps" in cpu.stdout


def test_a_share_budget_becomes_gpu_hours_of_the_full_run(tmp_path):
    path = _study(tmp_path, extra=", budget_gpu_hours: 0.5x")
    study = load_study(path)
    assert study.study.budget_gpu_hours == "0.5x"
    resolve_budget(study)
    full = estimate_trial(study).full_run_gpu_hours
    assert isinstance(study.study.budget_gpu_hours, RunShare) and study.study.budget_gpu_hours == pytest.approx(0.5 * full[0])
    assert f"budget 0.5x your run = {0.5 * full[0]:,.1f} GPU-h" in price_line(study, estimate_trial(study), planned_price(study))
    res = cli_inprocess("plan", str(path))
    assert f"GPU-hour budget: 0.5x your run = {0.5 * full[0]:,.1f} GPU-h" in res.stdout, res.stdout
    bad = cli_inprocess("plan", str(_study(tmp_path, extra=", budget_gpu_hours: half", name="b")))
    assert bad.returncode == 2 and "nor a share of the full run" in bad.stderr
    unpriced = cli_inprocess("plan", str(_study(tmp_path, prompts=None, extra=", budget_gpu_hours: 0.5x", name="u")))
    assert unpriced.returncode == 0 and "GPU-hour budget: 0.5x of the full run, whose GPU-hours are not known" in unpriced.stdout


def test_warmup_in_steps():
    """A recipe's warmup_ratio arrives as warmup_steps below 1 (config/recipes/merge.py); tests/test_warmup_rule.py
    checks the rule against transformers and every caller."""
    w = {"warmup_steps": 0.1}
    assert warmup_steps(w, 283) == 29 and warmup_steps({"warmup_steps": 0.03}, 500) == 15
    assert warmup_steps({"warmup_steps": 40}, 283) == 40 and warmup_steps({}, 283) == 0 and warmup_steps(w, None) is None


def _printed_price(stdout: str) -> str:
    m = re.search(r"^wrote \S+: (.*)$", stdout, re.M)
    assert m, stdout
    return m.group(1)


def test_init_fits_the_budget_and_prints_the_price_plan_prints(tmp_path):
    out = tmp_path / "fit.yaml"
    res = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--budget", "1x",
                        "--branch-from", "warmup", "--out", str(out))
    assert res.returncode == 0, res.stderr
    said = _printed_price(res.stdout)
    plan = cli_inprocess("plan", str(out))
    assert f"Price: {said}." in plan.stdout  # init's figure is plan's
    study = load_study(out)
    p = planned_price(study)
    assert p.multiple[1] <= 1.0 and said == p.words() and said.startswith("this study costs at most")
    # what it resolves at that price, in init's words and plan's alike
    resolves = re.search(r"^Resolves: (at \S+ your run this study tells apart differences of \S+ or more)", res.stdout, re.M)
    assert resolves and resolves.group(1) in plan.stdout
    # a design that decides: the elimination race on, at least 3 seeds, the screen first (its cost included)
    k = len(study.generations())
    assert study.study.racing.design == "elimination" and study.study.racing.first_round_seeds == MIN_SEEDS and k >= 2
    assert MIN_SEEDS <= len(study.study.seeds) <= seeds_to_decide(k, 1.1) and study.file.screen is not None
    assert p.screen is not None and 0 < p.screen[1] <= 0.05 and "the screen before any training" in said
    # the arms branch at the end of the recipe's warmup (3% of 500 steps), each branch 10+ steps, no longer than 100
    assert study.budget.branch_from == "warmup" and branch_step(study) == warmup_steps(study.trainer, 500) == 15
    assert 10 <= study.budget.max_steps <= 100
    assert p.branching is not None and p.branching.step == 15 and p.branching.prefixes == len(study.study.seeds)
    assert "per seed one shared prefix of 15 steps, counted once" in said
    # --branch-from none: every trial from step 0, trained past the warmup, and dearer for it
    scratch = tmp_path / "scratch.yaml"
    res = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--budget", "1x",
                        "--branch-from", "none", "--out", str(scratch))
    assert res.returncode == 0, res.stderr
    plain = load_study(scratch)
    assert plain.budget.branch_from is None and planned_price(plain).branching is None
    assert warmup_steps(plain.trainer, 500) < plain.budget.max_steps <= 100
    written = yaml.safe_load(out.read_text())
    assert written["search"]["temperature"] == 1.0  # the recipe's, fixed: the study decides G
    assert written["study"]["baseline"]["num_generations"] == 14 and written["search"]["num_generations"] == [7, 14, 28]


def test_a_budget_that_buys_no_deciding_confirm_stage_writes_the_screen_alone(tmp_path):
    out = tmp_path / "screen.yaml"
    res = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--budget", "0.3x",
                        "--branch-from", "none", "--out", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "confirm: false" in text and "Design: the screen alone" in text
    assert "Resolves: nothing: the study is the screen alone" in res.stdout
    assert "The study is the screen alone (screen.confirm: false): no arm is trained." in res.stdout
    study = load_study(out)
    assert planned_price(study).multiple[1] <= 0.3 and planned_price(study).trials == 0
    # what the confirm stage would cost, said in the file: switched on, the plan prices it so, a deciding study
    cost = float(re.search(r"costs at most (\S+?)x of your run; to train it", " ".join(text.split("\n# "))).group(1))
    on = load_study(out, ["screen.confirm=true"])
    assert 0.3 < cost == float(fmt_multiple(planned_price(on).multiple[1])[:-1]) and len(on.study.seeds) >= MIN_SEEDS
    # a min_effect the budget cannot resolve: the screen alone too, never a design with fewer seeds than it needs
    strict = tmp_path / "strict.yaml"
    res = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--min-effect", "0.02",
                        "--out", str(strict))
    assert res.returncode == 0, res.stderr
    assert "confirm: false" in strict.read_text()


def test_init_refuses_a_run_it_cannot_price_unless_told(tmp_path):
    res = cli_inprocess("init", "--from", str(DEMO), "--gpus", "8", "--vllm", "server", "--out", str(tmp_path / "s.yaml"))
    assert res.returncode == 2 and "--full-run-prompts" in res.stderr and "--full-run-steps" in res.stderr
    assert "--unpriced" in res.stderr and "'AI-MO/NuminaMath-TIR' is read from the hub" in res.stderr
    assert not list(tmp_path.iterdir())
    with pytest.raises(StudyError, match="--full-run-prompts"):
        write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server"), tmp_path / "s.yaml")
    # either flag prices it; --unpriced writes it without a price, and says so
    priced = load_study(write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server", full_run_steps=283), tmp_path / "a.yaml"))
    assert planned_price(priced).multiple[1] <= 0.5
    rows = load_study(write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server", full_run_prompts=NUMINA_TIR_TRAIN_PROMPTS),
                                  tmp_path / "b.yaml"))
    assert estimate_trial(rows).full_run_steps == 283 and planned_price(rows).multiple[1] <= 0.5
    out = write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server", unpriced=True), tmp_path / "c.yaml")
    assert "not priced (--unpriced)" in out.read_text() and planned_price(load_study(out)).multiple is None


def test_budget_none_writes_the_design_that_decides_at_min_effect_at_its_price(tmp_path):
    out = write_study(InitAnswers(recipe=CODE, gpus=8, vllm="server", budget="none"), tmp_path / "any.yaml")
    study = load_study(out)
    k = len(study.generations())
    assert k == 3 and len(study.study.seeds) == seeds_to_decide(3, 1.1) and study.budget.max_steps == 100
    assert study.budget.branch_from is None and planned_price(study).multiple[0] > 1  # from step 0, at its price
    with pytest.raises(StudyError, match="nor `none`"):
        write_study(InitAnswers(recipe=CODE, gpus=8, vllm="server", budget="half"), tmp_path / "bad.yaml")
    with pytest.raises(StudyError, match=r"--min-effect: 2 is not a reward difference inside the reward's range \(0, 1.1\)"):
        write_study(InitAnswers(recipe=CODE, gpus=8, vllm="server", min_effect=2.0), tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()


def test_run_refuses_a_share_budget_nothing_prices_before_anything_runs(tmp_path):
    path = tmp_path / "cpu.yaml"
    out = tmp_path / "run"
    path.write_text((ROOT / "studies/tiny-cpu.yaml").read_text())
    res = cli_inprocess("run", str(path), "--set", f"study.output_dir={out}", "--set", "study.budget_gpu_hours=0.5x")
    assert res.returncode == 2 and "study.budget_gpu_hours" in res.stderr and "'0.5x' is a share of the full run" in res.stderr
    assert "budget.full_run.max_steps" in res.stderr and not out.exists()  # nothing started, nothing written


def test_a_branched_study_counts_each_seeds_prefix_once():
    # 3 arms x 4 seeds of 20-step branches, one 30-step prefix per seed: 4 prefixes, not 12 (one per arm and seed)
    assert study_total(12, (2.0, 3.0), 4, (1.5, 2.0)) == (12 * 2.0 + 4 * 1.5, 12 * 3.0 + 4 * 2.0)
    assert study_total(12, (2.0, 3.0)) == (24.0, 36.0)  # from scratch: no prefix
    assert study_total(12, None) is None and study_total(12, (2.0, 3.0), 4, None) is None  # a prefix priced unknown
    how = Branching(30, 4, 20)
    steps = price(12, study_h=None, full_run_h=None, study_steps=12 * 20 + 4 * 30, full_run_steps=1000,
                  no_hours="a CPU study", branching=how)
    assert steps.multiple == (0.36, 0.36)
    assert "per seed one shared prefix of 30 steps, counted once (4 prefixes), then each arm's branch of 20 steps" in steps.words()
    assert steps.as_dict()["branching"] == {"branch_step": 30, "prefixes": 4, "branch_steps": 20}
    hours = price(12, study_h=(30.0, 30.0), full_run_h=(100.0, 100.0), study_steps=None, full_run_steps=None,
                  branching=how)
    assert hours.words() == ("this study costs 0.3x your run (30 of 100 GPU-h; per seed one shared prefix of 30 steps, "
                             "counted once (4 prefixes), then each arm's branch of 20 steps from there)")


def test_plan_prices_a_branched_study_with_one_prefix_per_seed(tmp_path):
    scratch = load_study(_study(tmp_path, name="s"))
    path = _study(tmp_path, name="b")
    path.write_text(path.read_text().replace("budget: {max_steps: 50", "budget: {branch_from: 40, max_steps: 50"))
    branched = load_study(path)
    assert branch_step(branched) == 40
    est = estimate_trial(branched)
    p = planned_price(branched, est)
    # 2 arms x 3 seeds of 50-step branches, and 3 prefixes of 40 steps: each GPU-hour end is trials + prefixes
    assert p.trials == 6 and p.branching == Branching(40, 3, 50)
    per, full, prefix = est.gpu_hours, est.full_run_gpu_hours, prefix_estimate(branched, 40).gpu_hours
    assert prefix[1] < per[1]  # 40 steps cost less than 50, start-up included in both
    assert p.study_h == pytest.approx((6 * per[0] + 3 * prefix[0], 6 * per[1] + 3 * prefix[1]))
    assert p.multiple[1] == pytest.approx(max(p.study_h[0] / full[0], p.study_h[1] / full[1]))
    plain = planned_price(scratch)
    assert plain.branching is None and plain.multiple[1] < p.multiple[1]  # the prefixes are paid on top of 6 trials
    res = cli_inprocess("plan", str(path))
    assert res.returncode == 0, res.stderr
    assert f"Price: {p.words()}." in res.stdout and "counted once (3 prefixes)" in res.stdout
    # the GPU time line adds the same prefixes once, and `run`'s first line is the same price
    assert f"{fmt_range(*p.study_h)} for 6 trials and 3 shared prefixes of 40 steps (one per seed" in res.stdout
    assert price_line(branched, estimate_trial(branched), planned_price(branched)) == f"Price: {p.words()}."


def test_a_min_effect_is_the_smallest_bechhofer_tells_apart_at_those_seeds():
    for k, n in ((2, 5), (3, 4), (5, 9)):
        e = effect_for_seeds(k, n)
        assert bechhofer_seeds(k, e, 0.05, 0.95) <= n < bechhofer_seeds(k, e * 0.98, 0.05, 0.95) + 1
        assert seeds_to_decide(k, 1.0, e) <= n
    assert effect_for_seeds(2, 6) <= 0.05 < effect_for_seeds(2, 5)  # the default effect needs 6 seeds for 2 arms


def _ended(number: int, role: str, hours: float):
    import datetime as dt

    from optuna.distributions import IntDistribution
    from optuna.trial import FrozenTrial, TrialState

    start = dt.datetime(2026, 1, 1)
    return FrozenTrial(number=number, state=TrialState.COMPLETE, value=0.5, datetime_start=start,
                       datetime_complete=start + dt.timedelta(hours=hours), params={"seed": 0},
                       distributions={"seed": IntDistribution(0, 10)}, user_attrs={record.ROLE: role}, system_attrs={},
                       intermediate_values={}, trial_id=number)


def test_the_spent_price_counts_a_prefix_once_and_not_as_a_baseline_trial(tmp_path):
    path = _study(tmp_path, name="b")
    path.write_text(path.read_text().replace("budget: {max_steps: 50", "budget: {branch_from: 40, max_steps: 50"))
    study = load_study(path)
    ran = [_ended(0, "prefix", 0.5), _ended(1, "baseline", 1.0), _ended(2, "num_generations=7", 1.0)]
    p = spent_price(study, ran)
    full = estimate_trial(study).full_run_gpu_hours
    assert p.trials == 2 and p.study_h == pytest.approx((2.5 * 8, 2.5 * 8))  # wall time x 8 GPUs, the prefix once
    assert p.multiple == pytest.approx((20 / full[1], 20 / full[0]))
    assert p.branching == Branching(40, 1, 50) and "spent" in p.words() and "counted once (1 prefix)" in p.words()
    cpu = path.read_text().replace("gpus: 8, vllm: {mode: server}", "gpus: 0").replace("[7, 14]", "[4, 8]")
    (tmp_path / "cpu.yaml").write_text(cpu.replace("name: b,", "name: c,"))
    on_cpu = load_study(tmp_path / "cpu.yaml")
    steps = spent_price(on_cpu, ran)  # no GPU-hours: 2 branches of 50 steps + 1 prefix of 40
    assert steps.basis == "optimizer steps"
    assert steps.multiple[0] == pytest.approx((2 * 50 + 40) / estimate_trial(on_cpu).full_run_steps)


def test_an_elimination_race_is_priced_at_its_maximum_and_at_the_mean_seeds_it_spends():
    """Issue 51: a race's budget is planned on the mean seeds it spends (stats/elimination.race_cost: the costlier of
    tied arms and one arm ahead by min_effect), said beside the planned maximum; other designs keep the maximum."""
    from grpo_ablate.stats.elimination import race_cost
    from grpo_ablate.plan.price import PLANNING_SD, race_share

    over = ["study.sampler=grid", "num_generations=[2, 4, 8]", "temperature=1.0", f"study.seeds={list(range(20))}",
            "study.min_effect=0.05", "study.racing={design: elimination, confidence: 0.9, first_round_seeds: 5}",
            "budget.full_run={max_steps: 500}"]
    study = load_study(str(ROOT / "studies/tiny-cpu.yaml"), over)
    share, why = race_share(study)
    cost = race_cost(3, 0.05, PLANNING_SD * 2**0.5, 0.9, 5, 20)
    assert share == pytest.approx(cost.planning / 20) and 0 < share < 1 and cost.planning == max(cost.tied, cost.least_favourable)
    p = planned_price(study)
    assert p.at_most and p.expected == pytest.approx(share)
    assert "costs at most" in p.words() and "(expected " in p.words() and "mean seeds the race spends" in p.words()
    group = load_study(str(ROOT / "studies/tiny-cpu.yaml"), [o for o in over if "racing" not in o]
                       + ["study.racing={design: group_sequential, confidence: 0.9, first_round_seeds: 3}"])
    assert race_share(group) is None and planned_price(group).expected is None
