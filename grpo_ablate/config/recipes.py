"""Published recipes as they are: Open R1's GRPO recipe files and `trl grpo` CLI recipes.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml     # prints a note per translated key

A recipe mixes four kinds of key. Script keys (model, dataset, rewards ...) go to the study's
sections; GRPOConfig keys go to the trainer section; keys TRL or transformers removed are
translated; keys the study owns (run length, output, hub, saving, logging) are overridden;
keys other tools read (callbacks, benchmarks, W&B entity, code sandboxes) are listed once as
ignored. Every note and every error names the recipe file and the line of the key. The study's
own `trainer:` section is not translated: a typo there stays an error.

A study must train the run the recipe describes. Keys the recipe leaves out mean what the TRL it
was written for said (Open R1: TRL 0.18), not what the installed TRL says, so they are resolved
against that stack where it is known; Open R1's rewards are Open R1's own functions where open_r1
imports (its factories called with the recipe's arguments), else built-ins that score as they do;
and whatever still differs from the recipe's own run is a RecipeDifference, which `plan` lists.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

from grpo_ablate.config.attention import AUTO
from grpo_ablate.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.config.names import module_findable
from grpo_ablate.config.trainer_fields import cast_like_trl, trainer_field_names, trl_default
from grpo_ablate.config.trl_releases import (drift_between, known_releases, release_defaults, release_entries,
                                              release_of)
from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.vocab import SEARCHED_KEYS, reward_names

__all__ = [
    "RecipeNote",
    "RecipeDifference",
    "TargetStack",
    "OPEN_R1_STACK",
    "OPEN_R1_SCRIPT_DEFAULTS",
    "recipe_stack",
    "stack_default",
    "SCRIPT_KEYS",
    "REMOVED_KEYS",
    "STUDY_OWNED_KEYS",
    "OTHER_TOOL_KEYS",
    "OPEN_R1_REWARDS",
    "TRL_REWARDS",
    "merge_recipe",
    "read_recipe",
    "recipe_accelerate_config",
]


class RecipeNote(str):
    """What the study did with a recipe key, e.g. "recipe.yaml:12: max_prompt_length -> data.max_prompt_tokens".

    A str, so it travels in Study.warnings; `plan` and `validate` print it as a note.
    """


class RecipeDifference(RecipeNote):
    """A value a trial uses that differs from what the recipe's own run used: plan lists these together."""


@dataclass(frozen=True)
class TargetStack:
    """The software a recipe was written for, where it is known: what the keys it leaves out meant there.

    `trl` is a release of config/trl_defaults.json (read from that release's own source), so `defaults`
    holds every GRPOConfig field's default there; a recipe that leaves one out ran with that value.
    """

    name: str
    trl: str
    source: str

    @property
    def defaults(self) -> dict[str, Any]:
        return release_defaults(self.trl)


# Open R1 pins trl[vllm]==0.18.0 and transformers==4.52.3 (its setup.py).
OPEN_R1_STACK = TargetStack(name="Open R1", trl="0.18.0", source="Open R1 pins trl[vllm]==0.18.0")


# Keys only Open R1's scripts read (its GRPOScriptArguments and its GRPOConfig subclass): a recipe
# carrying one of them was written for Open R1.
_OPEN_R1_ONLY_KEYS = ("callbacks", "benchmarks", "hub_model_revision", "system_prompt", "wandb_entity", "wandb_project",
                      "wandb_run_group", "wandb_log_unique_prompts", "num_completions_to_print", "dataset_configs",
                      "code_language", "code_eval_test_batch_size", "code_eval_scoring_mode", "code_provider",
                      "ioi_provider", "parallel_code_exec_per_proc", "e2b_router_url", "morph_router_url",
                      "cosine_min_value_wrong", "cosine_max_value_wrong", "cosine_min_value_correct",
                      "cosine_max_value_correct", "cosine_max_len", "repetition_n_grams", "repetition_max_penalty",
                      "vllm_device", "num_processes")

# Open R1's reward_funcs when a recipe names none (GRPOScriptArguments.reward_funcs).
OPEN_R1_DEFAULT_REWARDS = ["accuracy", "format", "tag_count"]

# GRPOScriptArguments defaults (open_r1/configs.py) for the keys its reward factories read.
OPEN_R1_SCRIPT_DEFAULTS: dict[str, Any] = {
    "code_language": "python", "code_eval_test_batch_size": 1, "code_eval_scoring_mode": "weighted_sum",
    "parallel_code_exec_per_proc": 2, "code_provider": "e2b", "ioi_provider": "piston", "enforce_same_language": False,
    "cosine_min_value_wrong": 0.0, "cosine_max_value_wrong": -0.5, "cosine_min_value_correct": 0.5,
    "cosine_max_value_correct": 1.0, "cosine_max_len": 1000, "repetition_n_grams": 3, "repetition_max_penalty": -1.0,
    "max_completion_len": 16384, "soft_punish_cache": 4096,
}

# The loss keys `init` writes out for a recipe whose TRL is not known (their defaults moved between TRL
# releases: trl_defaults.json); on a known stack every field is resolved from the table instead.
DRIFTING_KEYS = ("beta", "loss_type", "temperature")

