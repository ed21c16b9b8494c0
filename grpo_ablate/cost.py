"""What a study will cost before its first trial: GPU-hours per trial and for the whole study.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml      # "GPU time (estimate): ..."

A cluster study is planned on a laptop, so this reads nothing that needs the model's weights or a
network: the parameter count comes from the model's config.json when it is a local folder or in
the Hugging Face cache, else it is said to be unknown. Without a measurement (a finished trial or
probe.json) the figure is a range from the assumptions below, printed with it, and labelled as an
estimate: generation is bound by memory bandwidth (tokens per second fall with the model's size),
training by compute (6 x parameters FLOPs per trained token).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablate.bounds import BOUNDS
from grpo_ablate.errors import StudyError
from grpo_ablate.safe_read import MB, read_bytes

PARAMETERS = BOUNDS["parameters"]

__all__ = ["Assumptions", "ASSUMED", "GpuEstimate", "model_parameters", "parameters_from_config", "assumed_trial_seconds",
           "hours", "fmt_hours", "fmt_range"]


@dataclass(frozen=True)
class Assumptions:
    """Per-GPU rates the range is built from; (low, high) each, the low giving the long estimate."""

    generation_tokens_per_s_vllm: tuple[float, float] = (1000.0, 5000.0)  # for a 7 B model, batched decoding
    generation_tokens_per_s_hf: tuple[float, float] = (150.0, 800.0)  # transformers' generate, no vLLM
    reference_parameters: float = 7e9  # the size the generation rates are quoted for; scaled inversely
    training_flops_per_s: tuple[float, float] = (100e12, 300e12)  # achieved bf16 FLOP/s (of ~1e15 peak on an H100)
    startup_s: tuple[float, float] = (60.0, 300.0)  # per trial: launch, model load, vLLM start

    def words(self, vllm: bool) -> str:
        gen = self.generation_tokens_per_s_vllm if vllm else self.generation_tokens_per_s_hf
        return (f"generation {gen[0]:,.0f}-{gen[1]:,.0f} tokens/s per GPU for a {self.reference_parameters / 1e9:g} B model "
                f"({'vLLM' if vllm else 'transformers generate, no vLLM'}), scaled by {self.reference_parameters / 1e9:g} B / "
                f"model size; training 6 x parameters FLOPs per token x num_iterations at "
                f"{self.training_flops_per_s[0] / 1e12:g}-{self.training_flops_per_s[1] / 1e12:g} TFLOP/s achieved per GPU; "
                f"every completion max_completion_length tokens long (an upper bound), prompt tokens not counted; "
                f"{self.startup_s[0] / 60:g}-{self.startup_s[1] / 60:g} min start-up per trial")


ASSUMED = Assumptions()
_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")


@dataclass(frozen=True)
class GpuEstimate:
    """GPU-hours per trial and for the study: one value when measured, a (low, high) range when assumed."""

    gpus: int
    trials: int
    per_trial_h: tuple[float, float]
    source: str  # where the seconds come from, or the assumptions in words

    @property
    def study_h(self) -> tuple[float, float]:
        return (self.per_trial_h[0] * self.trials, self.per_trial_h[1] * self.trials)

    def as_dict(self) -> dict[str, Any]:
        return {"gpus_per_trial": self.gpus, "trials": self.trials, "gpu_hours_per_trial": list(self.per_trial_h),
                "gpu_hours_study": list(self.study_h), "source": self.source}


def parameters_from_config(config: dict[str, Any]) -> int | None:
    """A decoder's parameter count from its config.json (embeddings, attention with grouped KV
    heads, a gated MLP, per layer); None when the keys are not there. Exact for Llama/Qwen-style models
    up to norms and biases, which are a tiny share."""
    config = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    try:
        h = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        vocab = int(config["vocab_size"])
        inter = int(config.get("intermediate_size") or 4 * h)
        heads = int(config.get("num_attention_heads") or 1)
        kv = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or h // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if min(h, layers, vocab, inter, heads, kv, head_dim) <= 0:  # not a model's shape
        return None
    attention = h * heads * head_dim * 2 + h * kv * head_dim * 2  # q and o; k and v
    mlp = 3 * h * inter
    embeddings = vocab * h * (1 if config.get("tie_word_embeddings") else 2)
    return embeddings + layers * (attention + mlp)


def model_parameters(name_or_path: str, revision: str | None = None) -> tuple[int | None, str]:
    """(parameters, where from) read offline: a local folder's config.json, else the HF cache's,
    else the size in the model's name ("1.5B"); (None, why) when none of them says."""
    if name_or_path.startswith("builtin:"):
        return None, "a built-in model (CPU-sized)"
    candidates: list[Path] = [Path(name_or_path) / "config.json"]
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name_or_path, "config.json", revision=revision)
        if isinstance(cached, str):
            candidates.append(Path(cached))
    except Exception:  # noqa: BLE001 - not a repo id, or no cache: the size is then unknown, said as such
        pass
    odd: list[str] = []
    for path in candidates:
        try:
            config = json.loads(read_bytes(path, "model config", 16 * MB))
        except (OSError, ValueError, StudyError):  # missing, a FIFO, too large, not JSON: not a size
            continue
        n = parameters_from_config(config) if isinstance(config, dict) else None
        if n and (problem := PARAMETERS.problem(n)) is None:
            return n, f"config.json of {name_or_path}"
        if n:
            odd.append(f"its config.json gives {n:,} parameters, which {problem}")
    named = _SIZE_IN_NAME.search(Path(name_or_path).name)
    if named:  # "Qwen2.5-1.5B-Instruct": the size its publisher wrote in the name
        n = int(float(named.group(1)) * 1e9)
        if (problem := PARAMETERS.problem(n)) is None:
            return n, f"read from the name {Path(name_or_path).name!r}; no config.json offline"
        odd.append(f"its name says {named.group(1)} B parameters, which {problem}")
    why = "; ".join(odd) or f"no config.json of {name_or_path} readable offline (a local folder or the HF cache)"
    return None, f"unknown: {why}"


def assumed_trial_seconds(parameters: int, completions: int, completion_tokens: int, num_iterations: int,
                          training_gpus: int, generation_gpus: int, vllm: bool,
                          assumed: Assumptions = ASSUMED) -> tuple[float, float]:
    """(short, long) wall seconds of one trial from the stated assumptions."""
    tokens = completions * completion_tokens
    rates = assumed.generation_tokens_per_s_vllm if vllm else assumed.generation_tokens_per_s_hf
    scale = assumed.reference_parameters / parameters
    flops = 6.0 * parameters * tokens * max(1, num_iterations)
    out = []
    for gen_rate, train_rate, startup in zip(reversed(rates), reversed(assumed.training_flops_per_s), assumed.startup_s):
        gen = tokens / (gen_rate * scale * max(1, generation_gpus))
        train = flops / (train_rate * max(1, training_gpus))
        out.append(startup + gen + train)
    return (out[0], out[1])


def hours(seconds: float, gpus: int) -> float:
    return seconds * gpus / 3600.0


def fmt_hours(h: float) -> str:
    if h < 0.1:
        return f"{h * 60:.0f} GPU-min" if h * 60 >= 1 else "under 1 GPU-min"
    return f"{h:,.{1 if h < 10 else 0}f} GPU-h"


def fmt_range(lo: float, hi: float) -> str:
    if math.isclose(lo, hi, rel_tol=1e-9):
        return f"about {fmt_hours(lo)}"
    return f"{fmt_hours(lo)} to {fmt_hours(hi)}"
