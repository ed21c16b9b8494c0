"""`grpo-ablate validate` runs every check a trial start runs, short of training (issue 41 item 3).

The issue's smoke-test failure: a study `init` wrote for an 8-GPU node (vLLM server mode), run on a
CPU with the documented overrides (the built-in model, no GPUs), failed every trial at its start
("vLLM server mode needs a model folder", then "vLLM is not available and `use_vllm` is set") while
validate said OK. Validate now says what those trials would hit; unedited, the node study passes,
with notes that the node needs vLLM and DeepSpeed, and the way to try it here (`smoke`).
The suite sets GRPO_ABLATE_VALIDATE=quick (conftest); these tests run the whole check.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from grpo_ablate.commands.init import write_study
from grpo_ablate.plan.draft import InitAnswers
from grpo_ablate.trainer.trial_check import check_spec
from helpers import ROOT, tiny_spec

DEMO = ROOT / "tests/fixtures/open-r1/qwen2.5-1.5b-instruct-grpo-config_demo.yaml"
NO_VLLM = importlib.util.find_spec("vllm") is None
NO_DEEPSPEED = importlib.util.find_spec("deepspeed") is None


def _node_study(tmp_path: Path) -> Path:
    return write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server", unpriced=True), tmp_path / "study.yaml")


def test_what_the_trial_builds_before_its_first_step_is_checked(tmp_path):
    """In-process, the child's own function: GRPOConfig, the optimizer and the scheduler, as a trial builds them."""
    assert check_spec(tiny_spec(tmp_path / "ok"), gpu=False, cuda_here=False) == []
    scheduler = check_spec(tiny_spec(tmp_path / "s", lr_scheduler_type="cosine_with_min_lr"), gpu=False, cuda_here=False)
    assert len(scheduler) == 1 and "cosine_with_min_lr" in scheduler[0] and "min_lr_rate" in scheduler[0]
    fixed = tiny_spec(tmp_path / "f", lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1})
    assert check_spec(fixed, gpu=False, cuda_here=False) == []
    optim = check_spec(tiny_spec(tmp_path / "o", optim="no_such_optimizer"), gpu=False, cuda_here=False)
    assert len(optim) == 1 and "GRPOConfig refuses" in optim[0] and "no_such_optimizer" in optim[0]
    weights = check_spec(tiny_spec(tmp_path / "w", reward_weights=[1.0, 2.0], rewards=["addition"]), gpu=False,
                         cuda_here=False)
    assert weights == ["trainer.reward_weights has 2 values for 1 reward(s)"]


@pytest.mark.slow
@pytest.mark.skipif(not (NO_VLLM and NO_DEEPSPEED), reason="the notes are about a machine without vLLM and DeepSpeed")
def test_an_init_written_node_study_passes_with_what_the_node_needs(tmp_path, cli_full):
    res = cli_full("validate", str(_node_study(tmp_path)))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "checked the study file and each arm's trial start" in res.stdout
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: ") and "qwen2.5" not in line]
    assert any("8 GPU(s) per trial and this machine has 0" in n and "grpo-ablate smoke" in n for n in notes), notes
    assert any("`vllm` package" in n and "the machine the trials run on must have it" in n for n in notes), notes


@pytest.mark.slow
@pytest.mark.skipif(not NO_VLLM, reason="a machine without vLLM: the trials' start fails on it")
def test_the_documented_cpu_overrides_are_refused_with_what_every_trial_would_hit(tmp_path, cli_full):
    """The overrides the old docs gave (built-in model, no GPU), plus a scheduler the trial creates at step 0."""
    res = cli_full("validate", str(_node_study(tmp_path)), "--set", "model.name_or_path=builtin:tiny",
                   "--set", "hardware.gpus=0", "--set", "trainer.lr_scheduler_type=cosine_with_min_lr")
    assert res.returncode == 2, res.stdout[-2000:]
    err = res.stderr
    assert "hardware.vllm.mode: vLLM server mode serves a model folder or hub id" in err
    assert "needs the `vllm` package, which this environment lacks: every trial would fail at its start" in err
    assert "grpo-ablate smoke STUDY" in err
    # each arm, as init chose them: three G values and a second temperature (the recipe leaves its own to a default)
    assert err.count("cannot be created at the first step") == 4
    assert "OK:" not in res.stdout


@pytest.fixture
def cli_full(monkeypatch):
    """`grpo-ablate ARGS` in this process with the whole check (not the suite's quick one)."""
    from helpers import cli_inprocess

    monkeypatch.delenv("GRPO_ABLATE_VALIDATE", raising=False)
    return cli_inprocess


def test_quick_checks_the_study_file_alone(tmp_path):
    from helpers import cli_inprocess

    res = cli_inprocess("validate", str(_node_study(tmp_path)), "--quick")
    assert res.returncode == 0 and "checked the study file)" in res.stdout
