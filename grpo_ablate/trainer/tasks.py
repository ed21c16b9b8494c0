"""Built-in offline tasks and the tiny model that learns them: the product demo with no network.

A GRPO demo on a 2-core CPU needs three things the hub would normally supply: a model, a
tokenizer and a task with a verifiable reward. Here all three are built locally:

- the tokenizer is character level (digits, a few operators, lowercase letters), built with the
  `tokenizers` library, so every prompt and answer tokenizes the same on every machine;
- the model is a 2-layer, 64-wide Qwen2 (~135k parameters) built from a config;
- the task, "addition", is a carry drill: a 2-digit plus a 1-digit number whose units carry
  (`47+8=` -> `55`), one right answer checked exactly, reward 1 or 0.

A randomly initialised model never answers correctly, so GRPO would see only zero-spread groups
and learn nothing. The model is therefore warm-started (400 supervised steps, ~25-30 s on 2
cores, once) on answers that forget the carry 80% of the time (`47+8=` -> `45`): a learner that
knows how to add but slips. After it the greedy answer is always the slip (0% exact) and a
sample at temperature 1 is right ~18% of the time. GRPO's verified reward has one clear,
learnable job: carry. With the settings below the reward climbs from ~0.2 to ~0.85-0.95 in 50
optimizer steps (3-5 s of training), for every num_generations from 2 to 16, and the group size
shows in the curves as the domain predicts. Measured at a fixed 64 completions per step, seed 0
(`python benchmarks/group_size.py` reruns it, ~2 minutes):

    temperature  G   start  final  zero-spread groups  stability_variance  steps to 0.6
    0.7          2   0.15   0.95   0.82                0.0012              17
    0.7          16  0.13   0.95   0.35                0.0089              24
    1.0          2   0.24   0.89   0.72                0.0020              18
    1.0          8   0.22   0.85   0.29                0.0051              16
    1.0          16  0.21   0.85   0.14                0.0094              24

Small groups waste most prompts (all completions agree) but see 8x more prompts per step, so
their curve is steadier; G=16 sees 4 prompts per step and climbs later.
What failed, for the record: a warm start that is merely undertrained, or that
learns random near-miss answers, leaves a 2-layer model whose policy gradient has no shared
direction to follow; RL then drifts instead of learning.

The warm-started model is saved (model + tokenizer) under `$GRPO_ABLATE_CACHE` (default
`~/.cache/grpo-ablate`), in a folder named by a hash of every setting that shapes it and of the
torch/transformers versions, written to a temporary folder and renamed into place under a file
lock, so parallel trials build it once and never see half a model. Because it lives on disk,
`beta > 0` works: TRL reloads the reference model from the policy's path.

    python -m grpo_ablate.trainer.tasks addition      # build (or find) the cached model, print accuracy

Recommended settings for the built-in task on a 2-core CPU (`studies/tiny-cpu.yaml`), measured
with num_generations 2..16 and temperature 0.6-1.3 (reward ~0.2 -> ~0.85 in 50 steps, 3-5 s
of training per trial plus ~7 s of process start-up):

    model:
      name_or_path: builtin:tiny
    data:
      task: addition
      num_prompts: 2000
    rewards: []                           # the task's own exact-answer reward
    trainer:
      learning_rate: 3.0e-4               # 1e-3 learns faster, then collapses
      per_device_train_batch_size: 64     # 64 completions per step: G=2 -> 32 prompts, G=16 -> 4
      gradient_accumulation_steps: 1
      max_completion_length: 6            # answers are <= 3 digits + <eos>
      lr_scheduler_type: constant
      beta: 0.0                           # 0.04 also works (reference reloaded from the cache)
      temperature: 1.0                    # searched: 0.6-1.3
      num_generations: 8                  # searched: 2, 4, 8, 16 (all divide 64)
      seed: 0
    budget:
      max_steps: 50
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .rewards import completion_text

__all__ = [
    "TINY_CPU_TRAINER",
    "BUILTIN_MODEL_PREFIX",
    "BUILTIN_MODELS",
    "TASKS",
    "Task",
    "TinyModelSettings",
    "WarmStartSettings",
    "build_tokenizer",
    "builtin_model_path",
    "cache_root",
    "is_builtin_model",
    "task_dataset",
    "task_reward",
]

BUILTIN_MODEL_PREFIX = "builtin:"

# Characters the built-in tokenizer knows; anything else maps to <unk>. Small on purpose: the
# embedding table is most of a tiny model's parameters.
VOCAB_CHARS = "0123456789+-*=<>:;,.?! abcdefghijklmnopqrstuvwxyz"
SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>")


@dataclass(frozen=True)
class TinyModelSettings:
    """The tiny Qwen2's shape. Changing any field changes the cache key."""

    hidden_size: int = 64
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = 64
    init_seed: int = 0