# GRPOConfig keys the study's hardware section decides, whatever the recipe's TRL defaulted to.
HARDWARE_KEYS: dict[str, str] = {
    "use_vllm": "hardware.vllm.mode decides",
    "vllm_mode": "hardware.vllm.mode decides",
    "vllm_server_host": "the vLLM server is started and addressed by the study (hardware.vllm)",
    "vllm_server_port": "the vLLM server is started and addressed by the study (hardware.vllm)",
    "vllm_server_base_url": "the vLLM server is started and addressed by the study (hardware.vllm)",
    "vllm_group_port": "the vLLM server is started and addressed by the study (hardware.vllm)",
    "use_cpu": "the study's hardware section decides",
}

# Switches added after TRL 0.18 that change the loss when on, and the value that computes the loss as a
# release without them did (read in TRL 1.16's grpo_trainer.py: each multiplies a term that 0.18 used
# unweighted), with why.
NEW_LOSS_SWITCHES: dict[str, tuple[Any, str]] = {
    "vllm_importance_sampling_correction": (False, "off, as the recipe's TRL weighted no token by the ratio of the "
                                                   "trainer's to vLLM's sampling probability"),
    "use_bias_correction_kl": (False, "off, as the recipe's TRL estimated the KL term (k3) without the "
                                      "importance-ratio weight"),
}


# Script keys (Open R1's GRPOScriptArguments, TRL's ScriptArguments and ModelConfig) -> (section, key).
SCRIPT_KEYS: dict[str, tuple[str, str]] = {
    "model_name_or_path": ("model", "name_or_path"),
    "model_revision": ("model", "revision"),
    "torch_dtype": ("model", "dtype"),
    "dtype": ("model", "dtype"),
    "attn_implementation": ("model", "attn_implementation"),
    "trust_remote_code": ("model", "trust_remote_code"),
    "dataset_name": ("data", "dataset"),
    "dataset_config": ("data", "config_name"),
    "dataset_train_split": ("data", "split"),
    "dataset_prompt_column": ("data", "prompt_column"),
    "system_prompt": ("data", "system_prompt"),
    "chat_template": ("data", "chat_template"),
}

# Recipe attention values that become `auto` (config/attention.py): flash attention where installed, else sdpa.
FLASH_ATTENTION = ("flash_attention_2", "flash_attention_3")

# Keys current TRL / transformers removed: what the study does instead (one line each).
REMOVED_KEYS: dict[str, str] = {
    "max_prompt_length": "removed in TRL 0.28; became data.max_prompt_tokens (longer prompts are dropped)",
    "warmup_ratio": "removed in transformers 5; became warmup_steps (a value below 1 is a fraction of the steps)",
    "overwrite_output_dir": "removed in transformers 5; dropped (each trial writes to its own folder)",
    "vllm_device": "removed from TRL; dropped (hardware.vllm places the vLLM server)",
}

# GRPOConfig keys whose value the study decides for every trial.
STUDY_OWNED_KEYS: dict[str, str] = {
    "max_steps": "run length: the study's budget decides",
    "num_train_epochs": "run length: the study's budget decides",
    "output_dir": "output: each trial writes to <study output_dir>/trials/<n>",
    "push_to_hub": "hub: trials are not pushed",
    "hub_model_id": "hub: trials are not pushed",
    "hub_strategy": "hub: trials are not pushed",
    "hub_private_repo": "hub: trials are not pushed",
    "hub_token": "hub: trials are not pushed",
    "push_to_hub_revision": "hub: trials are not pushed",
    "overwrite_hub_revision": "hub: trials are not pushed",
    "save_strategy": "saving: trials keep no checkpoints",
    "save_steps": "saving: trials keep no checkpoints",
    "save_total_limit": "saving: trials keep no checkpoints",
    "save_only_model": "saving: trials keep no checkpoints",
    "report_to": "logging backends: study.trackers decides",
    "run_name": "logging backends: each trial is named by its arm and seed",
    "logging_dir": "logging backends: each trial logs to its own folder",
    "logging_steps": "logging: metrics are read every step",
    "logging_strategy": "logging: metrics are read every step",
    "logging_first_step": "logging: metrics are read every step",
    "do_eval": "evaluation: the study's evaluation section decides (on the recipe's dataset_test_split when it names one)",
    "eval_strategy": "evaluation: the study's evaluation section decides (on the recipe's dataset_test_split when it names one)",
    "eval_steps": "evaluation: the study's evaluation section decides (on the recipe's dataset_test_split when it names one)",
    "eval_on_start": "evaluation: the study's evaluation section decides (on the recipe's dataset_test_split when it names one)",
    "num_processes": "processes: the study's hardware section decides (a launcher key, not GRPOConfig's)",
    "seed": "seeds: study.seeds decides (each arm runs once per seed, the same seeds for every arm)",
}

# Of those, the ones that change what a trial trains (the rest are bookkeeping: output, hub, logs, saving).
_TRAINING_OWNED_KEYS = ("max_steps", "num_train_epochs", "seed", "num_processes")

