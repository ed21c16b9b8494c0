"""The study file documents itself: every schema field has a description, and `explain`, the JSON
Schema and the README's key table are all read from those descriptions."""

from __future__ import annotations

import inspect
import json
import re

import pytest
import yaml
from pydantic import BaseModel

from grpo_ablate.config import schema
from grpo_ablate.commands.common import key_choices
from grpo_ablate.config.keys import find_key, json_schema, key_docs, key_table
from helpers import ROOT, cli_inprocess

README_TABLE = re.compile(r"<!-- study-file keys:[^\n]*-->\n(.*?)<!-- end of study-file keys -->", re.S)


def _schema_models() -> list[type[BaseModel]]:
    return [cls for _, cls in inspect.getmembers(schema, inspect.isclass)
            if issubclass(cls, BaseModel) and cls.__module__ == schema.__name__ and cls.model_fields]


def test_every_schema_field_has_a_description():
    fields = [(m.__name__, name, f) for m in _schema_models() for name, f in m.model_fields.items()]
    missing = [f"{m}.{name}" for m, name, f in fields if not (f.description or "").strip()]
    assert not missing, f"give these a Field(description=...) in config/schema.py: {missing}"
    assert len(fields) >= 90  # every section's fields, not a few of them


def test_every_key_of_the_study_file_is_listed_once():
    keys = [d.key for d in key_docs()]
    assert len(keys) == len(set(keys))
    for key in ("study.name", "budget.max_steps", "hardware.vllm.port", "study.racing.method",
                "study.objectives[].metric", "rewards[].weight", "budget.full_run.prompts", "evaluation.points"):
        assert key in keys, key


def test_the_readme_key_table_is_the_one_the_schema_generates():
    found = README_TABLE.search((ROOT / "README.md").read_text())
    assert found, "README.md lost its generated study-file key table markers"
    assert found.group(1) == key_table(key_choices()), (
        "README's study-file key table differs from config/schema.py: paste `grpo-ablate schema --markdown` "
        "between the markers in \"## The study file\"")


def test_a_key_shows_its_type_default_bounds_and_description():
    doc = find_key("budget.max_steps")
    assert (doc.type, doc.default, doc.allowed) == ("int | null", "null", ">= 1, <= 1000000000")
    assert "Optimizer steps per trial" in doc.description
    sampler = find_key("study.sampler")
    assert sampler.allowed.split(", ") == ['"auto"', '"tpe"', '"random"', '"gp"', '"grid"', '"ablation"']
    assert find_key("study.objectives.metric") is not None  # `[]` may be left out
    assert find_key("budget").default == '{"max_steps": 100}'
    with pytest.raises(KeyError, match="budget.max_steps"):
        find_key("budget.max_step")


def test_choices_the_schema_cannot_hold_come_from_the_caller():
    """hardware.launcher is any string in the schema (config cannot see the launcher registry above it);
    the commands pass the registry's names, and every view shows them."""
    assert find_key("hardware.launcher").allowed == ""
    choices = {"hardware.launcher": ["auto", "here", "there"]}
    assert find_key("hardware.launcher", choices).allowed == '"auto", "here", "there"'
    assert '`"auto", "here", "there"`' in key_table(choices)
    assert json_schema(choices)["$defs"]["HardwareSection"]["properties"]["launcher"]["enum"] == ["auto", "here", "there"]
    with pytest.raises(ValueError, match="hardware.launch"):
        key_docs({"hardware.launch": ["auto"]})
    assert key_choices()["hardware.launcher"][0] == "auto"


def test_explain_command_prints_one_key_or_every_key():
    code, out, err = cli_inprocess("explain", "hardware.vllm.mode")
    assert code == 0 and err == ""
    assert out.splitlines()[0] == "hardware.vllm.mode" and '"colocate"' in out and "default: \"none\"" in out
    code, out, _ = cli_inprocess("explain", "hardware.launcher")
    assert code == 0 and 'allowed: "auto", "warm", "process", "slurm"' in out  # the launcher registry's names
    code, out, _ = cli_inprocess("explain", "hardware.vllm")
    assert code == 0 and "hardware.vllm.server_gpus" in out
    code, out, _ = cli_inprocess("explain")
    assert code == 0 and all(d.key in out for d in key_docs())
    code, out, err = cli_inprocess("explain", "budget.maxsteps")
    assert code == 2 and out == "" and "did you mean budget.max_steps" in err


def test_schema_command_writes_a_json_schema_that_accepts_the_shipped_studies(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "study.schema.json"
    code, stdout, _ = cli_inprocess("schema", "--out", str(out))
    assert code == 0 and str(out) in stdout
    written = json.loads(out.read_text())
    assert written == json_schema(key_choices())
    assert written["properties"]["budget"]["description"]
    validator = jsonschema.Draft202012Validator(written)
    for path in sorted((ROOT / "studies").glob("*.yaml")):
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, (path.name, errors)
    bad = {"study": {"name": "t", "sampler": "annealing"}, "data": {"task": "addition"}}
    assert any("annealing" in e.message for e in validator.iter_errors(bad))
    code, stdout, _ = cli_inprocess("schema", "--markdown")
    assert code == 0 and stdout == key_table(key_choices())
    assert not list(validator.iter_errors({"study": {"name": "t"}, "hardware": {"launcher": "slurm"}}))
    assert any("kubernetes" in e.message for e in validator.iter_errors(
        {"study": {"name": "t"}, "hardware": {"launcher": "kubernetes"}}))