@dataclass(frozen=True)
class WarmStartSettings:
    """The supervised warm start: a learner that knows the format and the sum but slips.

    With probability `noise` a training answer is replaced by the task's typical slip (for
    addition: the carry forgotten), so the model puts most of its mass on the slip and some on
    the right answer. That is the state GRPO is good at fixing: every prompt's right and wrong
    completions differ in the same way, so the policy gradient of all prompts points one way.
    """

    steps: int = 400
    batch_size: int = 256
    learning_rate: float = 3e-3
    warmup_fraction: float = 0.1
    noise: float = 0.8
    seed: int = 0


@dataclass(frozen=True)
class Task:
    """A built-in task: a problem generator with one right answer per prompt, and its reward."""

    name: str
    description: str
    make_problem: Callable[[random.Random], tuple[str, str]]
    score: Callable[[str, str], float]
    max_answer_chars: int
    # A plausible wrong answer for the warm start's label noise.
    corrupt: Callable[[random.Random, str, str], str]
    warm_start: WarmStartSettings = field(default_factory=WarmStartSettings)
    params: dict[str, Any] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """Everything that shapes the warm-started model, for the cache key."""
        return {"task": self.name, "params": self.params, "warm_start": asdict(self.warm_start)}


def _addition_problem(digits_a: int, digits_b: int, carry_only: bool = False) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        while True:
            a, b = rng.randrange(10**digits_a), rng.randrange(10**digits_b)
            if not carry_only or (a % 10) + (b % 10) >= 10:
                break
        # Fixed-width operands: every prompt has the same length, so generation batches need no
        # padding and the digits line up for a 2-layer model.
        return f"{a:0{digits_a}d}+{b:0{digits_b}d}=", str(a + b)

    return make


def _forgot_carry(rng: random.Random, prompt: str, answer: str) -> str:
    """The sum with the units carry dropped: the classic slip of a learner."""
    a, b = (int(x) for x in prompt.rstrip("=").split("+"))
    return str(a + b - 10) if (a % 10) + (b % 10) >= 10 else answer




def _exact_answer(completion: str, answer: str) -> float:
    """1.0 when the completion, up to its end token and surrounding spaces, is the answer."""
    text = completion.split("<eos>", 1)[0].strip()
    return 1.0 if text == answer else 0.0


TASKS: dict[str, Task] = {
    "addition": Task(
        name="addition",
        description=(
            "Carry drill: add a 2-digit and a 1-digit number whose units carry (`47+8=` -> `55`); "
            "reward 1 for the exact sum, else 0."
        ),
        make_problem=_addition_problem(2, 1, carry_only=True),
        score=_exact_answer,
        max_answer_chars=3,
        corrupt=_forgot_carry,
        params={"digits": [2, 1], "carry_only": True, "slip": "forgot_carry"},
    ),
}

# The docstring's recommended trainer section as data, for tests and benchmarks (the study file
# `studies/tiny-cpu.yaml` carries the same values for users to read and change).
TINY_CPU_TRAINER: dict[str, Any] = {
    "learning_rate": 3.0e-4,
    "per_device_train_batch_size": 64,
    "gradient_accumulation_steps": 1,
    "max_completion_length": 6,
    "lr_scheduler_type": "constant",
    "beta": 0.0,
    "temperature": 1.0,
    "num_generations": 8,
    "seed": 0,
}

# Built-in model names accepted as `model.name_or_path`.
BUILTIN_MODELS: dict[str, str] = {
    "builtin:tiny": "2-layer, 64-wide Qwen2; warm-started on the data section's built-in task when there is one.",
    "builtin:tiny-untrained": "the same model, randomly initialised (no warm start): shows GRPO cannot start from zero reward.",
}