# Keys read by other tools (Open R1's callbacks and evaluation, W&B setup, code sandboxes,
# the arguments of rewards this study does not build). Prefixes end in "_".
OTHER_TOOL_KEYS: tuple[str, ...] = (
    "callbacks", "benchmarks", "wandb_entity", "wandb_project", "wandb_run_group", "wandb_log_unique_prompts",
    "hub_model_revision", "dataset_test_split", "dataset_streaming", "streaming", "test_split_size",
    "ignore_bias_buffers", "code_", "e2b_router_url", "morph_router_url", "enforce_same_language",
    "parallel_code_exec_per_proc", "ioi_provider", "cosine_", "repetition_n_grams", "repetition_max_penalty",
    "max_completion_len", "soft_punish_cache",
)

# ModelConfig / script keys that change what trains: refused unless off.
UNSUPPORTED_KEYS: tuple[str, ...] = (
    "use_peft", "lora_", "use_rslora", "use_dora", "load_in_8bit", "load_in_4bit", "bnb_4bit_", "use_bnb_nested_quant",
    "reward_model_name_or_path", "datasets", "dataset_mixture",
)

# Open R1's reward registry (open_r1/rewards.py, get_reward_funcs): name -> (function or factory in
# open_r1.rewards, {its keyword: the script key that fills it}). A factory (get_*) is called with those
# arguments; a function gets them bound, as Open R1's partials do (trainer/rewards.py tells them apart).
OPEN_R1_REWARDS: dict[str, tuple[str, dict[str, str]]] = {
    "accuracy": ("accuracy_reward", {}),
    "format": ("format_reward", {}),
    "tag_count": ("tag_count_reward", {}),
    "reasoning_steps": ("reasoning_steps_reward", {}),
    "length": ("len_reward", {}),
    "code": ("code_reward", {"num_parallel": "parallel_code_exec_per_proc", "provider_type": "code_provider",
                             "enforce_same_language": "enforce_same_language"}),
    "binary_code": ("binary_code_reward", {"num_parallel": "parallel_code_exec_per_proc",
                                           "provider_type": "code_provider",
                                           "enforce_same_language": "enforce_same_language"}),
    "ioi_code": ("ioi_code_reward", {"test_batch_size": "code_eval_test_batch_size", "provider_type": "ioi_provider"}),
    "cf_code": ("cf_code_reward", {"test_batch_size": "code_eval_test_batch_size",
                                   "scoring_mode": "code_eval_scoring_mode"}),
    "code_format": ("get_code_format_reward", {"language": "code_language"}),
    "cosine": ("get_cosine_scaled_reward", {"min_value_wrong": "cosine_min_value_wrong",
                                            "max_value_wrong": "cosine_max_value_wrong",
                                            "min_value_correct": "cosine_min_value_correct",
                                            "max_value_correct": "cosine_max_value_correct",
                                            "max_len": "cosine_max_len"}),
    "repetition_penalty": ("get_repetition_penalty_reward", {"ngram_size": "repetition_n_grams",
                                                             "max_penalty": "repetition_max_penalty"}),
    "soft_overlong_punishment": ("get_soft_overlong_punishment", {"max_completion_len": "max_completion_len",
                                                                  "soft_punish_cache": "soft_punish_cache"}),
}

# What stands in for Open R1's rewards of these names when open_r1 is not installed (trainer/rewards.py), and
# why it scores as Open R1's does; tests/test_openr1_rewards.py matches them against Open R1's own scores
# (tests/fixtures/openr1_reward_cases.json) case by case.
OPEN_R1_STAND_INS: dict[str, tuple[str, str]] = {
    "accuracy": ("grpo_ablate.trainer.rewards:open_r1_accuracy_reward",
                 "the same math-verify reading (the gold with its defaults, the completion with LaTeX only, boxed first, "
                 "verify(gold, answer)), and None where the gold does not parse"),
    "format": ("format", "the same layout rule (Open R1's regex: each tag on its own line, nothing around them)"),
    "tag_count": ("tag_count", "the same rule (0.25 for each of the four newline-delimited tags present exactly once)"),
}
OPEN_R1_MODULE = "open_r1.rewards"

# `trl grpo`'s registry (trl/scripts/grpo.py): name -> import path (trl is installed with us).
TRL_REWARDS: dict[str, str | None] = {
    "accuracy_reward": "trl.rewards:accuracy_reward",
    "reasoning_accuracy_reward": "trl.rewards:reasoning_accuracy_reward",
    "think_format_reward": "trl.rewards:think_format_reward",
    "get_soft_overlong_punishment": None,
}


def _matches(key: str, names: tuple[str, ...]) -> bool:
    return any(key.startswith(n) if n.endswith("_") else key == n for n in names)


@dataclass
class _Recipe:
    path: Path
    values: dict[str, Any]
    lines: dict[str, int]

    def at(self, key: str) -> str:
        line = self.lines.get(key)
        return f"{self.path.name}:{line}" if line else self.path.name

    def problem(self, key: str, message: str) -> Problem:
        return Problem(path=f"trainer_from {self.path}:{self.lines.get(key, '?')}", message=f"{key}: {message}")


