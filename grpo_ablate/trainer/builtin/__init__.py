"""What the trainer needs to run with no network: the tiny model, its tokenizer and the tasks.

- `tokenizer`: the character tokenizer;
- `model`: the tiny Qwen2, its warm start and the on-disk cache (built once, under a file lock);
- `tasks`: the task definitions, their datasets and their exact-answer rewards;
- `recipe`: the trainer section they learn with on a CPU (`studies/tiny-cpu.yaml`'s).

The names and descriptions are the vocabulary's (`grpo_ablate.core.vocab`); the code is here.
"""
