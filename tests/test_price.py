"""The study's price in units of the run it tunes (cost.price, study/price.py), and init fitting a study to it."""

from __future__ import annotations

import pickle
import re

import pytest
import yaml

from helpers import ROOT, cli_inprocess
from grpo_ablate.commands.init import InitAnswers, seeds_to_decide, warmup_steps, write_study
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.cost import RunShare, fmt_multiple, parse_share, price
from grpo_ablate.estimate import estimate_trial
from grpo_ablate.gpu_hours import budget_of
from grpo_ablate.stats.selection import bechhofer_seeds
from grpo_ablate.study.price import planned_price, price_line, resolve_budget

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
    assert f"budget 0.5x your run = {0.5 * full[0]:,.1f} GPU-h" in price_line(study)
    res = cli_inprocess("plan", str(path))
    assert f"GPU-hour budget: 0.5x your run = {0.5 * full[0]:,.1f} GPU-h" in res.stdout, res.stdout
    bad = cli_inprocess("plan", str(_study(tmp_path, extra=", budget_gpu_hours: half", name="b")))
    assert bad.returncode == 2 and "nor a share of the full run" in bad.stderr
    unpriced = cli_inprocess("plan", str(_study(tmp_path, prompts=None, extra=", budget_gpu_hours: 0.5x", name="u")))
    assert unpriced.returncode == 0 and "GPU-hour budget: 0.5x of the full run, whose GPU-hours are not known" in unpriced.stdout


def test_warmup_in_steps():
    assert warmup_steps({"warmup_steps": 0.1}, 283) == 29 and warmup_steps({"warmup_ratio": 0.03}, 500) == 15
    assert warmup_steps({"warmup_steps": 40}, 283) == 40 and warmup_steps({}, 283) == 0


def _printed_price(stdout: str) -> str:
    m = re.search(r"^wrote \S+: (.*)$", stdout, re.M)
    assert m, stdout
    return m.group(1)


def test_init_fits_the_budget_and_prints_the_price_plan_prints(tmp_path):
    out = tmp_path / "fit.yaml"
    res = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--budget", "1x", "--out", str(out))
    assert res.returncode == 0, res.stderr
    said = _printed_price(res.stdout)
    plan = cli_inprocess("plan", str(out))
    assert f"Price: {said}." in plan.stdout  # init's figure is plan's
    study = load_study(out)
    p = planned_price(study)
    assert p.multiple[1] <= 1.0 and said == p.words() and said.startswith("this study costs at most")
    # a design that can decide: the race on, its planned maximum the seeds Bechhofer's design needs for its arms
    k = len(study.generations())
    assert study.study.racing.design == "group_sequential" and k >= 2
    assert len(study.study.seeds) >= bechhofer_seeds(k, 0.05, 0.05, 0.95) == seeds_to_decide(k)
    # the trials leave the recipe's warmup (3% of 500 steps), and train no longer than the default
    assert warmup_steps(study.trainer, 500) < study.budget.max_steps <= 100
    written = yaml.safe_load(out.read_text())
    assert written["search"]["temperature"] == 1.0  # the recipe's, fixed: the study decides G
    assert written["study"]["baseline"]["num_generations"] == 14


def test_a_study_that_cannot_fit_says_what_it_would_take_and_writes_nothing(tmp_path):
    out = tmp_path / "no.yaml"
    res = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--out", str(out))
    assert res.returncode == 2
    assert "no study that can decide fits 0.5x of your run" in res.stderr and "pass --budget" in res.stderr
    assert not out.exists() and not list(tmp_path.iterdir())
    need = re.search(r"pass --budget (\S+) to write it", res.stderr).group(1)
    again = cli_inprocess("init", "--from", str(CODE), "--gpus", "8", "--vllm", "server", "--budget", need,
                          "--out", str(out))
    assert again.returncode == 0, again.stderr  # what it said it would take is enough
    assert planned_price(load_study(out)).multiple[1] <= parse_share(need)


def test_init_cannot_fit_a_budget_it_cannot_price(tmp_path):
    with pytest.raises(StudyError, match="cannot fit 0.5x.*budget.full_run.prompts.*--full-run-prompts"):
        write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server", budget="0.5x"), tmp_path / "s.yaml")
    assert not list(tmp_path.iterdir())


def test_budget_none_writes_the_design_that_can_decide_at_its_price(tmp_path):
    out = write_study(InitAnswers(recipe=CODE, gpus=8, vllm="server", budget="none"), tmp_path / "any.yaml")
    study = load_study(out)
    k = len(study.generations())
    assert k == 3 and len(study.study.seeds) == seeds_to_decide(3) and study.budget.max_steps == 100
    assert planned_price(study).multiple[0] > 1  # priced, not fitted: 24 trials of 100 of 500 steps
    with pytest.raises(StudyError, match="nor `none`"):
        write_study(InitAnswers(recipe=CODE, gpus=8, vllm="server", budget="half"), tmp_path / "bad.yaml")


def test_run_refuses_a_share_budget_nothing_prices_before_anything_runs(tmp_path):
    path = tmp_path / "cpu.yaml"
    out = tmp_path / "run"
    path.write_text((ROOT / "studies/tiny-cpu.yaml").read_text())
    res = cli_inprocess("run", str(path), "--set", f"study.output_dir={out}", "--set", "study.budget_gpu_hours=0.5x")
    assert res.returncode == 2 and "study.budget_gpu_hours" in res.stderr and "'0.5x' is a share of the full run" in res.stderr
    assert "budget.full_run.max_steps" in res.stderr and not out.exists()  # nothing started, nothing written
