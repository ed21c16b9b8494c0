"""The parent-child contract (grpo_ablate/contract/): its typed sections keep the study file's keys and defaults, so
spec.json keeps its shape, and a key the child does not know is refused, never dropped."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, fields

import pytest
from pydantic import BaseModel

from grpo_ablate.config.schema import (BudgetSection, DataSection, EvaluationSection, FullRunSection, HardwareSection,
                                       ModelSection, RewardSpec, ScriptSection, VllmSection)
from grpo_ablate.core.cost import FullRun
from grpo_ablate.contract.spec import (BudgetSpec, DataSpec, EvaluationSpec, HardwareSpec, ModelSpec, RewardEntry,
                                       ScriptSpec, TrialSpec, VllmSpec, section_from)
from grpo_ablate.study.trial_spec import spec_from_sections

PAIRS = [(ModelSpec, ModelSection), (DataSpec, DataSection), (BudgetSpec, BudgetSection), (HardwareSpec, HardwareSection),
         (VllmSpec, VllmSection), (EvaluationSpec, EvaluationSection), (RewardEntry, RewardSpec), (FullRun, FullRunSection)]


def _default(f):
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


@pytest.mark.parametrize("section,schema", PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_each_section_has_the_study_files_keys_and_defaults(section, schema) -> None:
    assert [f.name for f in fields(section)] == list(schema.model_fields)
    for f in fields(section):
        default = _default(f)
        if default is MISSING:  # required on both sides
            assert schema.model_fields[f.name].is_required(), f"{section.__name__}.{f.name}"
            continue
        expected = schema.model_fields[f.name].get_default(call_default_factory=True)
        if isinstance(expected, BaseModel):
            assert asdict(default) == expected.model_dump(), f.name
        else:
            assert default == expected, f"{section.__name__}.{f.name}"


def test_a_script_section_is_the_schemas_plus_what_the_parent_resolves() -> None:
    assert set(ScriptSection.model_fields) <= {f.name for f in fields(ScriptSpec)}
    assert {f.name for f in fields(ScriptSpec)} - set(ScriptSection.model_fields) == {"recipe", "trainer"}


def test_spec_json_keeps_the_study_files_section_shape(tmp_path) -> None:
    spec = spec_from_sections(tmp_path / "t", data={"task": "addition"}, budget={"max_steps": 3},
                              hardware={"vllm": {"mode": "colocate"}}, evaluation={"points": 2},
                              checkpoint={"every": 2, "keep": False, "final": True})
    raw = json.loads(spec.to_json())
    assert raw["hardware"]["vllm"] == {"mode": "colocate", "server_gpus": 1, "port": 8000}
    assert raw["data"] == DataSection(task="addition").model_dump()
    assert raw["evaluation"] == EvaluationSection(points=2).model_dump()
    assert raw["checkpoint"] == {"every": 2, "keep": False, "final": True}
    assert raw["rewards"] == [] and again_rewards(tmp_path) == [{"name": "format", "weight": 1.0, "args": None}]
    again = TrialSpec.from_json(spec.to_json())
    assert again == spec and isinstance(again.hardware.vllm, VllmSpec) and again.checkpoint is not None


def again_rewards(tmp_path) -> list:
    return json.loads(spec_from_sections(tmp_path / "r", data={"task": "addition"}, rewards=["format"]).to_json())["rewards"]


def test_a_section_key_the_child_does_not_know_is_refused_by_name(tmp_path) -> None:
    raw = json.loads(spec_from_sections(tmp_path / "t", data={"task": "addition"}).to_json())
    raw["hardware"]["vllm"]["surprise"] = 1
    with pytest.raises(ValueError, match=r"hardware.vllm has unknown keys \['surprise'\]"):
        TrialSpec.from_json(json.dumps(raw))
    with pytest.raises(ValueError, match="model must be an object"):
        section_from(ModelSpec, "builtin:tiny", "model")


def test_the_full_run_crosses_typed() -> None:
    """budget.full_run reaches the child as core/cost.py's FullRun (spec.json keeps its keys), an unknown key refused."""
    budget = BudgetSpec(full_run={"max_steps": 300, "num_generations": 16})
    assert budget.full_run == FullRun(max_steps=300, num_generations=16)
    assert asdict(budget)["full_run"] == {"max_steps": 300, "num_train_epochs": None, "num_generations": 16, "prompts": None}
    with pytest.raises(ValueError, match=r"budget.full_run has unknown keys \['steps'\]"):
        BudgetSpec(full_run={"steps": 300})
