"""The built-in character tokenizer: digits, a few operators and lowercase letters, no download.

Character level, so every prompt and answer tokenizes the same on every machine, and the
embedding table (most of a tiny model's parameters) stays small.

    python -c "from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer; print(build_tokenizer()('47+8=').input_ids)"
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_LENGTH", "SPECIAL_TOKENS", "VOCAB_CHARS", "build_tokenizer"]

# Characters the tokenizer knows; anything else maps to <unk>.
VOCAB_CHARS = "0123456789+-*=<>:;,.?! abcdefghijklmnopqrstuvwxyz"
SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>")
# The longest text (prompt + completion, in characters) the tiny model takes.
MAX_LENGTH = 64


def build_tokenizer(model_max_length: int = MAX_LENGTH) -> Any:
    """A character-level `PreTrainedTokenizerFast`, padding on the left as generation wants.

    Passing it to GRPOTrainer as `processing_class` keeps the trainer from reaching for the hub.
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
        model_max_length=model_max_length,
    )
