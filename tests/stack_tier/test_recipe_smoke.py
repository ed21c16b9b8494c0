"""`smoke` on every Open R1 recipe fixture, unedited: the study `init` writes for an 8-GPU node, its CPU smoke test.

System prompts, DeepSeek's own chat template and the "\\n\\n" that joins a system prompt to a question are all
encoded by the tiny model's tokenizer (trainer/builtin/tokenizer.py format_characters). A recipe whose rewards
import a package that is not here (Open R1's code rewards) is not run: smoke names the install. One arm per
recipe (the recipe's own G), one step, on a local sample of its data: what is checked is that every piece
runs, not what the model learns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, run_cli

from grpo_ablate.commands.init import write_study
from grpo_ablate.plan.draft import InitAnswers

FIXTURES = sorted((ROOT / "tests/fixtures/open-r1").glob("*.yaml"))
EXTERNAL = {"code", "binary_code", "ioi_code", "cf_code", "code_format"}  # Open R1's rewards of its own package


def _node_study(recipe: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    study = write_study(InitAnswers(recipe=recipe, gpus=8, vllm="server", budget="10x", full_run_prompts=10_000),
                        folder / "study.yaml")
    column = yaml.safe_load(recipe.read_text()).get("dataset_prompt_column") or "prompt"  # a sample of its data's shape
    rows = [{column: f"What is {a} + {a + 1}?", "problem": f"What is {a} + {a + 1}?",
             "solution": f"$\\boxed{{{2 * a + 1}}}$"} for a in range(24)]
    (folder / "sample.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return study


@pytest.mark.parametrize("recipe", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_smoke_of_every_open_r1_recipe(recipe, tmp_path):
    values = yaml.safe_load(recipe.read_text())
    rewards = set(values.get("reward_funcs") or [])
    study = _node_study(recipe, tmp_path)
    g = yaml.safe_load(study.read_text())["study"]["baseline"]["num_generations"]
    res = run_cli("smoke", str(study), "--dataset", str(tmp_path / "sample.jsonl"), "--steps", "1",
                  "--set", f"search.num_generations=[{g}]", cwd=tmp_path, timeout=900)
    if rewards & EXTERNAL:
        assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
        assert "cannot be imported here" in res.stdout and "pip install -e '.[code]'" in res.stdout
        assert "trained" not in res.stdout
        return
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Smoke test passed" in res.stdout
    if not recipe.name.startswith("current-deepseek"):
        return
    # unchanged, a rerun reads the trials back; once the data changed, every arm trains again
    rerun = run_cli("smoke", str(study), "--dataset", str(tmp_path / "sample.jsonl"), "--steps", "1",
                    "--set", f"search.num_generations=[{g}]", cwd=tmp_path, timeout=900)
    assert rerun.returncode == 0 and "resumed" in rerun.stdout and "run again" not in rerun.stdout
    with (tmp_path / "sample.jsonl").open("a") as f:
        f.write(json.dumps({"prompt": "What is 100 + 101?", "problem": "x", "solution": "$\\boxed{201}$"}) + "\n")
    changed = run_cli("smoke", str(study), "--dataset", str(tmp_path / "sample.jsonl"), "--steps", "1",
                      "--set", f"search.num_generations=[{g}]", cwd=tmp_path, timeout=900)
    assert changed.returncode == 0 and "its trials run again" in changed.stdout, changed.stdout[-2000:]