def is_builtin_model(name_or_path: str) -> bool:
    return name_or_path.startswith(BUILTIN_MODEL_PREFIX)


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown built-in task {name!r}; choose one of {sorted(TASKS)}") from None


# --------------------------------------------------------------------------------------------
# Data and reward: what GRPOTrainer consumes
# --------------------------------------------------------------------------------------------


def task_problems(name: str, num_prompts: int, seed: int = 1234) -> list[tuple[str, str]]:
    """`num_prompts` (prompt, answer) pairs, the same for the same seed on every machine."""
    task = get_task(name)
    rng = random.Random(f"{name}:{seed}")
    return [task.make_problem(rng) for _ in range(num_prompts)]


def task_dataset(name: str, num_prompts: int = 2000, seed: int = 1234):
    """A `datasets.Dataset` with `prompt` (plain text) and `answer`; the reward reads `answer`."""
    from datasets import Dataset

    pairs = task_problems(name, num_prompts, seed)
    return Dataset.from_dict({"prompt": [p for p, _ in pairs], "answer": [a for _, a in pairs]})


def task_reward(name: str) -> Callable[..., list[float]]:
    """The task's reward as a TRL reward function: reads the dataset's `answer` column."""
    task = get_task(name)

    def reward(completions: Sequence[Any], answer: Sequence[str] | None = None, **_: Any) -> list[float]:
        if answer is None:
            raise ValueError(
                f"the {name!r} reward needs the dataset's `answer` column; it is only valid with data.task: {name}"
            )
        return [task.score(completion_text(c), str(a)) for c, a in zip(completions, answer, strict=True)]

    reward.__name__ = name
    return reward


# --------------------------------------------------------------------------------------------
# Tokenizer and model
# --------------------------------------------------------------------------------------------


def build_tokenizer():
    """A character-level `PreTrainedTokenizerFast` built with no download.

    Passing it to GRPOTrainer as `processing_class` keeps the trainer from reaching for the hub.
    Padding is on the left, as generation wants.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *VOCAB_CHARS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=TinyModelSettings().max_position_embeddings,
    )


def build_tiny_model(tokenizer, settings: TinyModelSettings = TinyModelSettings()):
    """A randomly initialised tiny Qwen2, seeded so every build is identical."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    vocab_size = len(tokenizer)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=settings.num_key_value_heads,
        max_position_embeddings=settings.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with _seeded(settings.init_seed):
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model.to(torch.float32)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed torch's global generator for a block, then restore it (the trainer seeds its own)."""
    import torch

    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def _warm_start(model, tokenizer, task: Task) -> dict[str, float]:
    """Supervised steps on the task's (prompt, answer) pairs, loss on the answer only."""
    import torch

    ws = task.warm_start
    rng = random.Random(f"warm:{task.name}:{ws.seed}")
    eos = tokenizer.eos_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=ws.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=ws.learning_rate, total_steps=ws.steps, pct_start=ws.warmup_fraction
    )
    # Character-level vocabulary: encode by lookup instead of calling the tokenizer 200k times.
    vocab = tokenizer.get_vocab()
    unk = tokenizer.unk_token_id

    def encode(text: str) -> list[int]:
        return [vocab.get(ch, unk) for ch in text]

    model.train()
    loss_value = float("nan")
    with _seeded(ws.seed):
        for _ in range(ws.steps):
            rows, labels = [], []
            for _ in range(ws.batch_size):
                prompt, answer = task.make_problem(rng)
                if rng.random() < ws.noise:
                    answer = task.corrupt(rng, prompt, answer)
                p_ids, a_ids = encode(prompt), encode(answer) + [eos]
                rows.append(p_ids + a_ids)
                labels.append([-100] * len(p_ids) + a_ids)
            width = max(map(len, rows))
            # Right padding for training; the pad positions are masked out of the loss.
            ids = torch.full((len(rows), width), tokenizer.pad_token_id)
            lab = torch.full((len(rows), width), -100)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, (r, l) in enumerate(zip(rows, labels)):
                ids[i, : len(r)] = torch.tensor(r)
                lab[i, : len(l)] = torch.tensor(l)
                mask[i, : len(r)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
            loss_value = float(loss.item())
    model.eval()
    return {"final_loss": loss_value}


def task_accuracy(model, tokenizer, task_name: str, *, n: int = 512, temperature: float | None = None, seed: int = 99) -> float:
    """Share of `n` fresh problems answered exactly (greedy when temperature is None)."""
    import torch

    task = get_task(task_name)
    rng = random.Random(f"eval:{task_name}:{seed}")
    problems = [task.make_problem(rng) for _ in range(n)]
    enc = tokenizer([p for p, _ in problems], return_tensors="pt", padding=True, add_special_tokens=False)
    gen_kwargs: dict[str, Any] = {"max_new_tokens": task.max_answer_chars + 2, "do_sample": temperature is not None}
    if temperature is not None:
        gen_kwargs.update(temperature=temperature, top_k=None, top_p=None)
    model.eval()
    with _seeded(seed), torch.no_grad():
        out = model.generate(**enc, **gen_kwargs)
    texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=False)
    return sum(task.score(t, a) for t, (_, a) in zip(texts, problems)) / n


