"""advise: the zero-spread law over varying difficulty, the prediction, and the real CLI.

    pytest tests/test_advise.py                 # the fit and the law on values; bad input exits 2
    pytest -m slow tests/test_advise.py         # real sampling on the tiny model: deterministic, --enqueue
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.commands.cli import main
from grpo_ablate.config import load_study
from grpo_ablate.preflight.advise import (Measured, Prediction, _measured, advise_figure, advise_text, plot_advice, predict,
                                         write_completions)
from grpo_ablate.preflight.difficulty import fit_beta_binomial, zero_spread_empirical
from grpo_ablate.stats.zero_spread import zero_spread, zero_spread_beta
from grpo_ablate.study.search.encoding import encode_arm
from grpo_ablate.core.schedule import generations_data, parse_generations
from grpo_ablate.core.vocab import METRICS_FILE, Arm
from grpo_ablate.records import trial_record as record
from helpers import write_study



def _study_file(tmp_path: Path, gens: str = "[2, 4, 8]", sampler: str = "tpe", seeds: str = "[0]") -> Path:
    path = write_study(tmp_path, f"""\
        study:
          name: advise-test
          output_dir: {tmp_path / 'run'}
          sampler: {sampler}
          n_trials: {6 if sampler == "tpe" else "null"}
          seeds: {seeds}
        model:
          name_or_path: builtin:tiny
        data:
          task: addition
          num_prompts: 200
        trainer:
          per_device_train_batch_size: 16
          max_completion_length: 6
          beta: 0.0
        search:
          num_generations: {gens}
          temperature: [0.7, 1.0]
        budget:
          max_steps: 10
        """)
    return path


def test_closed_form_matches_the_integral_and_exceeds_the_mean_p_curve():
    from scipy import integrate, stats

    a, b = 0.4, 0.6  # U-shaped: many prompts almost always or almost never solved
    for g in (2, 4, 8, 16):
        numeric = integrate.quad(lambda p, g=g: (p**g + (1 - p) ** g) * stats.beta.pdf(p, a, b), 0, 1)[0]
        assert zero_spread_beta(g, a, b) == pytest.approx(numeric, rel=1e-6)
        assert zero_spread_beta(g, a, b) > zero_spread(g, a / (a + b)) + 0.2
    # nearly equal prompts (the carry drill's a=27, b=122): the mean-p curve is already close
    assert zero_spread_beta(8, 27, 122) == pytest.approx(zero_spread(8, 27 / 149), abs=0.02)


def test_beta_binomial_fit_recovers_the_difficulty_spread():
    rng = random.Random(0)
    k = 16
    successes = [sum(rng.random() < p for _ in range(k)) for p in (rng.betavariate(0.5, 1.5) for _ in range(2000))]
    fit = fit_beta_binomial(successes, k)
    assert fit.a == pytest.approx(0.5, rel=0.2) and fit.b == pytest.approx(1.5, rel=0.2)


def test_non_binary_rewards_use_each_prompts_own_spread():
    assert zero_spread_empirical(2, [[0.5, 0.5], [0.0, 1.0]]) == pytest.approx((1 + 0.5) / 2)


def test_prediction_ranks_and_lists_prompts_no_g_can_use(tmp_path):
    study = load_study(_study_file(tmp_path))
    rng = random.Random(1)
    prompts = [f"p{i}" for i in range(30)]
    rows = [[1.0] * 8 if i < 5 else [0.0] * 8 if i < 10 else [float(rng.random() < 0.4) for _ in range(8)] for i in range(30)]
    samples = {"prompts": prompts, "temperatures": [0.7, 1.0], "k": 8, "rewards": [rows, rows], "completion_tokens": 30 * 8 * 2 * 3}
    advice = predict(study, samples)
    assert advice.always_solved == prompts[:5] and advice.never_solved == prompts[5:10]
    assert advice.ranked_by == "informative_groups_per_million_tokens" and len(advice.shortlist) == 3
    z = {p.num_generations: p.zero_spread for p in advice.predictions if p.temperature == 1.0}
    assert z[2] > z[4] > z[8] > 0.2  # a third of the prompts never vary: the share stays high
    assert all(p.zero_spread > p.mean_p_zero_spread for p in advice.predictions)
    assert predict(study, samples).to_dict() == advice.to_dict()


def test_a_task_nothing_solves_gets_g_will_not_help_and_its_completions(tmp_path):
    study = load_study(_study_file(tmp_path))
    prompts = [f"{i}*7=" for i in range(64)]
    rows = [[0.0] * 8 if i < 61 else [1.0] + [0.0] * 7 for i in range(64)]  # 61 never solved, 3 rarely
    texts = [[f"{i}{j}" for j in range(8)] for i in range(64)]
    samples = {"prompts": prompts, "temperatures": [0.7, 1.0], "k": 8, "rewards": [rows, rows],
               "completions": [texts, texts], "completion_tokens": 64 * 8 * 2 * 3}
    path = write_completions(tmp_path / "run", samples)
    advice = predict(study, samples, completions_file=str(path))
    assert advice.answer.startswith("G will not help here") and advice.shortlist == []
    assert "61 of 64 prompts were never solved" in advice.answer and str(path) in advice.answer
    text = advise_text(advice)
    assert "G will not help here" in text and "shortlist" not in text
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 2 * 64 and lines[0]["prompt"] == "0*7=" and lines[0]["temperature"] == 0.7
    assert lines[-1]["completions"][0] == {"text": "630", "reward": 1.0}
    # a learnable set keeps its ranked shortlist and no such answer
    rng = random.Random(1)
    mixed = [[float(rng.random() < 0.4) for _ in range(8)] for _ in range(64)]
    ok = predict(study, {**samples, "rewards": [mixed, mixed]})
    assert ok.answer == "" and len(ok.shortlist) == 3


def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys):
    path = _study_file(tmp_path)
    assert main(["advise", str(path), "--k", "1"]) == 2
    assert "argument --k: must lie in [2, " in capsys.readouterr().err  # the flag, the range and why (bounds.py)
    assert main(["advise", str(path), "--prompts", "0"]) == 2
    assert "argument --prompts: must lie in [1, " in capsys.readouterr().err
    assert main(["advise", str(_study_file(tmp_path, gens="[1]"))]) == 2
    assert "num_generations" in capsys.readouterr().err


@pytest.mark.slow
def test_advise_is_deterministic_and_enqueue_puts_the_shortlist_first(tmp_path, capsys):
    import optuna

    path = _study_file(tmp_path)
    args = ["advise", str(path), "--k", "8", "--prompts", "16", "--seed", "3"]
    assert main([*args, "--enqueue"]) == 0
    assert "[advise] T=" in capsys.readouterr().err  # the sampler's progress reaches the user
    first = json.loads((tmp_path / "run" / "advise.json").read_text())
    assert (tmp_path / "run" / "advise.png").stat().st_size > 1000
    # the sampled completions with their rewards, for checking the reward function by eye
    sampled = [json.loads(x) for x in (tmp_path / "run" / "advise" / "completions.jsonl").read_text().splitlines()]
    assert len(sampled) == 16 * 2 and all(len(r["completions"]) == 8 for r in sampled)
    assert {c["reward"] for r in sampled for c in r["completions"]} <= {0.0, 1.0}
    assert first["completions_file"].endswith("completions.jsonl") and first["answer"] == ""
    assert main(args) == 0
    second = json.loads((tmp_path / "run" / "advise.json").read_text())
    for key in ("fits", "predictions", "shortlist", "always_solved", "never_solved"):
        assert first[key] == second[key]
    ostudy = optuna.load_study(study_name="advise-test", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "run" / "study.journal"))))
    waiting = [t for t in ostudy.get_trials() if t.state == optuna.trial.TrialState.WAITING]
    study = load_study(path)
    shortlist = [Arm(s["num_generations"], s["generation_batch_size"], s["temperature"]) for s in first["shortlist"]]
    # queued in the params ledger.suggest_cell draws (G as its ordinal rank), so the sampler runs these very arms
    assert [record.queued_params(t) for t in waiting] == [encode_arm(a, study.space, study.temperatures())[0]
                                                                for a in shortlist]
    assert [record.cell_key(t) for t in waiting] == [f"{a.key}|seed0" for a in shortlist]
    assert all(record.role_of(t) == "advise" for t in waiting)


@pytest.mark.slow
def test_advise_enqueue_adds_an_arm_to_an_ablation_that_plan_counts_and_run_runs(study_here, tmp_path, capsys):
    import optuna

    path = write_study(tmp_path, f"""\
        study:
          name: advise-ablation
          output_dir: {tmp_path / 'run'}
          sampler: ablation
          baseline: {{num_generations: 8, temperature: 0.7}}
          seeds: [0]
          workers: 1   # one warm session for the 4 trials (a second costs a process start)
          trial_timeout: 300
        model:
          name_or_path: builtin:tiny
        data:
          task: addition
          num_prompts: 64
        trainer:
          per_device_train_batch_size: 16
          max_completion_length: 6
          beta: 0.0
        search:
          num_generations: [2, 8]
          temperature: [0.7, 1.0]
        budget:
          max_steps: 3
        """)

    def n_trials() -> int:
        assert main(["plan", str(path), "--json"]) == 0
        return json.loads(capsys.readouterr().out)["n_trials"]

    assert n_trials() == 3  # baseline G=8 T=0.7, G=2, T=1.0
    # sampled at T=1.0 only: the ablation holds G=8 there, and the small G is predicted to pay off
    assert main(["advise", str(path), "--k", "4", "--prompts", "8", "--temperature", "1.0", "--enqueue"]) == 0
    assert "enqueued 1 trial(s)" in capsys.readouterr().out
    added = json.loads((tmp_path / "run" / "advise.json").read_text())["advised_arms"]
    assert added == [{"num_generations": 2, "generation_batch_size": 16, "temperature": 1.0}]
    assert n_trials() == 4
    run = study_here("run", str(path), "--no-report")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    ostudy = optuna.load_study(study_name="advise-ablation", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "run" / "study.journal"))))
    done = [t for t in ostudy.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(ostudy.get_trials()) == len(done) == 4
    assert sorted((record.role_of(t), record.arm_of(t).key) for t in done) == [
        ("advise", "G2xB16|T1"), ("baseline", "G8xB16|T0.7"), ("num_generations=2", "G2xB16|T0.7"),
        ("temperature=1", "G8xB16|T1")]


def _advice(study):
    rng = random.Random(2)
    rows = [[float(rng.random() < 0.5) for _ in range(8)] for _ in range(20)]
    samples = {"prompts": [f"p{i}" for i in range(20)], "temperatures": [0.7, 1.0], "k": 8, "rewards": [rows, rows],
               "completion_tokens": 20 * 8 * 2 * 3}
    return predict(study, samples)


def _finished_trial(tmp_path: Path, number: int, g: int | dict, temperature: float, zero_std: list[float], outcome: str = "completed"):
    """A trial as the runner leaves it (G as Arm.as_dict stores it: an int, a schedule's numbers): the cell's attrs, the outcome, the trial folder with metrics.jsonl."""
    import optuna

    trial_dir = tmp_path / "run" / "trials" / f"{number:05d}"
    trial_dir.mkdir(parents=True)
    (trial_dir / METRICS_FILE).write_text("".join(
        json.dumps({"step": i + 1, "reward": 0.5, "frac_reward_zero_std": z}) + "\n" for i, z in enumerate(zero_std)))
    attrs = {"num_generations": g, "generation_batch_size": 16, "temperature": temperature, "seed": 0, "role": "tpe",
             "outcome": outcome, "trial_dir": str(trial_dir)}
    return optuna.trial.create_trial(values=[0.5], user_attrs=attrs)


def test_the_plot_overlays_what_the_studys_trials_measured(tmp_path):
    import optuna

    study = load_study(_study_file(tmp_path))
    advice = _advice(study)
    assert _measured(study) == []  # no study yet: nothing read, no journal created
    assert not Path(study.storage_url).exists()
    Path(study.storage_url).parent.mkdir(parents=True)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(study.storage_url))
    ostudy = optuna.create_study(study_name="advise-test", storage=storage)
    ostudy.add_trial(_finished_trial(tmp_path, 0, 4, 0.7, [0.5, 0.25]))
    ostudy.add_trial(_finished_trial(tmp_path, 1, 8, 1.0, [0.1, 0.3]))
    ostudy.add_trial(_finished_trial(tmp_path, 2, 2, 1.0, [0.9], outcome="oom"))  # ran out of memory: not a measure
    ostudy.add_trial(_finished_trial(tmp_path, 3, generations_data(parse_generations("4→8@40%")), 1.0, [0.4]))  # a schedule has no single G
    measured = _measured(study)
    assert measured == [Measured(4, 0.7, pytest.approx(0.375)), Measured(8, 1.0, pytest.approx(0.2))]
    fig = advise_figure(advice, measured)
    ax = fig.axes[0]
    dots = {c.get_label(): [tuple(xy) for xy in c.get_offsets()] for c in ax.collections}
    assert dots == {"measured, T=0.7": [(4, pytest.approx(0.375))], "measured, T=1": [(8, pytest.approx(0.2))]}
    assert plot_advice(advice, tmp_path / "advise.png", measured).stat().st_size > 1000


def _prediction(g: int, b: int, t: float) -> Prediction:
    return Prediction(g, b, t, zero_spread=0.3, mean_p_zero_spread=0.2, informative_groups_per_step=1.0)


def test_enqueue_adds_the_top_arm_to_an_ablation_once_and_queues_the_plan(tmp_path):
    from grpo_ablate.plan.cells import resolved_trial_count, study_plan
    from grpo_ablate.study import ledger
    from grpo_ablate.study.setup import enqueue_shortlist, open_study

    path = _study_file(tmp_path, gens="[2, 4]", sampler="ablation", seeds="[0, 1]")
    study = load_study(path)
    assert resolved_trial_count(study) == 2 * 3  # baseline (G=4, T=1.0), G=2, T=0.7
    ostudy, _ = open_study(study, completions_per_trial(study))  # as `advise --enqueue` opens it, before any `run`
    assert enqueue_shortlist(ostudy, study, [_prediction(2, 16, 0.7), _prediction(4, 16, 1.0)]) == 2
    study = load_study(path)
    assert resolved_trial_count(study) == 2 * 4
    assert ledger.plan_ready(ostudy)  # `run` finds the plan queued instead of waiting for it
    queued = [record.cell_key(t) for t in ostudy.get_trials()]
    assert queued == [c.key for c in study_plan(study)]  # seed by seed, the new arm last on each seed
    assert [c for c in study_plan(study) if c.role == "advise"][0].arm.key == "G2xB16|T0.7"
    # the same advice again, or an arm the ablation already has: nothing more
    assert enqueue_shortlist(ostudy, study, [_prediction(2, 16, 0.7)]) == 0
    assert enqueue_shortlist(ostudy, study, [_prediction(2, 16, 1.0)]) == 0
    assert len(ostudy.get_trials()) == resolved_trial_count(load_study(path)) == 8


def test_an_empty_shortlist_says_why_and_a_huge_beta_fit_is_put_in_words(tmp_path):
    """Issue 28: settings that no longer match an earlier probe emptied the shortlist without a reason, and a fit
    of equally hard prompts printed as Beta(a=1692218.67, b=7193891.85)."""
    from grpo_ablate.files.owned import Owner
    from grpo_ablate.files.probe_file import Probe, ProbePoint, save_probe

    study = load_study(_study_file(tmp_path, gens="[4, 8]"))
    # the probe ran other batches than the study's feasible ones: none of the study's pairs is a probed fit
    save_probe(study.output_dir, Probe(owner=Owner.of(study), points=[
        ProbePoint(4, 1024, True, "completed"), ProbePoint(8, 1024, True, "completed")]))
    rng = random.Random(2)
    rows = [[float(rng.random() < 0.2) for _ in range(8)] for _ in range(40)]
    advice = predict(study, {"prompts": [f"p{i}" for i in range(40)], "temperatures": [0.7, 1.0], "k": 8,
                             "rewards": [rows, rows], "completion_tokens": 0})
    assert advice.shortlist == [] and not advice.answer and advice.left_out_by_probe > 0
    text = advise_text(advice)
    assert "shortlist: empty: all" in text and "probe.json" in text and "rerun `grpo-ablate probe`" in text
    from grpo_ablate.preflight.advise import beta_words

    words = beta_words(1692218.67, 7193891.85, 0.19)
    assert "Beta(a=1.69e+06, b=7.19e+06)" in words and "all about equally hard" in words
    assert beta_words(1.5, 3.25, 0.32) == "per-prompt success ~ Beta(a=1.5, b=3.25), mean p 0.32"
