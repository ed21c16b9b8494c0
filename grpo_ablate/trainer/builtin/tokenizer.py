"""The built-in character tokenizer: digits, a few operators and lowercase letters (plus a user
dataset's own characters, for the CPU smoke test of one's own data), no download.

Character level, so every prompt and answer tokenizes the same on every machine, and the
embedding table (most of a tiny model's parameters) stays small.

    python -c "from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer; print(build_tokenizer()('47+8=').input_ids)"
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

from grpo_ablate.contract.spec import DataSpec

__all__ = ["DATASET_MAX_LENGTH", "MAX_LENGTH", "SPECIAL_TOKENS", "VOCAB_CHARS", "build_tokenizer", "dataset_characters",
           "format_characters", "load_builtin_tokenizer", "unencodable_prompts"]

# Characters the tokenizer knows; anything else maps to <unk>.
VOCAB_CHARS = "0123456789+-*=<>:;,.?! abcdefghijklmnopqrstuvwxyz"
SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>")
# The longest text (prompt + completion, in characters) the tiny model takes.
MAX_LENGTH = 64
# ... and over a user's dataset, whose prompts are longer than the built-in tasks' (a smoke test)
DATASET_MAX_LENGTH = 2048


def dataset_characters(rows: Iterable[Any]) -> str:
    """Every character in the rows' text (strings anywhere in their values), beyond VOCAB_CHARS, sorted.

    The tiny model over a user's dataset knows these too, so its prompts and answers tokenize
    without <unk> and the reward sees real text.
    """
    seen: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, str):
            seen.update(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for row in rows:
        walk(row)
    return "".join(sorted(seen - set(VOCAB_CHARS)))


# What joins a system prompt to a plain-text prompt (trainer/prompts.py format_prompts) and ends lines in templates.
PROMPT_SEPARATORS = "\n"


def format_characters(data: DataSpec) -> str:
    """Every character the trial's prompt formatting adds to the dataset's own text: the system prompt, a chat
    template given as text (all of its characters, its literal strings among them: a superset of what it renders)
    and the separators; beyond VOCAB_CHARS, sorted. With dataset_characters, the tiny model over a user's data
    (the CPU smoke test) can encode every prompt a recipe's system prompt or chat template makes."""
    seen = set(PROMPT_SEPARATORS)
    for value in (data.system_prompt, data.chat_template):
        if isinstance(value, str):
            seen.update(value)
    return "".join(sorted(seen - set(VOCAB_CHARS)))


def build_tokenizer(model_max_length: int = MAX_LENGTH, extra_chars: str = "") -> Any:
    """A character-level `PreTrainedTokenizerFast`, padding on the left as generation wants.

    `extra_chars` extends the vocabulary (a user's dataset: `dataset_characters`). Passing it to
    GRPOTrainer as `processing_class` keeps the trainer from reaching for the hub.
    """
    # lazy: builtin/model.py imports this module and must load no torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = VOCAB_CHARS + "".join(c for c in dict.fromkeys(extra_chars) if c not in VOCAB_CHARS)
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *chars])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # every character its own piece, newlines included (a bare "." left "\n\n" one piece, unknown to the vocabulary)
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=model_max_length,
    )


def load_builtin_tokenizer(path: Any) -> Any:
    """The tokenizer saved with a built-in model, as it was built.

    Not AutoTokenizer: transformers 5 maps the folder's model type (qwen2) to Qwen2Tokenizer, which
    rebuilds a byte-level pre-tokenizer over this vocabulary, so a space or any non-ASCII character
    (an emoji, an accented letter) encodes to nothing: an emoji-only prompt became an empty one and
    generate failed with an IndexError. Loaded as the class it was saved from, every character the
    vocabulary holds encodes to its own token.
    """
    # lazy: builtin/model.py imports this module and must load no torch
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(path, padding_side="left")


def unencodable_prompts(prompts: Iterable[Any], tokenizer: Any, limit: int = 5, *, batch: int = 1024) -> list[str]:
    """Up to `limit` descriptions ("row 3: '😀' -> <unk>") of plain-text prompts the tokenizer cannot
    encode: no token at all, or a character it maps to <unk>; empty when every prompt encodes.

    The prompts are encoded `batch` at a time (one call of the fast tokenizer each, not one per
    prompt: 2,000 prompts took 0.14 s of a trial's start one by one); only a prompt that fails is
    looked at character by character.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    bad: list[str] = []
    rows = ((i, prompt) for i, prompt in enumerate(prompts) if isinstance(prompt, str))  # chat messages: the template decides
    while len(bad) < limit:
        chunk = list(itertools.islice(rows, batch))
        if not chunk:
            break
        encoded = tokenizer([prompt for _, prompt in chunk], add_special_tokens=False)["input_ids"]
        for (i, prompt), ids in zip(chunk, encoded):
            if ids and unk not in ids:
                continue
            lost = "".join(c for c in dict.fromkeys(prompt)
                           if tokenizer(c, add_special_tokens=False)["input_ids"] in ([], [unk]))
            bad.append(f"row {i + 1}: {prompt[:40]!r} -> " + (f"<unk> or nothing for {lost!r}" if lost else "no token"))
            if len(bad) >= limit:
                break
    return bad
