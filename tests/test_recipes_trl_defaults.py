"""Defaults from the recipe's own TRL (issue 41 item 1): a table read from the released wheels' source,
and every GRPOConfig field of each Open R1 recipe either what TRL 0.18 would have run or listed by plan."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from helpers import ROOT
from grpo_ablate.config import load_study
from grpo_ablate.config.recipes import NEW_LOSS_SWITCHES, OPEN_R1_STACK, SCRIPT_KEYS, read_recipe
from grpo_ablate.trl_facts.fields import trainer_field_names, trl_default
from grpo_ablate.trl_facts.releases import TABLE_PATH, drift, release_defaults, release_of, same_meaning

FIXTURES = sorted((ROOT / "tests/fixtures/open-r1").glob("*.yaml"))
STUDIES = [ROOT / "studies/recipes/openr1-demo-grpo.yaml", ROOT / "studies/recipes/openr1-style-every-key.yaml"]


def _script():
    spec = importlib.util.spec_from_file_location("trl_defaults", ROOT / "tools/trl_defaults.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_generated_from_the_wheels_with_its_command():
    table = json.loads(TABLE_PATH.read_text())
    assert table["command"].startswith("python tools/trl_defaults.py --release 0.18.0=4.52.3")
    old = release_defaults("0.18.0")
    # what TRL 0.18.0's grpo_config.py says (the hand-typed table had temperature 0.9, which was TRL <= 0.17)
    assert (old["temperature"], old["beta"], old["loss_type"], old["max_completion_length"]) == (1.0, 0.04, "bnpo", 256)
    assert old["max_prompt_length"] == 512 and old["bf16"] is False and old["logging_steps"] == 500
    assert OPEN_R1_STACK.defaults["temperature"] == 1.0 and release_of("0.18") == "0.18.0"


def test_the_installed_trl_is_in_the_table_and_agrees_with_its_own_class():
    """The table's row for the installed TRL matches what its GRPOConfig class reports (a stale table fails)."""
    version = release_of(importlib.metadata.version("trl"))
    assert version, "regenerate: python tools/trl_defaults.py"
    table = release_defaults(version, resolved=False)
    assert set(table) == set(trainer_field_names())
    for key in ("beta", "loss_type", "temperature", "max_completion_length", "logging_steps", "use_bias_correction_kl"):
        assert table[key] == trl_default(key), key


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_the_script_reads_inherited_fields_factories_and_post_init_fills(tmp_path):
    """A base class through a relative import, a TrainingArguments field overridden, a default_factory and a
    `self.x = ... if self.x is None else self.x` fill, parsed without importing anything."""
    trl = _wheel(tmp_path / "trl.whl", {
        "trl/trainer/base_config.py": (
            "from dataclasses import dataclass, field\nfrom transformers import TrainingArguments\n"
            "@dataclass\nclass _Base(TrainingArguments):\n    logging_steps: float = field(default=10)\n"
            "    bf16: bool | None = None\n"
            "    def __post_init__(self):\n        self.bf16 = not (self.fp16) if self.bf16 is None else self.bf16\n"),
        "trl/trainer/grpo_config.py": (
            "from dataclasses import dataclass, field\nfrom .base_config import _Base\n"
            "@dataclass\nclass GRPOConfig(_Base):\n    beta: float = field(default=0.04, metadata={'help': 'x'})\n"
            "    kwargs: dict = field(default_factory=dict)\n    names: list = field(default_factory=lambda: ['a'])\n"
            "    steps: int | None = None\n"
            "    def __post_init__(self):\n        if self.steps is None:\n"
            "            self.steps = self.gradient_accumulation_steps\n")})
    transformers = _wheel(tmp_path / "tf.whl", {"transformers/training_args.py": (
        "from dataclasses import dataclass, field\n@dataclass\nclass TrainingArguments:\n"
        "    logging_steps: float = field(default=500)\n    fp16: bool = False\n    bf16: bool = False\n"
        "    gradient_accumulation_steps: int = 1\n")})
    fields = _script().read_release(trl, transformers)
    assert fields["logging_steps"]["default"] == 10 and fields["logging_steps"]["declared_in"] == "_Base"
    assert fields["bf16"]["default"] is None and fields["bf16"]["resolved"] is True
    assert fields["kwargs"]["default"] == {} and fields["names"]["default"] == ["a"] and fields["beta"]["type"] == "float"
    assert fields["steps"]["resolved"] == 1  # filled from another field: compared as declared when both are None
    assert fields["gradient_accumulation_steps"]["declared_in"] == "TrainingArguments"


def test_drift_between_trl_018_and_the_installed_trl_is_what_the_sources_say():
    version = release_of(importlib.metadata.version("trl"))
    assert version
    changed = {d.name: (d.then, d.now) for d in drift("0.18.0", version) if d.then_has and d.now_has}
    assert changed["beta"] == (0.04, 0.0) and changed["loss_type"] == ("bnpo", "dapo")
    assert changed["bf16"] == (False, True) and changed["gradient_checkpointing"] == (False, True)
    assert "temperature" not in changed and "scale_rewards" not in changed  # True and "group" mean the same
    assert "steps_per_generation" not in changed  # None in both, filled at run time from other fields


