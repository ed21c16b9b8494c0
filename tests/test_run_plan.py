"""One run plan: `run` resolves the study once (plan/cells.py resolve_plan) and nothing in the run resolves it again.

    pytest tests/test_run_plan.py

A part of the run that re-derived the plan (its cells, baseline, branch step, estimate) could read another
advise.json, probe.json or dataset than the rest of the run did, and disagree with it about the study.
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import FrozenInstanceError

import pytest

from helpers import ROOT, write_study

import grpo_ablate.commands.run  # noqa: F401 - loaded, so its names are among those counted
from grpo_ablate.config import load_study
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.files.advise_file import load_advice
from grpo_ablate.plan.branching import branch_step
from grpo_ablate.plan.cells import baseline_arm, study_plan
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.study.runner import run_study

PACKAGE = ROOT / "grpo_ablate"

STUDY = """\
study:
  name: run-plan
  output_dir: {out}
  sampler: ablation
  seeds: [0]
  workers: 1
model: {{name_or_path: builtin:tiny}}
data: {{task: addition, num_prompts: 64}}
trainer: {{learning_rate: 2.0e-4, per_device_train_batch_size: 16, max_completion_length: 6, beta: 0.0}}
search: {{num_generations: [2, 4]}}
budget: {{max_steps: 2}}
"""

# what the plan resolves; none of it may run again once the run has started
RESOLVERS = [resolve_plan, study_plan, baseline_arm, branch_step, estimate_trial, load_advice]


def _count_everywhere(monkeypatch: pytest.MonkeyPatch, func, counts: dict[str, list[str]], phase: list[str]) -> None:
    """Replace `func` under every name the package's loaded modules hold it by; each call is recorded with the phase."""

    @functools.wraps(func)
    def counted(*args, **kwargs):
        counts.setdefault(func.__name__, []).append(phase[0])
        return func(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("grpo_ablate"):
            for attr, value in list(vars(module).items()):
                if value is func:
                    monkeypatch.setattr(module, attr, counted)


@pytest.mark.slow
def test_run_resolves_its_plan_once_and_nothing_in_the_run_resolves_it_again(study_here, monkeypatch, tmp_path):
    counts: dict[str, list[str]] = {}
    phase = ["command"]
    for func in RESOLVERS:
        _count_everywhere(monkeypatch, func, counts, phase)

    @functools.wraps(run_study)
    def marked(*args, **kwargs):
        phase[0] = "run"
        try:
            return run_study(*args, **kwargs)
        finally:
            phase[0] = "command"

    monkeypatch.setattr("grpo_ablate.commands.run.run_study", marked)
    study = write_study(tmp_path, STUDY.format(out=tmp_path / "out"))
    res = study_here("run", str(study), "--no-report", CUDA_VISIBLE_DEVICES="")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "[trial 1] completed" in res.stdout  # both arms trained: the run went all the way
    assert counts["resolve_plan"] == ["command"]  # once, by the command
    during = {name: len([p for p in phases if p == "run"]) for name, phases in counts.items()}
    assert all(n == 0 for n in during.values()), f"re-resolved while the study ran: {during}"


def _plan_defaults(tree: ast.AST) -> list[str]:
    """`function(arg)` for each parameter named plan* (or typed with a plan) whose default is None."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        positional = a.posonlyargs + a.args
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        for arg, default in pairs:
            typed = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if isinstance(default, ast.Constant) and default.value is None and (
                    arg.arg.startswith("plan") or "StudyPlan" in typed):
                out.append(f"{node.name}({arg.arg})")
    return out


def test_no_function_takes_a_plan_that_may_be_left_out():
    """A `plan=None` default invites a re-resolution mid-run (`plan = resolve_plan(study) if plan is None`)."""
    found = {str(p.relative_to(ROOT)): hits for p in sorted(PACKAGE.rglob("*.py"))
             if (hits := _plan_defaults(ast.parse(p.read_text())))}
    assert found == {}


def test_the_check_finds_a_plan_that_may_be_left_out():
    tree = ast.parse("def f(study, plan: 'StudyPlan | None' = None): ...\ndef g(x, *, cells: StudyPlan | None = None): ...")
    assert _plan_defaults(tree) == ["f(plan)", "g(cells)"]
    assert _plan_defaults(ast.parse("def h(study, plan, other=None): ...")) == []


def test_the_plan_is_frozen(tmp_path):
    plan = resolve_plan(load_study(ROOT / "studies" / "tiny-cpu.yaml", [f"output_dir={tmp_path}"]))
    assert plan.trial_count == len(plan.cells) == len(plan.first) and plan.cells[0].arm == plan.baseline
    with pytest.raises(FrozenInstanceError):
        plan.trial_count = 0  # type: ignore[misc]
