"""A GRPO training script laid out as Open R1's `src/open_r1/grpo.py` is: a user's own script for the command-trial tests.

    python openr1_style_grpo.py --config recipe.yaml [--key value ...]

TRL's TrlParser reads the recipe (--config) into the script's arguments, GRPOConfig and ModelConfig, and every
later `--key value` overrides it, as grpo-ablate's command trials pass theirs. It loads the model and tokenizer
from the recipe's model_name_or_path, the prompts from dataset_name (a hub id, or a local .jsonl), names its
rewards through a small registry (reward_funcs), resumes from --resume_from_checkpoint or the output folder's
last checkpoint, trains, and saves the trainer state and the final model. Written for this repository's
tests; it imports nothing of grpo_ablate and runs on the TRL its environment has (tests use TRL 0.18.0).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import datasets
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
from transformers.trainer_utils import get_last_checkpoint
from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser


@dataclass
class GRPOScriptArguments(ScriptArguments):
    """The script's own keys beside TRL's: which rewards to train on."""

    reward_funcs: list[str] = field(default_factory=lambda: ["exact_answer"],
                                    metadata={"help": "reward names of REWARDS"})


def exact_answer(completions, answer, **kwargs):
    """1.0 when the completion, up to its end, is the row's answer."""
    texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    return [1.0 if t.strip() == str(a) else 0.0 for t, a in zip(texts, answer)]


def digits_only(completions, **kwargs):
    """0.1 for a completion made of digits only."""
    texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    return [0.1 if t.strip().isdigit() else 0.0 for t in texts]


REWARDS = {"exact_answer": exact_answer, "digits_only": digits_only}


def load_prompts(script_args: GRPOScriptArguments) -> datasets.Dataset:
    name = script_args.dataset_name
    if name.endswith(".jsonl"):
        return datasets.load_dataset("json", data_files=name, split="train")
    return datasets.load_dataset(name, name=script_args.dataset_config, split=script_args.dataset_train_split)


def main(script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig) -> None:
    set_seed(training_args.seed)
    transformers.utils.logging.set_verbosity_warning()
    dataset = load_prompts(script_args)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    trainer = GRPOTrainer(model=model, reward_funcs=[REWARDS[n] for n in script_args.reward_funcs],
                          args=training_args, train_dataset=dataset, processing_class=tokenizer)
    checkpoint = training_args.resume_from_checkpoint
    if checkpoint is None and os.path.isdir(training_args.output_dir):
        checkpoint = get_last_checkpoint(training_args.output_dir)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.log_metrics("train", result.metrics)
    trainer.save_state()
    trainer.save_model(training_args.output_dir)


if __name__ == "__main__":
    parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
    main(*parser.parse_args_and_config())
    sys.exit(0)
