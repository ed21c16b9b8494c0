"""Published recipes as they are: Open R1's GRPO recipe files and `trl grpo` CLI recipes.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml     # prints a note per translated key

A recipe mixes four kinds of key. Script keys (model, dataset, rewards ...) go to the study's
sections; GRPOConfig keys go to the trainer section; keys TRL or transformers removed are
translated; keys the study owns (run length, output, hub, saving, logging) are overridden;
keys other tools read (callbacks, benchmarks, W&B entity, code sandboxes) are listed once as
ignored. Every note and every error names the recipe file and the line of the key. The study's
own `trainer:` section is not translated: a typo there stays an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

from grpo_ablate.config.attention import AUTO
from grpo_ablate.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.config.names import module_findable
from grpo_ablate.config.trainer_fields import trainer_field_names
from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.vocab import SEARCHED_KEYS, reward_names

__all__ = [
    "RecipeNote",
    "SCRIPT_KEYS",
    "REMOVED_KEYS",
    "STUDY_OWNED_KEYS",
    "OTHER_TOOL_KEYS",
    "OPEN_R1_REWARDS",
    "TRL_REWARDS",
    "merge_recipe",
    "read_recipe",
]


class RecipeNote(str):
    """What the study did with a recipe key, e.g. "recipe.yaml:12: max_prompt_length -> data.max_prompt_tokens".

    A str, so it travels in Study.warnings; `plan` and `validate` print it as a note.
    """


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
    "do_eval": "evaluation: the study decides (the recipe's test split is not loaded)",
    "eval_strategy": "evaluation: the study decides (the recipe's test split is not loaded)",
    "eval_steps": "evaluation: the study decides (the recipe's test split is not loaded)",
    "eval_on_start": "evaluation: the study decides (the recipe's test split is not loaded)",
    "num_processes": "processes: the study's hardware section decides (a launcher key, not GRPOConfig's)",
    "seed": "seeds: study.seeds decides (each arm runs once per seed, the same seeds for every arm)",
}

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

# Open R1's reward registry (open_r1/rewards.py, get_reward_funcs): name -> function in open_r1.rewards.
# None: a factory that needs the script's arguments, so it cannot be named as a plain function.
OPEN_R1_REWARDS: dict[str, str | None] = {
    "reasoning_steps": "reasoning_steps_reward",
    "length": "len_reward",
    "code": "code_reward",
    "binary_code": "binary_code_reward",
    "ioi_code": "ioi_code_reward",
    "cf_code": "cf_code_reward",
    "code_format": None,
    "cosine": None,
    "repetition_penalty": None,
    "soft_overlong_punishment": None,
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


def _reward_name(recipe: _Recipe, name: Any, notes: list[RecipeNote],
                 problems: list[Problem]) -> str | None:
    """A recipe's reward name as a study reward name, or None with a problem."""
    key = "reward_funcs"
    if not isinstance(name, str) or not name:
        problems.append(recipe.problem(key, f"expected reward names, got {echo(name)}"))
        return None
    if name in reward_names() or ":" in name:
        return name
    if name in TRL_REWARDS:
        target = TRL_REWARDS[name]
        if target is None:
            problems.append(recipe.problem(key, (
                f"{name!r} is a factory in trl.rewards that needs arguments; write a function that calls it "
                f"and name it as package.module:function in rewards")))
            return None
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} resolves to {target}"))
        return target
    if name in OPEN_R1_REWARDS:
        function = OPEN_R1_REWARDS[name]
        path = f"{OPEN_R1_MODULE}:{function}" if function else None
        if function is None:
            problems.append(recipe.problem(key, (
                f"{name!r} is built by a factory in Open R1's {OPEN_R1_MODULE} from the script's arguments; "
                f"write a function that calls it and name it in rewards as package.module:function")))
            return None
        if not module_findable(OPEN_R1_MODULE):  # planned on a laptop for a cluster: say so, keep planning
            notes.append(RecipeNote(
                f"{recipe.at(key)}: reward {name!r} is Open R1's ({path}); open_r1 is not installed here, so it "
                f"cannot be checked on this machine: the trial machine needs the open-r1 package (and the code "
                f"sandbox its rewards call), or write rewards: [{{name: 'my_module:function'}}] with a module you provide"))
            return path
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} resolves through Open R1's registry to {path}"))
        return path
    if "." in name:  # `trl grpo` takes dotted import paths: my_lib.rewards.custom_reward
        module, _, function = name.rpartition(".")
        target = f"{module}:{function}"
        notes.append(RecipeNote(f"{recipe.at(key)}: reward {name!r} is the import path {target}"))
        return target
    known = sorted({*reward_names(), *TRL_REWARDS, *OPEN_R1_REWARDS})
    problems.append(recipe.problem(key, f"unknown reward {echo(name)}{did_you_mean(name, known)}; "
                                        f"known: {known}, or package.module:function"))
    return None


def _rewards(recipe: _Recipe, notes: list[RecipeNote], problems: list[Problem]) -> list[dict[str, Any]]:
    names = recipe.values.get("reward_funcs")
    if names is None:
        return []
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
        resolved = _reward_name(recipe, n, notes, problems)
        if resolved is not None:
            out.append({"name": resolved, "weight": w})
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

    for key, value in recipe.values.items():
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
            notes.append(RecipeNote(f"{recipe.at(key)}: max_prompt_length {REMOVED_KEYS[key]}"))
        elif key == "warmup_ratio":
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
                    and not recipe.values.get("warmup_steps"):
                trainer["warmup_steps"] = float(value)
            notes.append(RecipeNote(f"{recipe.at(key)}: warmup_ratio {REMOVED_KEYS[key]}"))
        elif key in REMOVED_KEYS:
            notes.append(RecipeNote(f"{recipe.at(key)}: {key} {REMOVED_KEYS[key]}"))
        elif key in STUDY_OWNED_KEYS:
            if key not in own:
                notes.append(RecipeNote(f"{recipe.at(key)}: {key}: {echo(value)} overridden; {STUDY_OWNED_KEYS[key]}"))
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
            notes.append(RecipeNote(f"{recipe.at(key)}: {key}: {echo(value)} is searched (search.{key}); "
                                    f"the recipe's value is not used"))
        else:
            trainer[key] = value
    if ignored:
        notes.append(RecipeNote(f"{recipe.path.name}: ignored (read by other tools, or left off): {', '.join(ignored)}"))
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
