"""What a trial costs, as arithmetic: the GPUs `hardware.gpu_type` names, the stated per-GPU rates,
FLOPs per trained token, the recipe's full-run length, and GPU-hours. Pure: no study, no files.

    python -c "from grpo_ablate.core.cost import GPU_TYPES; print(GPU_TYPES['H20'])"

estimate.py applies it to a study (measured where possible). Training is bound by compute (FLOPs
per trained token: 6 x parameters, +2x each for gradient checkpointing's recomputed forward, a
reference model (beta > 0) and old log-probabilities (num_iterations > 1)); generation by memory
bandwidth. The GPU table keeps two figures per GPU: dense BF16 tensor throughput and memory
bandwidth (vendors print BF16 "with sparsity"; the dense figure is half of it). The parameter count
is read offline: config.json in a local folder or the Hugging Face cache, else the size in the
model's name, else it is said to be unknown.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from grpo_ablate.core.bounds import BOUNDS
from grpo_ablate.core.errors import StudyError
from grpo_ablate.core.safe_read import MB, read_bytes

PARAMETERS = BOUNDS["parameters"]

__all__ = ["Gpu", "GPU_TYPES", "REFERENCE_GPU", "Assumptions", "ASSUMED", "TrialEstimate", "FullRun", "full_run_steps",
           "warmup_steps", "lr_schedule_of", "model_parameters", "parameters_from_config", "assumed_trial_seconds", "flops_per_token", "hours", "fmt_hours", "fmt_range",
           "Price", "price", "RunShare", "parse_share", "fmt_multiple", "Branching", "study_total"]


# ------------------------------------------------------------------ GPUs (hardware.gpu_type)

@dataclass(frozen=True)
class Gpu:
    name: str
    bf16_tflops: float  # dense BF16 tensor-core peak
    bandwidth_tb_s: float  # HBM / GDDR bandwidth
    memory_gb: int
    source: str


GPU_TYPES: dict[str, Gpu] = {g.name: g for g in (
    Gpu("H100", 989.0, 3.35, 80, "NVIDIA H100 SXM5 datasheet, nvidia.com/en-us/data-center/h100 (1,979 TFLOPS BF16 with sparsity)"),
    Gpu("H200", 989.0, 4.8, 141, "NVIDIA H200 SXM datasheet, nvidia.com/en-us/data-center/h200 (1,979 TFLOPS BF16 with sparsity)"),
    Gpu("H20", 148.0, 4.0, 96, "NVIDIA HGX H20 as reported from its product brief (148 TFLOPS BF16 dense, 4.0 TB/s, 96 GB HBM3); "
                               "no public nvidia.com datasheet"),
    Gpu("A100", 312.0, 2.039, 80, "NVIDIA A100 80GB SXM datasheet, nvidia.com/en-us/data-center/a100 (624 TFLOPS BF16 with sparsity)"),
    Gpu("L40S", 362.0, 0.864, 48, "NVIDIA L40S datasheet, nvidia.com/en-us/data-center/l40s (733 TFLOPS BF16 with sparsity)"),
)}

# The GPU the estimate's unqualified rates are quoted for (hardware.gpu_type unset).
REFERENCE_GPU = GPU_TYPES["H100"]


@dataclass(frozen=True)
class Assumptions:
    """The rates an unmeasured estimate is built from; (low, high) each, the low giving the long estimate."""

    # vLLM decoding throughput per GPU of a 7 B model on the reference GPU (H100), batched over a
    # generation round; scaled by (7 B / model size) and by the GPU's bandwidth over the H100's
    generation_tokens_per_s_vllm: tuple[float, float] = (1500.0, 4000.0)
    generation_tokens_per_s_hf: tuple[float, float] = (150.0, 800.0)  # transformers' generate, no vLLM
    reference_parameters: float = 7e9
    mfu: tuple[float, float] = (0.15, 0.40)  # achieved share of the GPU's dense BF16 peak while training
    startup_s: tuple[float, float] = (60.0, 300.0)  # per trial: launch, model load, vLLM start
    # mean completion length as a share of max_completion_length when nothing measured it
    completion_share: tuple[float, float] = (0.25, 1.0)
    # mean prompt length as a share of data.max_prompt_tokens (prompt tokens are trained on too)
    prompt_share: tuple[float, float] = (0.1, 0.5)

    def words(self, vllm: bool, gpu: Gpu, gpu_named: bool) -> str:
        gen = self.generation_tokens_per_s_vllm if vllm else self.generation_tokens_per_s_hf
        which = (f"{gpu.name} ({gpu.bf16_tflops:g} TFLOPS BF16 dense, {gpu.bandwidth_tb_s:g} TB/s; {gpu.source})"
                 if gpu_named else f"{gpu.name}-like GPUs (hardware.gpu_type unset; set it to narrow this)")
        return (f"{which}; generation {gen[0]:,.0f}-{gen[1]:,.0f} tokens/s per H100 for a "
                f"{self.reference_parameters / 1e9:g} B model ({'vLLM' if vllm else 'transformers generate, no vLLM'}), "
                f"scaled by {self.reference_parameters / 1e9:g} B / model size and by bandwidth; training at "
                f"{self.mfu[0]:.0%}-{self.mfu[1]:.0%} of the BF16 peak; {self.startup_s[0] / 60:g}-"
                f"{self.startup_s[1] / 60:g} min start-up per trial; each range read as a 95% band, combined as independent")


ASSUMED = Assumptions()
_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")


@dataclass(frozen=True)
class TrialEstimate:
    """One trial's cost: wall seconds and GPU-hours, a (short, long) pair (equal when measured).

    `seconds` is None when nothing is known (an unknown model size and no measurement);
    `gpu_hours` is None on CPU. `source` says where the figures come from, in one sentence.
    """

    seconds: tuple[float, float] | None
    gpus: int
    measured: bool
    source: str
    completions: int | None = None  # generated per trial (None for a budget of tokens or seconds only)
    full_run_steps: int | None = None  # the recipe's full run, in optimizer steps at its G
    full_run_share: float | None = None  # one trial as a share of that run (optimizer steps)
    full_run_seconds: tuple[float, float] | None = None  # the whole recipe run on this hardware, same rates
    pace: tuple[float, float] | None = None  # measured: (seconds per completion, seconds per trial outside training)

    @property
    def gpu_hours(self) -> tuple[float, float] | None:
        if self.seconds is None or not self.gpus:
            return None
        return (hours(self.seconds[0], self.gpus), hours(self.seconds[1], self.gpus))

    @property
    def full_run_gpu_hours(self) -> tuple[float, float] | None:
        if self.full_run_seconds is None or not self.gpus:
            return None
        return (hours(self.full_run_seconds[0], self.gpus), hours(self.full_run_seconds[1], self.gpus))

    def study_gpu_hours(self, trials: int) -> tuple[float, float] | None:
        h = self.gpu_hours
        return None if h is None else (h[0] * trials, h[1] * trials)

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": list(self.seconds) if self.seconds else None, "gpus_per_trial": self.gpus,
                "gpu_hours_per_trial": list(self.gpu_hours) if self.gpu_hours else None, "measured": self.measured,
                "source": self.source, "completions": self.completions, "full_run_steps": self.full_run_steps,
                "full_run_share": self.full_run_share,
                "full_run_gpu_hours": list(self.full_run_gpu_hours) if self.full_run_gpu_hours else None}


# ------------------------------------------------------------------ the model's size


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
        # lazy: only for a hub model's cached config; every command imports cost.py
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


# ------------------------------------------------------------------ pure arithmetic


def flops_per_token(parameters: int, *, checkpointing: bool, reference_model: bool, old_logprobs: bool) -> float:
    """Training FLOPs per trained token: 6N for forward and backward, 2N more for each extra forward pass."""
    return parameters * (6.0 + 2.0 * (checkpointing + reference_model + old_logprobs))


def assumed_trial_seconds(parameters: int, completions: float, completion_tokens: tuple[float, float],
                          prompt_tokens: tuple[float, float], training_gpus: int, generation_gpus: int, vllm: bool,
                          flops_per_trained_token: float, gpu: Gpu = REFERENCE_GPU,
                          assumed: Assumptions = ASSUMED, startup: bool = True) -> tuple[float, float]:
    """(short, long) wall seconds of `completions` generated and trained on, from the stated assumptions.

    Generation and training alternate in a GRPO step (TRL does not overlap them), so they add up.
    `completion_tokens` and `prompt_tokens` are (short-end, long-end) mean lengths. Each assumed
    range is read as a 95% band on a log scale and the uncertain ones as independent, so the
    printed range is their combined band (each narrowed by 1/sqrt(k) in log width for k uncertain
    factors), not the product of every worst case, which no run meets at once.
    """
    rates = assumed.generation_tokens_per_s_vllm if vllm else assumed.generation_tokens_per_s_hf
    scale = assumed.reference_parameters / parameters * gpu.bandwidth_tb_s / REFERENCE_GPU.bandwidth_tb_s
    ranges = [rates, assumed.mfu, completion_tokens, prompt_tokens]
    k = sum(1 for r in ranges if r[0] > 0 and r[1] > r[0])
    rates, mfus, completion_tokens, prompt_tokens = (_combined(r, k) for r in ranges)
    out = []
    for gen_rate, mfu, length, prompt, start in zip(reversed(rates), mfus[::-1], completion_tokens,
                                                    prompt_tokens, assumed.startup_s):
        gen = completions * length / (gen_rate * scale * max(1, generation_gpus))
        train = completions * (length + prompt) * flops_per_trained_token / (gpu.bf16_tflops * 1e12 * mfu * max(1, training_gpus))
        out.append((start if startup else 0.0) + gen + train)
    return (out[0], out[1])


def _combined(r: tuple[float, float], k: int) -> tuple[float, float]:
    """A (low, high) band narrowed about its geometric centre to its share of k independent bands."""
    lo, hi = r
    if lo <= 0 or hi <= lo or k <= 1:
        return (lo, hi)
    centre, half = math.sqrt(lo * hi), math.sqrt(hi / lo) ** (1 / math.sqrt(k))
    return (centre / half, centre * half)


@dataclass(frozen=True)
class FullRun:
    """The run a trial is the first part of (the study file's `budget.full_run`, a recipe's own length): its
    optimizer steps, else its epochs over the training prompts at the recipe's G. The parent and the trial read
    it alike (spec.json's budget.full_run has these keys)."""

    max_steps: int | None = None
    num_train_epochs: float | None = None
    num_generations: int | None = None
    prompts: int | None = None


def full_run_steps(full_run: FullRun | None, generated_per_step: float, prompts: int | None) -> int | None:
    """The recipe's whole run in optimizer steps: its max_steps, else epochs x prompts x G / completions per step.

    Counted at the recipe's own G (full_run.num_generations), so every arm of a study shares one
    schedule length. None when neither is known (epochs over a dataset whose size is not known here).
    """
    if full_run is None:
        return None
    if full_run.max_steps:
        return int(full_run.max_steps)
    epochs, g = full_run.num_train_epochs, full_run.num_generations
    prompts = full_run.prompts or prompts
    if not (epochs and g and prompts):
        return None
    return max(1, math.ceil(float(epochs) * int(prompts) * int(g) / generated_per_step - 1e-9))


def warmup_steps(trainer: Mapping[str, Any], full_steps: int | None) -> int | None:
    """The trainer section's learning-rate warmup (trainer.warmup_steps) in optimizer steps of a run `full_steps`
    long, counted as transformers counts it.

    The one owner of this rule: init sizes trials past the warmup with it, `validate` and every command that
    loads a study refuse trials that end inside it (study/warmup.py), branching places `branch_from: warmup`
    with it and validate checks that point; the child's scheduler is built by transformers'
    `TrainingArguments.get_warmup_steps(full_steps)` (the prefix schedule: trainer/build.py), which this
    reproduces (tests/test_warmup_rule.py checks it on the installed transformers): a value >= 1 is a step
    count (its int), one in (0, 1) a share of the run, `ceil(full_steps * share)` of the float product as it
    comes out, so 0.07 of 100 steps is 8 (0.07 * 100 is 7.000000000000001). A recipe's warmup_ratio arrives
    here as a warmup_steps below 1 (config/recipes/merge.py). 0 without a warmup (unset, 0, not a number);
    None for a share when the run's length is not known.
    """
    warmup = trainer.get("warmup_steps")
    if not isinstance(warmup, (int, float)) or isinstance(warmup, bool) or not warmup > 0:
        return 0
    if warmup >= 1:
        return int(warmup)
    if not full_steps:
        return None
    return math.ceil(full_steps * float(warmup))


def lr_schedule_of(budget: dict[str, Any]) -> str:
    """budget.lr_schedule resolved: "prefix" of the full run when the study knows one (a recipe), else "compressed"."""
    return budget.get("lr_schedule") or ("prefix" if budget.get("full_run") else "compressed")


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


# ------------------------------------------------------------------ the price in units of the user's run
#
# Users think in "N x my run", not GPU-hours (an extra full run, 1x, is the natural ceiling of a
# tuning study). A Price is the study's GPU-hours over the full run's, both at the same rates (the
# same measurement, or the same assumed range end for end), so the multiple does not inherit the
# rates' uncertainty the way each figure does. Where no GPU-hours are known (a CPU study, a model of
# unknown size) the multiple is taken in optimizer steps (trials x a trial's steps over the run's),
# which leaves out a trial's start-up and says so. Unknown only when the run's length is.

_SHARE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*[xX]\s*$")


def parse_share(value: object) -> float | None:
    """A share of the full run as written in a study file ("0.5x" -> 0.5); None when `value` is not one."""
    if not isinstance(value, str):
        return None
    m = _SHARE.match(value)
    return float(m.group(1)) if m and float(m.group(1)) > 0 else None


class RunShare(float):
    """GPU-hours resolved from a share of the full run (study.budget_gpu_hours: 0.5x): a float everywhere a
    budget is read, which still says what share it was written as (plan and run print both)."""

    share: float
    full_run_h: float

    def __new__(cls, share: float, full_run_h: float) -> "RunShare":
        obj = super().__new__(cls, share * full_run_h)
        obj.share, obj.full_run_h = share, full_run_h
        return obj

    def __reduce__(self) -> Any:  # pickles (a worker process) and deep-copies as itself
        return (RunShare, (self.share, self.full_run_h))


def fmt_multiple(lo: float, hi: float | None = None) -> str:
    """A multiple of the run: 0.42x, 1.5x, 12x; a range when the ends differ at that precision."""
    def one(x: float) -> str:
        return f"{x:.2g}x" if x < 10 else f"{x:,.0f}x"
    a, b = one(lo), one(hi if hi is not None else lo)
    return a if a == b else f"{a[:-1]}-{b}"


@dataclass(frozen=True)
class Branching:
    """How a branched study (budget.branch_from) is counted: per seed, one shared prefix of `step` optimizer steps,
    paid once, however many arms branch from it; each arm's branch is priced as a trial of `branch_steps` from there."""

    step: int
    prefixes: int  # one per seed (planned), or those that ran (spent)
    branch_steps: int | None = None

    def words(self) -> str:
        branch = f", then each arm's branch of {self.branch_steps} steps from there" if self.branch_steps else ""
        return (f"per seed one shared prefix of {self.step} steps, counted once ({self.prefixes} prefix"
                f"{'' if self.prefixes == 1 else 'es'}){branch}")

    def as_dict(self) -> dict[str, Any]:
        return {"branch_step": self.step, "prefixes": self.prefixes, "branch_steps": self.branch_steps}


def study_total(trials: int, per_trial: tuple[float, float] | None, prefixes: int = 0,
                per_prefix: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """A study's (low, high) total of a per-trial figure (seconds, GPU-hours, steps): every trial once, and each
    shared prefix once (not once per arm that branches from it). None when a figure it needs is not known."""
    if per_trial is None or (prefixes and per_prefix is None):
        return None
    pre = per_prefix if prefixes and per_prefix is not None else (0.0, 0.0)
    return (trials * per_trial[0] + prefixes * pre[0], trials * per_trial[1] + prefixes * pre[1])


@dataclass(frozen=True)
class Price:
    """A study's GPU-hours as a multiple of the full run's (see above). `spent`: the hours are what its
    trials used, not what its plan would. `unknown`: why the multiple is not known, naming the key that fixes it."""

    trials: int
    multiple: tuple[float, float] | None
    study_h: tuple[float, float] | None = None
    full_run_h: tuple[float, float] | None = None
    basis: str = "GPU-hours"  # or "optimizer steps" (no GPU-hours known here: `no_hours` says why)
    no_hours: str | None = None
    unknown: str | None = None
    spent: bool = False
    at_most: bool = False  # a race may stop before its planned maximum, which this prices
    branching: Branching | None = None  # arms branch from a shared prefix per seed, counted once
    screen: tuple[float, float] | None = None  # the screen before any training, as a multiple of the run (included)
    expected: float | None = None  # a race's mean share of its planned maximum (plan/price.race_share), when known
    expected_why: str = ""  # what that mean assumes

    def words(self) -> str:
        """One line: "this study costs 0.4x your run (48 of 120 GPU-h)"."""
        verb = "spent" if self.spent else ("costs at most" if self.at_most else "costs")
        if self.multiple is None:
            return f"this study's price in units of your run is unknown: {self.unknown}"
        head = f"this study {verb} {fmt_multiple(*self.multiple)} your run"
        if self.expected is not None and not self.spent:
            (lo, hi), (slo, shi) = self.multiple, self.screen or (0.0, 0.0)  # the screen runs whole, the race does not
            head += (f" (expected {fmt_multiple(slo + (lo - slo) * self.expected, shi + (hi - shi) * self.expected)}: "
                     f"the mean seeds the race spends, {self.expected_why})")
        if self.basis == "GPU-hours" and self.study_h and self.full_run_h:
            (slo, shi), (flo, fhi) = self.study_h, self.full_run_h
            same = math.isclose(slo, shi, rel_tol=0.005) and math.isclose(flo, fhi, rel_tol=0.005)
            figures = (f"{_h(slo)} of {_h(flo)} GPU-h" if same else
                       f"{_h(slo)}-{_h(shi)} of {_h(flo)}-{_h(fhi)} GPU-h, each end at the same assumed rates")
            return f"{head} ({figures}{self._how()})"
        return f"{head} in optimizer steps, start-up left out (no GPU-hours here: {self.no_hours}{self._how()})"

    def _how(self) -> str:
        parts = [self.branching.words()] if self.branching else []
        if self.screen is not None:
            parts.append(f"the screen before any training {'spent' if self.spent else 'costs at most'} "
                         f"{fmt_multiple(*self.screen)} of it, included")
        return "".join(f"; {p}" for p in parts)

    def as_dict(self) -> dict[str, Any]:
        return {"multiple": list(self.multiple) if self.multiple else None, "trials": self.trials,
                "study_gpu_hours": list(self.study_h) if self.study_h else None,
                "full_run_gpu_hours": list(self.full_run_h) if self.full_run_h else None, "basis": self.basis,
                "spent": self.spent, "at_most": self.at_most, "unknown": self.unknown, "expected_share": self.expected,
                "branching": self.branching.as_dict() if self.branching else None,
                "screen": list(self.screen) if self.screen else None, "words": self.words()}


def _ordered(a: float, b: float) -> tuple[float, float]:
    return (min(a, b), max(a, b))


def _h(x: float) -> str:
    return f"{x:,.{2 if x < 1 else 1 if x < 10 else 0}f}"


def price(trials: int, *, study_h: tuple[float, float] | None, full_run_h: tuple[float, float] | None,
          study_steps: float | None, full_run_steps: int | None, no_hours: str = "", unknown: str = "",
          spent: bool = False, at_most: bool = False, branching: Branching | None = None,
          screen_h: tuple[float, float] | None = None, screen_steps: float | None = None) -> Price:
    """The study's price as a multiple of the full run: GPU-hours over GPU-hours when both are known, else
    optimizer steps over optimizer steps (`study_steps`: every trial's together, each shared prefix once), else
    unknown (`unknown`: why). `branching`: how the prefixes were counted, said in the words. `screen_h` /
    `screen_steps`: what the screen before any training costs (GPU-hours / optimizer steps' worth), added in and
    said apart."""
    if study_h and full_run_h and full_run_h[0] > 0 and full_run_h[1] > 0:
        if screen_h is not None:
            study_h = (study_h[0] + screen_h[0], study_h[1] + screen_h[1])
        a, b = study_h[0] / full_run_h[0], study_h[1] / full_run_h[1]
        part = None if screen_h is None else _ordered(screen_h[0] / full_run_h[0], screen_h[1] / full_run_h[1])
        return Price(trials, (min(a, b), max(a, b)), study_h, full_run_h, spent=spent, at_most=at_most,
                     branching=branching, screen=part)
    if study_steps is not None and full_run_steps:
        m = (study_steps + (screen_steps or 0.0)) / full_run_steps
        part = None if screen_steps is None else (screen_steps / full_run_steps,) * 2
        return Price(trials, (m, m), basis="optimizer steps", no_hours=no_hours or "no GPU-hour estimate",
                     spent=spent, at_most=at_most, branching=branching, screen=part)
    return Price(trials, None, unknown=unknown or "the full run's length is not known here", spent=spent,
                 at_most=at_most, branching=branching)
