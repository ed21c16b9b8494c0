"""What each kind of recipe key becomes in a study: a section's key, a translation of a key TRL or
transformers removed, a value the study decides, a key other tools read, a key refused unless off.

Tables only (and `matches`, which reads a prefix entry ending in "_"): merge.py applies them.
"""

from __future__ import annotations

__all__ = ["SCRIPT_KEYS", "FLASH_ATTENTION", "REMOVED_KEYS", "STUDY_OWNED_KEYS", "TRAINING_OWNED_KEYS",
           "OTHER_TOOL_KEYS", "UNSUPPORTED_KEYS", "HARDWARE_KEYS", "matches"]


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


# Recipe attention values that become `auto` (grpo_ablate/core/attention.py): flash attention where installed, else sdpa.
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
TRAINING_OWNED_KEYS = ("max_steps", "num_train_epochs", "seed", "num_processes")


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


def matches(key: str, names: tuple[str, ...]) -> bool:
    return any(key.startswith(n) if n.endswith("_") else key == n for n in names)