# --------------------------------------------------------------------------------------------
# The on-disk cache
# --------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """`$GRPO_ABLATE_CACHE`, else `~/.cache/grpo-ablate`."""
    env = os.environ.get("GRPO_ABLATE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "grpo-ablate"


def _cache_key(settings: dict[str, Any]) -> str:
    import torch
    import transformers

    # Library versions are part of the key: the same seed gives different weights across them.
    full = {**settings, "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    return hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:12]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so parallel trials build a model once (POSIX; no-op elsewhere)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic rename still prevents torn reads
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def builtin_model_path(name: str, task_name: str | None, *, log: Callable[[str], None] = print) -> Path:
    """The folder holding the built-in model (and its tokenizer), building it on first use.

    `builtin:tiny` with a built-in task is warm-started on that task; `builtin:tiny-untrained`,
    or `builtin:tiny` with a user dataset, is the seeded random model. Either way it is on disk,
    so TRL can reload it as the reference model when beta > 0.
    """
    if name not in BUILTIN_MODELS:
        raise ValueError(f"unknown built-in model {name!r}; choose one of {sorted(BUILTIN_MODELS)}")
    model_settings = TinyModelSettings()
    task = get_task(task_name) if (task_name and name == "builtin:tiny") else None
    settings: dict[str, Any] = {
        "model": asdict(model_settings),
        "vocab": [*SPECIAL_TOKENS, *VOCAB_CHARS],
        "warm_start": task.settings() if task else None,
    }
    label = f"tiny-{task.name}" if task else "tiny-untrained"
    target = cache_root() / "models" / f"{label}-{_cache_key(settings)}"
    if (target / "config.json").exists():
        return target
    with _file_lock(target.with_suffix(".lock")):
        if (target / "config.json").exists():  # another trial built it while we waited
            return target
        started = time.perf_counter()
        log(f"building built-in model {label} in {target} (once; cached)")
        tokenizer = build_tokenizer()
        model = build_tiny_model(tokenizer, model_settings)
        info: dict[str, Any] = {"settings": settings}
        if task is not None:
            info.update(_warm_start(model, tokenizer, task))
            info["greedy_accuracy"] = task_accuracy(model, tokenizer, task.name)
            info["sampled_accuracy_t1"] = task_accuracy(model, tokenizer, task.name, temperature=1.0)
        info["build_seconds"] = round(time.perf_counter() - started, 2)
        staging = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=target.parent))
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            (staging / "grpo_ablate_builtin.json").write_text(json.dumps(info, indent=2))
            os.replace(staging, target)  # atomic: readers see no folder or a whole one
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        log(f"built {label} in {info['build_seconds']} s: " + json.dumps({k: v for k, v in info.items() if k != 'settings'}))
    return target


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Build (or find) the cached built-in model for a task.")
    parser.add_argument("task", nargs="?", default="addition", choices=sorted(TASKS))
    args = parser.parse_args(argv)
    path = builtin_model_path("builtin:tiny", args.task)
    info = json.loads((path / "grpo_ablate_builtin.json").read_text())
    print(path)
    print(json.dumps({k: v for k, v in info.items() if k != "settings"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