def read_recipe(path: Path) -> _Recipe:
    """The recipe's top-level keys with their line numbers (from PyYAML's nodes). Raises StudyError."""
    values = read_yaml_file(path, what="trainer_from recipe")
    if not isinstance(values, dict):
        raise StudyError([Problem(path="trainer_from", message=(
            f"{echo(str(path))} must be a mapping of keys, got {type(values).__name__}"))])
    lines: dict[str, int] = {}
    node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)  # size-checked above
    if isinstance(node, MappingNode):
        for k, _ in node.value:
            if isinstance(k, ScalarNode):
                lines.setdefault(str(k.value), k.start_mark.line + 1)
    return _Recipe(path=path, values={str(k): v for k, v in values.items()}, lines=lines)


def recipe_stack(values: dict[str, Any], recipe_trl: Any = None) -> TargetStack | None:
    """The stack a recipe was written for, when known: the study's `recipe_trl` (a TRL release of the
    defaults table), else Open R1's when the recipe's keys say so (its reward names or its own keys)."""
    if isinstance(recipe_trl, str) and release_of(recipe_trl):
        version = release_of(recipe_trl) or recipe_trl
        return TargetStack(name=f"TRL {version}", trl=version, source=f"recipe_trl: {recipe_trl}")
    rewards = values.get("reward_funcs")
    names = [rewards] if isinstance(rewards, str) else rewards if isinstance(rewards, list) else []
    if any(isinstance(n, str) and n in OPEN_R1_REWARDS for n in names) or any(k in values for k in _OPEN_R1_ONLY_KEYS):
        return OPEN_R1_STACK
    return None


def stack_default(values: dict[str, Any], key: str, recipe_trl: Any = None) -> Any:
    """What a key the recipe leaves out meant on its own stack: that TRL's default, else the installed TRL's."""
    stack = recipe_stack(values, recipe_trl)
    if stack is not None and key in stack.defaults:
        return stack.defaults[key]
    return trl_default(key)


def _open_r1_reward(recipe: _Recipe, name: str, notes: list[RecipeNote]) -> dict[str, Any]:
    """An Open R1 registry name as a study reward: Open R1's own function where open_r1 is importable
    (factories called with the recipe's arguments), else the built-in that stands in, or Open R1's
    path for the trial machine to import."""
    key = "reward_funcs"
    function, params = OPEN_R1_REWARDS[name]
    path = f"{OPEN_R1_MODULE}:{function}"
    args = {p: recipe.values.get(k, OPEN_R1_SCRIPT_DEFAULTS.get(k)) for p, k in params.items()}
    spec: dict[str, Any] = {"name": path, **({"args": args} if args else {})}
    called = f"{path}({', '.join(f'{p}={v!r}' for p, v in args.items())})" if args else path
    if module_findable(OPEN_R1_MODULE):
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} is Open R1's own {called}, as its registry builds it"))
        return spec
    if name in OPEN_R1_STAND_INS:
        stand_in, why = OPEN_R1_STAND_INS[name]
        notes.append(RecipeNote(
            f"{recipe.at(key)}: reward {name!r}: open_r1 is not installed here, so {stand_in!r} stands in for Open R1's "
            f"{path}: {why}; install open-r1 to use its own"))
        return {"name": stand_in}
    notes.append(RecipeNote(
        f"{recipe.at(key)}: reward {name!r} is Open R1's {called}; open_r1 is not installed here, so it cannot be "
        f"checked on this machine: the trial machine needs the open-r1 package (and the code sandbox its rewards "
        f"call), or write rewards: [{{name: 'my_module:function'}}] with a module you provide"))
    return spec


def _reward_name(recipe: _Recipe, name: Any, open_r1: bool, notes: list[RecipeNote],
                 problems: list[Problem]) -> dict[str, Any] | None:
    """A recipe's reward name as a study reward ({name, args}), or None with a problem."""
    key = "reward_funcs"
    if not isinstance(name, str) or not name:
        problems.append(recipe.problem(key, f"expected reward names, got {echo(name)}"))
        return None
    if name in OPEN_R1_REWARDS and (open_r1 or name not in reward_names()):
        return _open_r1_reward(recipe, name, notes)
    if name in reward_names() or ":" in name:
        return {"name": name}
    if name in TRL_REWARDS:
        target = TRL_REWARDS[name]
        if target is None:
            problems.append(recipe.problem(key, (
                f"{name!r} is a factory in trl.rewards that needs arguments; name it as "
                f"{{name: 'trl.rewards:{name}', args: {{...}}}} in rewards")))
            return None
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} resolves to {target}"))
        return {"name": target}
    if "." in name:  # `trl grpo` takes dotted import paths: my_lib.rewards.custom_reward
        module, _, function = name.rpartition(".")
        target = f"{module}:{function}"
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} is the import path {target}"))
        return {"name": target}
    known = sorted({*reward_names(), *TRL_REWARDS, *OPEN_R1_REWARDS})
    problems.append(recipe.problem(key, f"unknown reward {echo(name)}{did_you_mean(name, known)}; "
                                        f"known: {known}, or package.module:function"))
    return None