def _listed(study: Any, key: str) -> bool:
    return any(re.search(rf"\b{re.escape(key)}\b", str(w)) for w in study.warnings)


def _unexplained(study: Any, recipe: dict[str, Any]) -> list[str]:
    """Fields whose value in the study's trainer section (else the installed TRL's default) is not what TRL 0.18
    would have run with this recipe, and that no note of the study names."""
    then = release_defaults(OPEN_R1_STACK.trl, resolved=False)
    then_run = release_defaults(OPEN_R1_STACK.trl)  # bf16: `not fp16` filled in __post_init__
    installed = release_of(importlib.metadata.version("trl"))
    assert installed
    here = release_defaults(installed, resolved=False)
    here_run = release_defaults(installed)
    bad = []
    for key in sorted({*then, *here}):
        if key in SCRIPT_KEYS and key in recipe:
            continue  # a model or data key: the study's model/data sections carry it
        if key == "reward_weights" and key in recipe:
            assert [r.weight for r in study.rewards] == recipe[key]  # the rewards section carries them
            continue
        if key in here and key in then:
            if key in recipe or key in study.trainer:
                ran = recipe.get(key, then_run[key])
                if same_meaning(key, study.trainer.get(key, here_run[key]), ran):
                    continue
            elif same_meaning(key, then[key], here[key]) or same_meaning(key, then_run[key], here_run[key]):
                continue
        elif key in here and key in NEW_LOSS_SWITCHES and study.trainer.get(key) == NEW_LOSS_SWITCHES[key][0]:
            continue
        if not _listed(study, key):
            bad.append(key)
    return bad


@pytest.mark.parametrize("recipe", FIXTURES + STUDIES, ids=lambda p: p.name)
def test_every_field_is_the_recipes_own_trl_value_or_listed(tmp_path, recipe):
    path = tmp_path / "s.yaml"
    path.write_text(f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'out'}, seeds: [0]}}\n"
                    f"trainer_from: {recipe}\nsearch: {{num_generations: [8, 16]}}\nbudget: {{max_steps: 4}}\n")
    study = load_study(path)
    values = read_recipe(recipe).values
    assert _unexplained(study, values) == []
    t = study.trainer
    assert t.get("beta", values.get("beta")) == values.get("beta", 0.04)
    assert t["vllm_importance_sampling_correction"] is False and t["use_bias_correction_kl"] is False
    assert "temperature" not in t or t["temperature"] == values.get("temperature")  # 1.0 in both TRLs


def test_a_trl_cli_recipe_takes_the_trl_its_study_names(tmp_path):
    recipe = ROOT / "studies/recipes/trl-cli-style.yaml"
    path = tmp_path / "s.yaml"
    base = (f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'out'}, seeds: [0]}}\n"
            f"trainer_from: {recipe}\nsearch: {{num_generations: [8, 16]}}\nbudget: {{max_steps: 4}}\n")
    path.write_text(base)
    unknown = load_study(path)
    assert any("set recipe_trl" in str(w) for w in unknown.warnings) and "loss_type" not in unknown.trainer
    path.write_text(base + "recipe_trl: '0.18'\n")
    known = load_study(path)
    values = read_recipe(recipe).values
    assert known.trainer["loss_type"] == "bnpo" and known.trainer["beta"] == 0.0  # TRL 0.18's; the recipe's own
    assert _unexplained(known, values) == []
    path.write_text(base + "recipe_trl: '0.9.9'\n")
    assert any("not a release of the defaults table" in str(w) for w in load_study(path).warnings)


@pytest.mark.slow
def test_plan_commands_passes_the_recipes_trl_values_to_grpoconfig(tmp_path):
    """`plan --commands` computes each arm's GRPOConfig arguments with the trial's own code: the fields set from
    TRL 0.18's defaults reach it (on this CPU machine bf16 is turned off by the hardware check, and listed)."""
    from grpo_ablate.preflight.launch_plan import launch_plan

    recipe = ROOT / "tests/fixtures/open-r1/qwen2.5-1.5b-instruct-grpo-config_demo.yaml"
    path = tmp_path / "s.yaml"
    path.write_text(f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'out'}, seeds: [0]}}\n"
                    f"trainer_from: {recipe}\nsearch: {{num_generations: [8]}}\nbudget: {{max_steps: 4}}\n")
    study = load_study(path)
    kwargs = launch_plan(study)[0]["grpo_config"]
    for key, value in study.trainer.items():
        assert kwargs.get(key) == value or _listed(study, key), key
    assert (kwargs["beta"], kwargs["loss_type"], kwargs["use_bias_correction_kl"],
            kwargs["vllm_importance_sampling_correction"]) == (0.04, "bnpo", False, False)


