"""The study file documents itself: every schema field has a description, and `explain`, the JSON
Schema and the key table (docs/study-file.md; the README links it) are all read from those
descriptions; every GRPOConfig field of the installed TRL has an `explain` answer from TRL's own metadata."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest
import yaml
from pydantic import BaseModel

from grpo_ablate.config import schema
from grpo_ablate.commands.common import key_choices
from grpo_ablate.config.keys import find_key, json_schema, key_docs, key_table
from grpo_ablate.config.trainer_keys import trainer_key_docs
from helpers import ROOT, cli_env, cli_inprocess

sys.path.insert(0, str(ROOT / "tools"))
import docs_blocks  # noqa: E402 - tools/docs_blocks.py, which writes the docs' key table


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


@pytest.mark.parametrize("page", docs_blocks.KEY_TABLE_PAGES, ids=lambda p: p.name)
def test_the_key_table_in_the_docs_is_the_one_the_schema_generates(page):
    found = docs_blocks.block_of(page.read_text(encoding="utf-8"), docs_blocks.KEYS_START, docs_blocks.KEYS_END)
    assert found, f"{page.name} lost its generated study-file key table markers"
    assert key_table(key_choices()) in found and found == docs_blocks.key_table_block(), (
        f"{page.name}'s study-file key table differs from config/schema.py: run `python tools/docs_blocks.py`")


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


@pytest.mark.slow  # a child interpreter imports TRL (~10-20 s here), and ~300 explain calls (~10 s)
def test_every_study_file_key_and_every_grpo_config_field_has_an_explain_answer():
    """Every key of the key table, and every field of the installed TRL's GRPOConfig as `trainer.<field>` with TRL's own
    type, default and help (read here in a child process of its own, not through grpo-ablate's reader)."""
    for doc in key_docs(key_choices()):
        code, out, err = cli_inprocess("explain", doc.key)
        assert code == 0 and out.splitlines()[0] == doc.key, (doc.key, err)
    truth = json.loads(subprocess.run(
        [sys.executable, "-c", "import dataclasses, json; from trl import GRPOConfig; print(json.dumps({f.name: "
         "[f.metadata.get('help') or '', repr(f.default)] for f in dataclasses.fields(GRPOConfig)}))"],
        capture_output=True, text=True, env=cli_env(), check=True).stdout.strip().splitlines()[-1])
    assert len(truth) > 150
    for name, (help_text, default) in truth.items():
        code, out, err = cli_inprocess("explain", f"trainer.{name}")
        assert code == 0 and out.splitlines()[0] == f"trainer.{name}", (name, err)
        assert " ".join(help_text.split()) in " ".join(out.split()), name
        if default in ("0.0", "1e-06", "8", "True", "False", "None"):
            shown = {"True": "true", "False": "false", "None": "null"}.get(default, default)
            assert f"  default: {shown}\n" in out, (name, out)


def test_a_trainer_field_says_where_the_recipe_trl_differs_and_what_the_study_does():
    beta = cli_inprocess("explain", "trainer.beta")
    assert beta.returncode == 0 and "  default: 0.0\n" in beta.stdout
    assert "TRL 0.18.0 (Open R1's recipes run it): 0.04" in beta.stdout  # trl_facts/trl_defaults.json, Open R1's pin
    gone = cli_inprocess("explain", "trainer.max_prompt_length")  # a field TRL 0.18 had and 1.16 lacks
    assert gone.returncode == 0 and "  default: 512\n" in gone.stdout and "data.max_prompt_tokens" in gone.stdout
    assert "searched by the study (search.temperature)" in cli_inprocess("explain", "trainer.temperature").stdout
    typo = cli_inprocess("explain", "trainer.learnig_rate")
    assert typo.returncode == 2 and "did you mean trainer.learning_rate" in typo.stderr
    section = cli_inprocess("explain", "trainer")
    assert section.returncode == 0 and "grpo-ablate explain trainer.<field>" in section.stdout
    names = [d.key for d in trainer_key_docs()]
    assert len(names) == len(set(names)) and "trainer.adafactor" in names  # TRL 0.18's fields, explained from the table