def _rewards(recipe: _Recipe, notes: list[RecipeNote], problems: list[Problem]) -> list[dict[str, Any]]:
    names = recipe.values.get("reward_funcs")
    open_r1 = recipe_stack(recipe.values) is OPEN_R1_STACK
    if names is None:
        if not open_r1:
            return []
        names = list(OPEN_R1_DEFAULT_REWARDS)
        notes.append(RecipeNote(f"{recipe.path.name}: names no reward_funcs; Open R1's default {names} apply"))
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        problems.append(recipe.problem("reward_funcs", f"expected a list of names, got {echo(names)}"))
        return []
    weights = recipe.values.get("reward_weights")
    if weights is None:
        weights = [1.0] * len(names)
    if not isinstance(weights, list) or len(weights) != len(names):
        problems.append(recipe.problem("reward_weights", (
            f"expected one weight per reward ({len(names)}), got {echo(weights)}")))
        return []
    out = []
    for n, w in zip(names, weights):
        resolved = _reward_name(recipe, n, open_r1, notes, problems)
        if resolved is not None:
            out.append({**resolved, "weight": w})
    return out


def _sharding_note(recipe: _Recipe, hardware: Any) -> RecipeNote | None:
    """A multi-process study without an accelerate config launches plain DDP, where a recipe was
    trained sharded (Open R1's under DeepSpeed ZeRO-2/3): say so, and name a config lying near the recipe."""
    hw = hardware if isinstance(hardware, dict) else {}
    processes = [v for v in (hw.get("gpus"), hw.get("num_processes")) if isinstance(v, int) and not isinstance(v, bool)]
    if hw.get("accelerate_config") or not processes or max(processes) < 2:
        return None
    near = sorted({str(p) for parent in list(recipe.path.resolve().parents)[:4]
                   for folder in ("accelerate_configs", "accelerate") for p in (parent / folder).glob("zero*.yaml")})
    where = f" (e.g. {near[0]})" if near else ""
    return RecipeNote(f"{recipe.path.name}: names no accelerate config, so trials launch as plain DDP (each process holds "
                      f"the whole model and optimizer state); recipes like Open R1's train under DeepSpeed ZeRO-2/3: "
                      f"set hardware.accelerate_config{where}")


def _as_trl_reads(recipe: _Recipe, key: str, value: Any, notes: list[RecipeNote]) -> Any:
    """A recipe value as TRL's parser reads it (`learning_rate: 2e-4` is text under YAML 1.1 and a float to
    `trl grpo --config`); a value it would refuse stays, for validate to report with the key's path."""
    try:
        cast = cast_like_trl(key, value)
    except ValueError:
        return value
    if cast is not value and (cast != value or type(cast) is not type(value)):
        notes.append(RecipeNote(f"{recipe.at(key)}: {key}: {echo(value)} read as {echo(cast)}, as TRL's own "
                                f"parser reads the recipe"))
    return cast


# Open R1 trains its recipes under DeepSpeed (recipes/accelerate_configs/zero2.yaml, zero3.yaml for its 7B+
# models); this repository carries configs of the same stages for a node whose 8th GPU serves vLLM.
_BUNDLED_ACCELERATE = Path(__file__).resolve().parents[2] / "sweeps" / "accelerate"
_LARGE_MODEL = re.compile(r"(?<![0-9.])([0-9]+(?:\.[0-9]+)?)\s*[bB](?![a-zA-Z])")


def recipe_accelerate_config(recipe: Path, values: dict[str, Any]) -> tuple[Path, str] | None:
    """The accelerate config an Open R1 recipe trains under, for a multi-GPU study: ZeRO-3 for a model of 7B
    parameters or more (by its name), else ZeRO-2; the file of that name near the recipe (an Open R1
    checkout's recipes/accelerate_configs/), else this repository's sweeps/accelerate/. (path, why)."""
    if recipe_stack(values) is not OPEN_R1_STACK:
        return None
    size = _LARGE_MODEL.search(str(values.get("model_name_or_path") or "").split("/")[-1])
    stage = "zero3" if size and float(size.group(1)) >= 7 else "zero2"
    why = (f"Open R1 trains {'7B+ models' if stage == 'zero3' else 'its smaller models'} under DeepSpeed "
           f"{stage.replace('zero', 'ZeRO-')} (its recipes/accelerate_configs/{stage}.yaml)")
    for parent in list(recipe.resolve().parents)[:4]:
        for folder in ("accelerate_configs", "accelerate"):
            if (parent / folder / f"{stage}.yaml").is_file():
                return parent / folder / f"{stage}.yaml", why
    bundled = _BUNDLED_ACCELERATE / f"{stage}.yaml"
    return (bundled, why) if bundled.is_file() else None


def _anchor_baseline(raw: dict[str, Any], key: str, value: Any, searched: Any) -> str:
    """The recipe's own value of a searched key becomes the ablation's baseline (the run one would make
    without the study), when the study names no baseline value and searches that value; words for the note."""
    study = raw.get("study")
    if not isinstance(study, dict) or not isinstance(searched, list) or value not in searched:
        return ""
    baseline = study.setdefault("baseline", {})
    if not isinstance(baseline, dict) or key in baseline:
        return ""
    baseline[key] = value
    return f", and {echo(value)} is the baseline's"


