"""What the recipe's own tools define: Open R1's and `trl grpo`'s reward registries, the built-ins that
stand in for Open R1's rewards, Open R1's script defaults, and the keys only Open R1's scripts read.

Tables only: stack.py tells an Open R1 recipe by them, rewards.py resolves reward names through them.
"""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["OPEN_R1_ACCURACY_CHANGED", "OPEN_R1_EARLY_ACCURACY", "OPEN_R1_ONLY_KEYS", "OPEN_R1_DEFAULT_REWARDS", "OPEN_R1_SCRIPT_DEFAULTS", "OPEN_R1_REWARDS",
           "OPEN_R1_STAND_INS", "OPEN_R1_MODULE", "TRL_REWARDS"]


# Keys only Open R1's scripts read (its GRPOScriptArguments and its GRPOConfig subclass): a recipe
# carrying one of them was written for Open R1.
OPEN_R1_ONLY_KEYS = ("callbacks", "benchmarks", "hub_model_revision", "system_prompt", "wandb_entity", "wandb_project",
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


# Open R1's accuracy reward changed on this date (4f5b21e): before it, verify(answer, gold) over a gold read as LaTeX
# only, 1.0 for every completion where the gold did not parse (a plain "42", a letter, an empty cell) and 0.0 where
# verify raised; the February-2025 demo trained with that rule. Its stand-in, for recipes dated before it:
OPEN_R1_ACCURACY_CHANGED = datetime.date(2025, 4, 1)
OPEN_R1_EARLY_ACCURACY: tuple[str, str] = (
    "grpo_ablate.trainer.rewards:open_r1_accuracy_reward_early",
    "the rule of the recipe's date (before 2025-04-01): the gold read as LaTeX only, verify(answer, gold), 1.0 for "
    "every completion where the gold does not parse, 0.0 where verify fails")


OPEN_R1_MODULE = "open_r1.rewards"


# `trl grpo`'s registry (trl/scripts/grpo.py): name -> import path (trl is installed with us).
TRL_REWARDS: dict[str, str | None] = {
    "accuracy_reward": "trl.rewards:accuracy_reward",
    "reasoning_accuracy_reward": "trl.rewards:reasoning_accuracy_reward",
    "think_format_reward": "trl.rewards:think_format_reward",
    "get_soft_overlong_punishment": None,
}