def test_init_asks_which_trl_a_trl_cli_recipe_was_written_for(tmp_path):
    import yaml

    from grpo_ablate.commands.init import ask_missing, write_study
    from grpo_ablate.plan.draft import InitAnswers

    recipe = ROOT / "studies/recipes/trl-cli-style.yaml"
    asked: list[str] = []
    answers = ask_missing(InitAnswers(recipe=recipe, unpriced=True), ask=lambda q: asked.append(q) or "0.18", interactive=True)
    assert answers.recipe_trl == "0.18" and "TRL version this recipe was written for" in asked[0]
    out = write_study(answers, tmp_path / "s.yaml")
    assert yaml.safe_load(out.read_text())["recipe_trl"] == "0.18"
    assert load_study(out).trainer["loss_type"] == "bnpo"  # TRL 0.18's default, as the recipe meant
    open_r1 = ask_missing(InitAnswers(recipe=FIXTURES[0]), ask=lambda q: pytest.fail(q), interactive=True)
    assert open_r1.recipe_trl is None  # Open R1's recipes say their TRL: nothing to ask


FEBRUARY_DEMO = ROOT / "tests/fixtures/open-r1/qwen2.5-1.5b-instruct-grpo-config_demo.yaml"


def _dated(tmp_path: Path, date: str | None):
    study = tmp_path / "s.yaml"
    study.write_text(f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'o'}, seeds: [0]}}\n"
                     f"trainer_from: {FEBRUARY_DEMO}\nhardware: {{gpus: 8, vllm: {{mode: server}}}}\nsearch: {{num_generations: [7, 14]}}\n"
                     + (f"recipe_date: {date}\n" if date else ""))
    return load_study(study)


def test_an_open_r1_recipe_dated_before_the_pin_takes_its_day_s_trl_defaults(tmp_path):
    """Open R1 pinned TRL 0.18.0 on 2025-05-28; the February-2025 demo ran on TRL's main of its day: temperature 0.9
    and a per-sequence mean loss (TRL 0.15's compute_loss, today's loss_type "grpo"), where 0.18's are 1.0 and bnpo.
    plan's notes name the release and why."""
    february = _dated(tmp_path, "2025-02-15")
    assert february.trainer["loss_type"] == "grpo" and february.trainer.get("beta") == 0.04
    assert february.study.baseline.get("temperature") == 0.9 or february.fixed_temperature() == 0.9
    notes = " ".join(str(w) for w in february.warnings)
    assert "Open R1 (2025-02-15)" in notes and "TRL 0.15.2" in notes and "recipe_date 2025-02-15" in notes
    june = _dated(tmp_path, "2025-06-01")
    assert june.trainer["loss_type"] == "bnpo" and (june.study.baseline.get("temperature") == 1.0
                                                    or june.fixed_temperature() == 1.0)
    assert "on or after 2025-05-28" in " ".join(str(w) for w in june.warnings)


def test_a_recipe_s_date_comes_from_its_git_checkout(tmp_path):
    """No recipe_date: the last commit that touched the recipe file, in the user's clone, dates it."""
    import subprocess

    from grpo_ablate.config.recipes.stack import recipe_date

    repo = tmp_path / "open-r1"
    repo.mkdir()
    (repo / "recipe.yaml").write_text(FEBRUARY_DEMO.read_text())
    env = {"GIT_AUTHOR_DATE": "2025-02-10T12:00:00", "GIT_COMMITTER_DATE": "2025-02-10T12:00:00",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    for argv in (["git", "init", "-q"], ["git", "add", "recipe.yaml"], ["git", "commit", "-qm", "recipe"]):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    found, source = recipe_date(repo / "recipe.yaml")
    assert str(found) == "2025-02-10" and "git checkout" in source
    assert recipe_date(tmp_path / "elsewhere.yaml")[0] is None


def test_the_field_cache_is_keyed_on_transformers_too(tmp_path):
    """GRPOConfig inherits TrainingArguments: a cache written beside another transformers (the vLLM tier's
    environment shares ~/.cache) must not be read. A fresh process (no trl imported) reads the cache folder."""
    trl_version = importlib.metadata.version("trl")
    for name in (f"grpo_config_defaults-trl{trl_version}.json",  # the old key: TRL's version alone
                 f"grpo_config_defaults-trl{trl_version}-transformers0.0.0.json"):
        (tmp_path / name).write_text(json.dumps({"not_a_field": None}))
    code = ("import json; from grpo_ablate.trl_facts.fields import trainer_field_names; "
            "print(json.dumps(sorted(trainer_field_names())))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "GRPO_ABLATE_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    names = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "not_a_field" not in names and {"num_generations", "temperature"} <= names
    written = f"grpo_config_defaults-trl{trl_version}-transformers{importlib.metadata.version('transformers')}.json"
    assert set(json.loads((tmp_path / written).read_text())) == names