def _installed_trl() -> str:
    try:
        return importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def _installed_fields() -> dict[str, dict[str, Any]]:
    """The installed TRL's fields as the table holds them: the table's release when it is the installed one,
    else read from the installed GRPOConfig (declared defaults; run benchmarks/trl_defaults.py to add it)."""
    version = release_of(_installed_trl())
    if version:
        return release_entries(version)
    return {k: {"default": trl_default(k)} for k in trainer_field_names()}


def _loss_switch_note(name: str, stack: TargetStack) -> str:
    return f"{name}: {NEW_LOSS_SWITCHES[name][1]} (TRL {stack.trl} has no such switch)"


def _unknown_stack(recipe: _Recipe, raw: dict[str, Any], own: dict[str, Any], search: dict[str, Any],
                   notes: list[RecipeNote], installed: str) -> None:
    """A recipe whose TRL is not known: the installed TRL's defaults apply; say which loss keys that decides."""
    given = raw.get("recipe_trl")
    if given is not None:
        notes.append(RecipeDifference(
            f"{recipe.path.name}: recipe_trl {echo(given)} is not a release of the defaults table "
            f"(known: {known_releases()}); add it with `python benchmarks/trl_defaults.py --release "
            f"{given}=<its transformers>`"))
    old = release_defaults(OPEN_R1_STACK.trl)
    for key in DRIFTING_KEYS:
        if key in recipe.values or key in own:
            continue
        now = trl_default(key)
        searched = key in SEARCHED_KEYS and key in search
        baseline = raw["study"].get("baseline") if isinstance(raw.get("study"), dict) else None
        if searched and isinstance(baseline, dict) and key in baseline:
            continue  # the study names its baseline value: it said what it meant
        where = f"study.baseline.{key}" if searched else f"trainer.{key}"
        lead = (f"the baseline is the searched value nearest TRL {installed}'s default {echo(now)}" if searched
                else f"TRL {installed}'s default {echo(now)} applies")
        notes.append(RecipeDifference(
            f"{recipe.path.name}: {key} not set: {lead}; the TRL this recipe was written for may have meant another "
            f"(TRL {OPEN_R1_STACK.trl}: {echo(old.get(key))}): set recipe_trl to that TRL's version, or set {where}"))


def _implicit_keys(recipe: _Recipe, raw: dict[str, Any], trainer: dict[str, Any], own: dict[str, Any],
                   search: dict[str, Any], notes: list[RecipeNote]) -> None:
    """Every GRPOConfig field the recipe leaves out whose default is not the same in its own TRL and the
    installed one (both read from the releases' source, config/trl_releases.py): set to its TRL's value where
    the installed TRL has the field and the study does not decide it; otherwise listed with the reason.
    On an unknown stack, the loss keys the installed TRL's defaults decide are listed instead."""
    installed = _installed_trl()
    stack = recipe_stack(recipe.values, raw.get("recipe_trl"))
    if stack is None:
        _unknown_stack(recipe, raw, own, search, notes, installed)
        return
    then_fields = release_entries(stack.trl)
    now_fields = _installed_fields()
    now_name = release_of(installed) or installed
    hardware: dict[str, Any] = hw if isinstance(hw := raw.get("hardware"), dict) else {}
    uses_vllm = bool(recipe.values.get("use_vllm", stack.defaults.get("use_vllm")))
    applied: list[str] = []
    owned: list[str] = []
    gone: list[str] = []
    new: list[str] = []
    for d in drift_between(then_fields, now_fields):
        key = d.name
        if key in recipe.values or key in own:
            continue  # the recipe or the study says: the merge handled it
        was = f"TRL {stack.trl}: {echo(d.then)}"
        if d.then_has and d.now_has and key in SEARCHED_KEYS and key in search:
            where = ("the baseline's value" if _anchor_baseline(raw, key, d.then, search[key])
                     else "the baseline is the searched value nearest to it, unless study.baseline names one")
            notes.append(RecipeNote(f"{recipe.path.name}: {key} not set: {stack.name} ran it at {echo(d.then)} "
                                    f"({stack.source}; TRL {installed}'s is {echo(d.now)}): {where}"))
        elif key in STUDY_OWNED_KEYS:
            owned.append(f"{key} ({was}; {STUDY_OWNED_KEYS[key]})")
        elif key in HARDWARE_KEYS:
            vllm = hardware.get("vllm")
            mode = vllm.get("mode", "none") if isinstance(vllm, dict) else "none"
            if key == "vllm_mode" and uses_vllm and mode != d.then:
                notes.append(RecipeDifference(
                    f"{recipe.path.name}: vllm_mode not set: {stack.name} generated in vLLM's {echo(d.then)} mode "
                    f"({was}); here hardware.vllm.mode decides ({mode}): sampling is the same, the memory and speed are not"))
            else:
                owned.append(f"{key} ({was}; {HARDWARE_KEYS[key]})")
        elif d.then_has and d.now_has and not isinstance(d.then, dict):
            trainer[key] = d.then
            applied.append(f"{key} {echo(d.then)} (TRL {installed}: {echo(d.now)})")
        elif d.then_has and d.now_has:
            owned.append(f"{key} ({was}, computed at run time; the installed TRL's rule applies)")
        elif key == "max_prompt_length":
            notes.append(RecipeDifference(
                f"{recipe.path.name}: max_prompt_length not set: {stack.name}'s TRL cut every prompt to its last "
                f"{echo(d.then)} tokens; TRL {installed} has no such field and trains prompts whole (set "
                f"data.max_prompt_tokens: {d.then} to drop longer prompts instead)"))
        elif d.then_has:
            gone.append(f"{key} ({echo(d.then)})")
        elif key in NEW_LOSS_SWITCHES:
            value, _ = NEW_LOSS_SWITCHES[key]
            trainer[key] = value
            applied.append(f"{key} {echo(value)} (TRL {installed}: {echo(d.now)}; {_loss_switch_note(key, stack)})")
        else:
            new.append(f"{key} ({echo(d.now)})")
    if applied:
        notes.append(RecipeNote(
            f"{recipe.path.name}: keys the recipe leaves out whose default TRL {installed} changed, set to what "
            f"{stack.name} ran ({stack.source}): {', '.join(applied)}"))
    if owned:
        notes.append(RecipeNote(
            f"{recipe.path.name}: defaults of TRL {stack.trl} that the study decides instead: {'; '.join(owned)}"))
    if gone:
        notes.append(RecipeDifference(
            f"{recipe.path.name}: fields of TRL {stack.trl} that TRL {now_name} no longer has, so their defaults "
            f"cannot be set (at these defaults each is off or only names a backend): {', '.join(gone)}"))
    if new:
        notes.append(RecipeDifference(
            f"{recipe.path.name}: fields TRL {stack.trl} did not have, left at TRL {now_name}'s defaults (features "
            f"added since; check any the run relies on): {', '.join(new)}"))


