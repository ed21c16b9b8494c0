"""advise: the zero-spread law over varying difficulty, the prediction, and the real CLI.

    pytest tests/test_advise.py                 # the fit and the law on values; bad input exits 2
    pytest -m slow tests/test_advise.py         # real sampling on the tiny model: deterministic, --enqueue
"""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest

from grpo_ablate.cli import main
from grpo_ablate.config import load_study
from grpo_ablate.preflight.advise import predict
from grpo_ablate.preflight.difficulty import fit_beta_binomial, mean_p_zero_spread, zero_spread_beta, zero_spread_empirical


def _study_file(tmp_path: Path, gens: str = "[2, 4, 8]", sampler: str = "tpe") -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(f"""\
        study:
          name: advise-test
          output_dir: {tmp_path / 'run'}
          sampler: {sampler}
          n_trials: 6
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
        """))
    return path


def test_closed_form_matches_the_integral_and_exceeds_the_mean_p_curve():
    from scipy import integrate, stats

    a, b = 0.4, 0.6  # U-shaped: many prompts almost always or almost never solved
    for g in (2, 4, 8, 16):
        numeric = integrate.quad(lambda p: (p**g + (1 - p) ** g) * stats.beta.pdf(p, a, b), 0, 1)[0]
        assert zero_spread_beta(g, a, b) == pytest.approx(numeric, rel=1e-6)
        assert zero_spread_beta(g, a, b) > mean_p_zero_spread(g, a / (a + b)) + 0.2
    # nearly equal prompts (the carry drill's a=27, b=122): the mean-p curve is already close
    assert zero_spread_beta(8, 27, 122) == pytest.approx(mean_p_zero_spread(8, 27 / 149), abs=0.02)


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


def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys):
    path = _study_file(tmp_path)
    assert main(["advise", str(path), "--k", "1"]) == 2
    assert "K >= 2" in capsys.readouterr().err
    assert main(["advise", str(path), "--prompts", "0"]) == 2
    assert "empty prompt set" in capsys.readouterr().err
    assert main(["advise", str(_study_file(tmp_path, gens="[1]"))]) == 2
    assert "num_generations" in capsys.readouterr().err


@pytest.mark.slow
def test_advise_is_deterministic_and_enqueue_puts_the_shortlist_first(tmp_path, capsys):
    import optuna

    path = _study_file(tmp_path)
    args = ["advise", str(path), "--k", "8", "--prompts", "16", "--seed", "3"]
    assert main([*args, "--enqueue"]) == 0
    first = json.loads((tmp_path / "run" / "advise.json").read_text())
    assert (tmp_path / "run" / "advise.png").stat().st_size > 1000
    assert main(args) == 0
    second = json.loads((tmp_path / "run" / "advise.json").read_text())
    for key in ("fits", "predictions", "shortlist", "always_solved", "never_solved"):
        assert first[key] == second[key]
    ostudy = optuna.load_study(study_name="advise-test", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "run" / "study.journal"))))
    waiting = [t for t in ostudy.get_trials() if t.state == optuna.trial.TrialState.WAITING]
    shortlist = [(s["num_generations"], s["temperature"]) for s in first["shortlist"]]
    queued = [t.system_attrs["fixed_params"] for t in waiting]
    assert [(q["num_generations"], q["temperature"]) for q in queued] == shortlist
    assert all(t.user_attrs["role"] == "advise" for t in waiting)
