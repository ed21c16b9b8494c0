"""One warmup rule (cost.warmup_steps) for everyone who turns trainer.warmup_steps into optimizer steps.

The child's scheduler is built by transformers (`TrainingArguments.get_warmup_steps` of the full
run, trainer/build.py's prefix schedule); the parent places `budget.branch_from: warmup` there
(plan/branching.py), validate checks that point lies inside the full run (config/validate.py), every
command refuses trials that end inside the warmup (study/warmup.py), init sizes its trials past it
(plan/draft.py), and `plan --commands` shows the warmup the trial's scheduler takes
(trainer/dry_run.py). They used to round a share two ways (ceil of the product, and ceil of the
product less 1e-9): at 0.07 of 100 steps init sized for 8
warmup steps while the run branched at 7, and transformers warmed up for 8.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grpo_ablate.commands.init import write_study
from grpo_ablate.plan.draft import InitAnswers
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.core.cost import warmup_steps
from grpo_ablate.trainer.dry_run import effective
from grpo_ablate.plan.branching import branch_step
from grpo_ablate.plan.design import MIN_STEPS_PAST_WARMUP
from grpo_ablate.study.warmup import inside_warmup
from grpo_ablate.contract.spec import TrialSpec
from helpers import ROOT

TINY = str(ROOT / "studies/tiny-cpu.yaml")
CODE = ROOT / "tests/fixtures/open-r1/qwen2.5-1.5b-instruct-grpo-config_demo_code.yaml"  # max_steps 500, warmup_ratio 0.03


@pytest.fixture(scope="module")
def trl_config():
    """One real GRPOConfig (the class the child builds); each case sets its warmup_steps and asks transformers."""
    trl = pytest.importorskip("trl")
    return trl.GRPOConfig(output_dir="unused", use_cpu=True, report_to="none")


def _rule(warmup, full: int | None) -> int | None:
    return warmup_steps({"warmup_steps": warmup}, full)


def _child(config, warmup: float, full: int) -> int:
    config.warmup_steps = warmup
    return int(config.get_warmup_steps(full))


def test_a_share_is_rounded_up_from_the_product_as_transformers_rounds_it(trl_config):
    assert 0.07 * 100 > 7  # 7.000000000000001: the case where the two roundings parted
    assert _rule(0.07, 100) == _child(trl_config, 0.07, 100) == 8
    assert _rule(0.1, 283) == _child(trl_config, 0.1, 283) == 29
    assert _rule(12, 100) == _child(trl_config, 12, 100) == 12 and _rule(2.5, None) == 2
    assert _rule(0, 100) == _rule(None, 100) == _rule("x", 100) == _rule(True, 100) == warmup_steps({}, 100) == 0
    assert _rule(0.07, None) is None  # a share of a run whose length is unknown


shares = st.one_of(st.floats(min_value=1e-4, max_value=0.9999, allow_nan=False),
                   st.sampled_from([0.01, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.35, 0.55, 0.57, 0.58]))
steps = st.one_of(st.integers(min_value=1, max_value=200), st.floats(min_value=1.0, max_value=200.0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(warmup=st.one_of(shares, steps), full=st.integers(min_value=2, max_value=5000))
@example(warmup=0.07, full=100)  # 7.000000000000001: where the two roundings parted
def test_branching_validate_the_warmup_refusal_and_the_childs_scheduler_count_the_same_warmup(trl_config, warmup, full):
    """Property: for any warmup (a share or a step count) and full run, the branch point plan/branching.py places
    is the warmup transformers builds the trial's scheduler with, and the one `plan --commands` shows for a
    trial whose prefix schedule spans that run (a share only: a step count is passed as given); validate refuses the
    branching study exactly when that point is not inside the full run; and a trial from step 0 that ends at that step is refused as inside the
    warmup (study/warmup.py) while one that ends a step later is not."""
    expected = _rule(warmup, full)
    assert expected == _child(trl_config, warmup, full)
    if warmup < 1:
        shown, _ = effective(TrialSpec("unused", budget={"lr_schedule": "prefix"}), {"max_steps": 1, "warmup_steps": warmup},
                             full)
        assert shown["warmup_steps"] == expected
    run = [f"budget.full_run={{max_steps: {full}}}", f"trainer.warmup_steps={warmup!r}", "trainer.lr_scheduler_type=linear",
           "study.seeds=[0]"]
    try:
        study = load_study(TINY, ["budget.max_steps=2", "budget.branch_from=warmup", *run])
    except StudyError as e:
        words = [p.message for p in e.problems if p.path == "budget.branch_from"]
        assert expected >= full and words == [
            f"the branch point, step {expected}, is not inside the full run's {full} steps "
            "(budget.full_run.max_steps): branch earlier"], e.problems
    else:
        assert expected < full and branch_step(study) == expected
    if expected >= 2:  # a 1-step trial is refused for logging one reward row, before any warmup is asked
        inside = inside_warmup(load_study(TINY, [f"budget.max_steps={expected}", *run]))
        assert inside is not None and f"inside the {expected}-step learning-rate warmup" in inside.message
    assert inside_warmup(load_study(TINY, [f"budget.max_steps={max(2, expected + 1)}", *run])) is None


def test_init_sizes_its_trials_and_places_its_branch_point_by_the_same_warmup(trl_config, tmp_path):
    """init on a recipe that warms up for 0.07 of a 100-step run: the branch point it writes and the trials it sizes
    past the warmup count the 8 steps the scheduler warms up for."""
    recipe = yaml.safe_load(CODE.read_text())
    recipe.update(warmup_ratio=0.07, max_steps=100)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    expected = _child(trl_config, 0.07, 100)
    assert expected == _rule(0.07, 100) == 8

    branched = write_study(InitAnswers(recipe=path, gpus=8, vllm="server", budget="3x", branch="warmup"),
                           tmp_path / "branched.yaml")
    assert f"branched at the end of the recipe's {expected}-step warmup" in branched.read_text()  # init's count
    study = load_study(branched)
    assert study.budget.branch_from == "warmup" and branch_step(study) == expected  # the run's branch point
    scratch = write_study(InitAnswers(recipe=path, gpus=8, vllm="server", budget="3x", branch="none"),
                          tmp_path / "scratch.yaml")
    assert f"past the recipe's {expected}-step warmup" in scratch.read_text()
    study = load_study(scratch)
    assert study.budget.branch_from is None and study.budget.max_steps >= expected + MIN_STEPS_PAST_WARMUP
    assert inside_warmup(study) is None