def _full_run(recipe: _Recipe, raw: dict[str, Any], trainer: dict[str, Any], notes: list[RecipeNote]) -> None:
    """budget.full_run: the recipe's own run length, for the prefix learning-rate schedule and plan's share."""
    budget = raw.get("budget")
    if budget is None:
        budget = raw["budget"] = {"max_steps": 100}  # the schema's default budget, written out to add full_run
    if not isinstance(budget, dict):
        return
    steps = recipe.values.get("max_steps")
    full: dict[str, Any] = {}
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        full["max_steps"] = steps
    else:
        epochs = recipe.values.get("num_train_epochs", trl_default("num_train_epochs"))
        if isinstance(epochs, (int, float)) and not isinstance(epochs, bool) and epochs > 0:
            full["num_train_epochs"] = epochs
    g = recipe.values.get("num_generations", trl_default("num_generations"))
    if isinstance(g, int) and not isinstance(g, bool):
        full["num_generations"] = g
    given = budget.get("full_run")
    if not full or (given is not None and not isinstance(given, dict)):
        return  # anything else stays, for the schema to report
    if given and ("max_steps" in given or "num_train_epochs" in given):
        full.pop("max_steps", None)
        full.pop("num_train_epochs", None)  # the study's own length wins over the recipe's
    budget["full_run"] = {**full, **(given or {})}
    schedule = budget.get("lr_schedule") or "prefix"
    kind = trainer.get("lr_scheduler_type", trl_default("lr_scheduler_type"))
    warmup = trainer.get("warmup_steps") or 0
    what = f"{kind} learning-rate schedule{f' with warmup {warmup}' if warmup else ''}"
    if schedule == "prefix":
        notes.append(RecipeNote(f"{recipe.path.name}: the {what} is computed for the recipe's full run and each trial is "
                                f"its first steps (budget.lr_schedule: prefix): step k has the full run's rate at step k"))
    else:
        notes.append(RecipeDifference(
            f"{recipe.path.name}: the {what} is compressed into each trial (budget.lr_schedule: compressed): it warms "
            f"up and anneals within the trial's steps, where the full run at that step is still near its peak"))


