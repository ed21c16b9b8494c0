"""`grpo-ablate smoke`: the CPU variant of any study, derived by the tool (issue 41 item 3).

A study `init` writes from an Open R1 recipe for an 8-GPU node (vLLM server, bf16, G up to 16) used to
fail every trial of the documented CPU smoke test; smoke derives the variant itself, unedited.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from grpo_ablate.commands.init import write_study
from grpo_ablate.plan.draft import InitAnswers
from grpo_ablate.commands.smoke import smoke_overrides
from grpo_ablate.config import load_study
from helpers import ROOT

DEMO = ROOT / "tests/fixtures/open-r1/qwen2.5-1.5b-instruct-grpo-config_demo.yaml"


def _node_study(tmp_path: Path) -> Path:
    study = write_study(InitAnswers(recipe=DEMO, gpus=8, vllm="server", unpriced=True), tmp_path / "study.yaml")
    rows = [{"prompt": f"What is {a} + {a + 1}?", "solution": f"$\\boxed{{{2 * a + 1}}}$"} for a in range(24)]
    (tmp_path / "sample.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return study


def test_the_cpu_variant_of_a_node_study_is_derived_and_valid(tmp_path):
    path = _node_study(tmp_path)
    original = load_study(path)
    assert original.hardware.vllm.mode == "server" and original.trainer["use_vllm"] is True
    sets = smoke_overrides(original, tmp_path / "smoke", tmp_path / "sample.jsonl")
    smoke = load_study(path, sets)  # validates: what the node study would refuse on a CPU is turned off
    gens = yaml.safe_load(path.read_text())["search"]["num_generations"]
    assert smoke.model.name_or_path == "builtin:tiny" and smoke.hardware.vllm.mode == "none"
    assert smoke.trainer["use_vllm"] is False and smoke.trainer["bf16"] is False and smoke.world_size == 1
    assert smoke.trainer["per_device_train_batch_size"] == math.lcm(*gens)  # every arm's G divides the batch
    assert smoke.study.seeds == [original.study.seeds[0]] and smoke.budget.max_steps == 2
    assert smoke.output_dir == tmp_path / "smoke" and smoke.study.storage is None
    assert smoke.rewards == original.rewards and smoke.data.chat_template == original.data.chat_template
    assert smoke.file.evaluation is not None and smoke.file.evaluation.num_prompts == 4
    assert path.read_text() == (tmp_path / "study.yaml").read_text()  # the study file is never written


def test_arms_whose_batch_cannot_fit_one_process_are_refused_with_the_fix(tmp_path):
    path = _node_study(tmp_path)
    original = load_study(path, ["search.num_generations=[7, 64]"])
    with pytest.raises(ValueError, match="least common multiple"):
        smoke_overrides(original, tmp_path / "smoke")


@pytest.mark.slow
def test_smoke_runs_a_study_init_wrote_from_an_open_r1_recipe(study_here, tmp_path):
    """The study as init wrote it for the node, one arm (G=7, T=1.0: the recipe's own run) for time."""
    path = _node_study(tmp_path)
    res = study_here("smoke", str(path), "--dataset", str(tmp_path / "sample.jsonl"), "--steps", "1",
                     "--set", "search.num_generations=[7]", "--set", "search.temperature=[1.0]")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Smoke test passed: every arm trained 1 step(s)" in res.stdout
    assert "G=7, batch 7, T=1: trained" in res.stdout
