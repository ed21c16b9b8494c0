"""Value ranges from one place (grpo_ablate/core/bounds.py), generated across and beyond each range.

Every reader asks the same table: the study schema (a searched range of 10^8 values once hung
validate at 11 GB), probe.json / advise.json / summary.json (NaN seconds, G=0, a negative batch),
the reward wrapper (1e308 overflowed the group mean and was logged as no reward, exit 0), the
cost estimate (a model named "-0B" divided by zero in plan), and the budget check (max_steps: 1
cannot give the default objective its two reward rows).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import MINIMAL_STUDY, cli_inprocess, watchdog
from grpo_ablate.core.bounds import BOUNDS, MAX_SEARCHED_VALUES, REWARD_ROWS_NEEDED
from grpo_ablate.config import StudyError, load_study

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_any_number = (st.integers(-(2**40), 2**40) | st.floats(allow_nan=True, allow_infinity=True)
               | st.sampled_from([0, 1, 2, 65536, 65537, 10**8, 2**24, 2**24 + 1, -1, 1e308, -1e308]))


def _study(folder: Path, extra: str = "") -> Path:
    path = folder / "study.yaml"
    path.write_text(MINIMAL_STUDY.replace("  name: t\n", f"  name: t\n  output_dir: {folder / 'out'}\n") + extra)
    return path


@SETTINGS
@given(low=st.integers(-10, 2**31), span=st.integers(0, 2**31), step=st.integers(1, 10**6))
def test_a_searched_range_of_any_size_is_answered_quickly(tmp_path_factory, low, span, step):
    folder = tmp_path_factory.mktemp("range")
    high = low + span
    with watchdog(60):  # an honest answer takes a second or two; 10^8 values took minutes and 11 GB
        code, out, err = cli_inprocess("validate", str(_study(folder)), "--set",
                                       f"search.num_generations={{low: {low}, high: {high}, step: {step}}}")
    assert code in (0, 2) and "Traceback" not in err, err
    count = (high - low) // step + 1
    inside = BOUNDS["num_generations"].problem(low) is None and BOUNDS["num_generations"].problem(high) is None
    if count > MAX_SEARCHED_VALUES or not inside:
        assert code == 2 and "search.num_generations" in err, err


@SETTINGS
@given(key=st.sampled_from(["num_generations", "generation_batch_size", "seconds_per_step", "peak_memory_mb",
                            "samples_per_second", "steps", "wall_seconds"]),
       value=_any_number)
def test_probe_json_numbers_outside_their_range_are_refused(tmp_path_factory, key, value):
    from grpo_ablate.files.owned import Owner
    from grpo_ablate.files.probe_file import Probe, ProbePoint, save_probe

    folder = tmp_path_factory.mktemp("probe")
    study_path = _study(folder)
    study = load_study(study_path)
    point = ProbePoint(num_generations=2, generation_batch_size=8, fits=True, outcome="completed", steps=2,
                       seconds_per_step=1.0, peak_memory_mb=100.0, samples_per_second=4.0, wall_seconds=3.0)
    save_probe(study.output_dir, Probe(owner=Owner.of(study), points=[point], total_seconds=3.0))
    path = study.output_dir / "probe.json"
    data = json.loads(path.read_text())
    data["points"][0][key] = value
    path.write_text(json.dumps(data, allow_nan=True))
    code, out, err = cli_inprocess("plan", str(study_path))
    assert "Traceback" not in err and code in (0, 2), err
    bound = {"num_generations": BOUNDS["num_generations"], "generation_batch_size": BOUNDS["generation_batch_size"],
             "peak_memory_mb": BOUNDS["megabytes"], "samples_per_second": BOUNDS["rate"]}.get(key, BOUNDS["seconds"])
    bad = bound.problem(value) is not None or (key in ("num_generations", "generation_batch_size", "steps")
                                               and not isinstance(value, int))
    if key == "steps":
        bad = not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10**9
    if bad:
        assert code == 2 and "probe.json" in err, (key, value, err)


@SETTINGS
@given(values=st.lists(_any_number, min_size=2, max_size=16))
def test_a_reward_the_group_mean_cannot_hold_fails_the_reward_never_becomes_no_reward(values):
    from grpo_ablate.trainer.rewards import RewardFunctionError, _validated

    try:
        out = _validated(values, len(values), "r")
    except RewardFunctionError as e:
        assert any(isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))
                   and BOUNDS["reward"].problem(float(v)) for v in values), (values, str(e))
        return
    scored = [v for v in out if v is not None]
    assert all(v is not None or (isinstance(x, float) and math.isnan(x)) for v, x in zip(out, values))
    if scored:  # what TRL computes from them: finite
        assert math.isfinite(statistics.fmean(scored)) and math.isfinite(statistics.pstdev(scored) if len(scored) > 1 else 0.0)


@SETTINGS
@given(size=st.sampled_from(["0", "0.0", "-1", "1e400", "0.000001", "1.5", "70", "1000000"]))
def test_a_model_size_outside_the_range_is_unknown_not_a_crash(tmp_path_factory, size):
    from grpo_ablate.core.cost import model_parameters

    folder = tmp_path_factory.mktemp("model")
    model = folder / f"Tiny-{size}B"
    model.mkdir()
    n, why = model_parameters(str(model))
    assert n is None or BOUNDS["parameters"].problem(n) is None, (n, why)
    study = _study(folder).read_text().replace("builtin:tiny", str(model))
    (folder / "study.yaml").write_text(study + "hardware: {gpus: 1}\n")
    code, out, err = cli_inprocess("plan", str(folder / "study.yaml"))
    assert "Traceback" not in err and "ZeroDivisionError" not in err, err


@pytest.mark.parametrize("config", [{"hidden_size": 0, "num_hidden_layers": 0, "vocab_size": 0},
                                    {"hidden_size": -8, "num_hidden_layers": 2, "vocab_size": 10}])
def test_a_config_json_giving_an_impossible_size_is_unknown(tmp_path, config):
    from grpo_ablate.core.cost import model_parameters

    (tmp_path / "config.json").write_text(json.dumps(config))
    n, why = model_parameters(str(tmp_path))
    assert n is None and "unknown" in why


@SETTINGS
@given(max_steps=st.integers(1, 6), spg=st.sampled_from([None, 1, 2, 4, 8]), ga=st.sampled_from([None, 1, 2, 4]),
       iters=st.sampled_from([None, 1, 2, 3]),
       metric=st.sampled_from(["reward_per_hour", "reward_gain", "stability_variance", "samples_per_second"]))
def test_a_budget_too_short_for_the_objective_is_refused_by_validate(tmp_path_factory, max_steps, spg, ga, iters, metric):
    """num_iterations counts: TRL generates every steps_per_generation x num_iterations micro-steps."""
    folder = tmp_path_factory.mktemp("budget")
    trainer = {k: v for k, v in (("steps_per_generation", spg), ("gradient_accumulation_steps", ga),
                                 ("num_iterations", iters)) if v}
    extra = (f"trainer: {json.dumps(trainer)}\n" if trainer else "")
    path = _study(folder, extra)
    sets = [f"budget.max_steps={max_steps}", f"study.objectives=[{{metric: {metric}}}]"]
    try:
        load_study(path, sets)
        refused = ""
    except StudyError as e:
        refused = str(e)
    need = REWARD_ROWS_NEEDED.get(metric, 0)
    # the rows by hand: a round at micro-steps 0, every, 2 every, ...; an optimizer step is ga micro-steps
    every, a = (spg or ga or 1) * (iters or 1), ga or 1
    rows = len({m // a for m in range(0, max_steps * a, every)})
    if rows < need:
        assert "budget.max_steps" in refused and metric in refused, refused
    else:
        assert "budget.max_steps" not in refused, refused


def test_max_steps_1_with_the_default_objective_is_refused(tmp_path):
    code, out, err = cli_inprocess("validate", str(_study(tmp_path)), "--set", "budget.max_steps=1")
    assert code == 2 and "budget.max_steps" in err and "reward_per_hour" in err, err


# every count a user types into a study file, at a value only a typo gives (an exponent too many); issue 52 item 7
_TYPED_COUNTS = {
    "budget.max_steps": 10**26, "budget.completions": 10**20, "budget.tokens": 10**20, "study.workers": 10**8,
    "study.n_trials": 10**9, "study.max_retry": 10**6, "study.max_consecutive_failures": 10**7,
    "study.checkpoint_steps": 10**12, "data.num_prompts": 10**14, "data.max_samples": 10**14,
    "data.max_prompt_tokens": 10**12, "hardware.num_processes": 10**8, "hardware.gpus": 10**8,
    "hardware.memory_limit_mb": 10**18, "budget.full_run.max_steps": 10**26, "evaluation.num_prompts": 10**14,
}


@pytest.mark.parametrize("key, value", sorted(_TYPED_COUNTS.items()))
def test_a_count_only_a_typo_gives_is_refused_naming_its_key(tmp_path, key, value):
    code, out, err = cli_inprocess("validate", str(_study(tmp_path)), "--set", f"{key}={value}")
    assert code == 2 and f"{key}: " in err and "less than or equal to" in err, err


@pytest.mark.parametrize("flag, value, words", [("--workers", "100000000", "parallel trials on one machine"),
                                                ("--n-trials", "10000000000", "trials in one study"),
                                                ("--workers", "0", "must lie in [1, 1024]")])
def test_a_count_on_the_command_line_is_bounded_too(tmp_path, flag, value, words):
    code, out, err = cli_inprocess("run", str(_study(tmp_path)), flag, value)
    assert code == 2 and flag in err and words in err, err