def merge_recipe(raw: dict[str, Any], base: Path) -> tuple[dict[str, Any], list[RecipeNote], list[Problem]]:
    """The study with its recipe merged in: the study's own keys win. Returns (raw, notes, problems)."""
    if not isinstance(raw["trainer_from"], str):
        return raw, [], [Problem(path="trainer_from", message=f"expected a file path, got {echo(raw['trainer_from'])}")]
    rp = Path(raw["trainer_from"])
    if not rp.is_absolute():
        rp = base / rp
    try:
        recipe = read_recipe(rp)
    except StudyError as e:
        return raw, [], [Problem(path="trainer_from", message=e.problems[0].message)]
    notes: list[RecipeNote] = []
    problems: list[Problem] = []
    fields = trainer_field_names()
    own = given if isinstance(given := raw.get("trainer"), dict) else {}
    search = searched if isinstance(searched := raw.get("search"), dict) else {}
    trainer: dict[str, Any] = {}
    ignored: list[str] = []

    def section(name: str) -> dict[str, Any]:
        sec = raw.get(name)
        if sec is None:
            sec = raw[name] = {}
        return sec if isinstance(sec, dict) else {}  # anything else stays, for the schema to report

    reward_list = recipe.values.get("reward_funcs")
    reward_args = {k for n in (reward_list if isinstance(reward_list, list) else [reward_list])
                   if isinstance(n, str) and n in OPEN_R1_REWARDS for k in OPEN_R1_REWARDS[n][1].values()}
    evaluation = raw.get("evaluation")
    for key, value in recipe.values.items():
        if key in reward_args:
            continue  # an argument of a reward the recipe names: the reward's note shows it
        if key == "dataset_test_split" and isinstance(evaluation, dict) and isinstance(value, str) \
                and not evaluation.get("split") and not evaluation.get("dataset"):
            evaluation["split"] = value  # the study evaluates: on the recipe's own test split
            notes.append(RecipeNote(f"{recipe.at(key)}: dataset_test_split {value!r} became evaluation.split"))
            continue
        if key in SCRIPT_KEYS:
            name, field = SCRIPT_KEYS[key]
            sec = section(name)
            if name == "data" and "task" in sec:
                continue  # the study chose a built-in task; the recipe's dataset does not apply
            if key == "torch_dtype" and value is not None:
                value = str(value)
            if key == "attn_implementation" and value in FLASH_ATTENTION and field not in sec:
                # Open R1 recipes all say flash_attention_2; without the flash_attn package transformers
                # would fetch a kernel from the hub. `auto` keeps flash attention where it is installed.
                notes.append(RecipeNote(f"{recipe.at(key)}: attn_implementation {value} -> auto (flash_attention_2 "
                                        f"where flash_attn imports, else sdpa; never a kernel from the hub)"))
                value = AUTO
            sec.setdefault(field, value)
        elif key in ("reward_funcs", "reward_weights"):
            continue
        elif key == "dataset_configs":  # older Open R1 scripts: a list holding one config name
            names = value if isinstance(value, list) else [value]
            if len(names) == 1 and isinstance(names[0], str):
                if "task" not in section("data"):
                    section("data").setdefault("config_name", names[0])
                notes.append(RecipeNote(f"{recipe.at(key)}: dataset_configs {echo(names)} became data.config_name"))
            else:
                problems.append(recipe.problem(key, f"expected one config name, got {echo(value)}; "
                                                    f"set data.config_name in the study"))
        elif key == "max_prompt_length":
            if value is not None:
                section("data").setdefault("max_prompt_tokens", value)
            notes.append(RecipeDifference(f"{recipe.at(key)}: max_prompt_length {REMOVED_KEYS[key]}, where the "
                                          f"recipe's TRL cut them from the left"))
        elif key == "warmup_ratio":
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
                    and not recipe.values.get("warmup_steps"):
                trainer["warmup_steps"] = float(value)
            notes.append(RecipeNote(f"{recipe.at(key)}: warmup_ratio {REMOVED_KEYS[key]}"))
        elif key in REMOVED_KEYS:
            notes.append(RecipeNote(f"{recipe.at(key)}: {key} {REMOVED_KEYS[key]}"))
        elif key in STUDY_OWNED_KEYS:
            if key not in own:
                kind = RecipeDifference if key in _TRAINING_OWNED_KEYS else RecipeNote
                notes.append(kind(f"{recipe.at(key)}: {key}: {echo(value)} overridden; {STUDY_OWNED_KEYS[key]}"))
        elif _matches(key, OTHER_TOOL_KEYS):
            ignored.append(f"{key} (line {recipe.lines.get(key, '?')})")
        elif _matches(key, UNSUPPORTED_KEYS):
            if value in (None, False, [], {}, ""):
                ignored.append(f"{key} (line {recipe.lines.get(key, '?')})")
            else:
                problems.append(recipe.problem(key, (
                    f"{echo(value)} is not supported by grpo-ablate trials (PEFT, quantisation, reward models and "
                    f"dataset mixtures change what trains); remove it or set it off")))
        elif key not in fields:
            problems.append(recipe.problem(key, f"not a GRPOConfig field of the installed TRL, nor a known script key"
                                                f"{did_you_mean(key, sorted(fields))}"))
        elif key in SEARCHED_KEYS and key in search:
            anchored = _anchor_baseline(raw, key, value, search[key])
            notes.append(RecipeDifference(f"{recipe.at(key)}: {key}: {echo(value)} is searched (search.{key}); "
                                          f"each arm uses its own value{anchored}"))
        else:
            trainer[key] = _as_trl_reads(recipe, key, value, notes)
    if ignored:
        notes.append(RecipeNote(f"{recipe.path.name}: ignored (read by other tools, or left off): {', '.join(ignored)}"))
    _implicit_keys(recipe, raw, trainer, own, search, notes)
    _full_run(recipe, raw, trainer, notes)
    sharding = _sharding_note(recipe, raw.get("hardware"))
    if sharding:
        notes.append(sharding)
    rewards = _rewards(recipe, notes, problems)
    if rewards and not raw.get("rewards"):
        raw["rewards"] = rewards
    if raw.get("trainer") is None or isinstance(raw.get("trainer"), dict):
        trainer.update(own or {})
        raw["trainer"] = trainer
    return raw, notes, problems
