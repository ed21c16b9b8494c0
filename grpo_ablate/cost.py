"""What a trial will cost before it runs: wall seconds and GPU-hours, measured where possible.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml      # "GPU time (estimate): ..."

`estimate_trial(study)` is the one estimate every reader uses (plan's figures, a timeout derived
from it, a GPU-hour budget). In order of trust:
1. measured: finished trials in the study's storage (seconds per completion, plus what a trial
   spends outside training), else probe.json's measured pace;
2. assumed: a (short, long) range from the model's size and the stated per-GPU rates below,
   narrowed by `hardware.gpu_type` (config/gpus.py) and by a measured completion length (advise's
   mean completion tokens, else the probe's tokens per completion). Training is bound by compute (FLOPs per trained token:
   6 x parameters, +2x each for gradient checkpointing's recomputed forward, a reference model
   (beta > 0) and old log-probabilities (num_iterations > 1)); generation by memory bandwidth.

A cluster study is planned on a laptop, so nothing here needs the model's weights or a network:
the parameter count comes from config.json in a local folder or the Hugging Face cache, else from
the size in the model's name, else it is said to be unknown. The parent never imports torch.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.config.gpus import GPU_TYPES, REFERENCE_GPU, Gpu
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.files.advise_file import load_advice
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe
from grpo_ablate.space import BatchShape, generated_completions
from grpo_ablate.storage_url import local_file, mask_url

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["Assumptions", "ASSUMED", "TrialEstimate", "estimate_trial", "full_run_steps", "lr_schedule_of", "training_prompts", "model_parameters",
           "parameters_from_config", "assumed_trial_seconds", "flops_per_token", "hours", "fmt_hours", "fmt_range"]


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
    except (KeyError, TypeError, ValueError):
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
    for path in candidates:
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        n = parameters_from_config(config) if isinstance(config, dict) else None
        if n:
            return n, f"config.json of {name_or_path}"
    named = _SIZE_IN_NAME.search(Path(name_or_path).name)
    if named:  # "Qwen2.5-1.5B-Instruct": the size its publisher wrote in the name
        return int(float(named.group(1)) * 1e9), f"read from the name {Path(name_or_path).name!r}; no config.json offline"
    return None, f"unknown: no config.json of {name_or_path} readable offline (a local folder or the HF cache)"


# ------------------------------------------------------------------ pure arithmetic


def flops_per_token(parameters: int, *, checkpointing: bool, reference_model: bool, old_logprobs: bool) -> float:
    """Training FLOPs per trained token: 6N for forward and backward, 2N more for each extra forward pass."""
    return parameters * (6.0 + 2.0 * (checkpointing + reference_model + old_logprobs))


def assumed_trial_seconds(parameters: int, completions: int, completion_tokens: tuple[float, float],
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


def full_run_steps(full_run: dict[str, Any] | None, shape: BatchShape, prompts: int | None) -> int | None:
    """The recipe's whole run in optimizer steps: its max_steps, else epochs x prompts x G / completions per step.

    Counted at the recipe's own G (full_run["num_generations"]), so every arm of a study shares one
    schedule length. None when neither is known (epochs over a dataset whose size is not known here).
    """
    if not full_run:
        return None
    if full_run.get("max_steps"):
        return int(full_run["max_steps"])
    epochs, g = full_run.get("num_train_epochs"), full_run.get("num_generations")
    prompts = full_run.get("prompts") or prompts
    if not (epochs and g and prompts):
        return None
    return max(1, math.ceil(float(epochs) * int(prompts) * int(g) / shape.generated_per_step - 1e-9))


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


# ------------------------------------------------------------------ the study's estimate


def _measured_pace(study: "Study") -> tuple[float, float, str] | None:
    """(training seconds per completion, seconds of a trial outside training, where from): medians
    over finished trials in the study's storage. The second is the trial's wall time less its
    training time (start-up, model load, evaluation), so a short trial is not estimated at 0 s.

    Read-only: a journal file or SQLite file that exists; a server storage is not contacted.
    """
    url = study.storage_url
    path = local_file(url)
    if path is None or not path.is_file() or not path.stat().st_size:
        return None
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        if url.startswith("sqlite:///"):
            storage: Any = optuna.storages.RDBStorage(url, skip_compatibility_check=True)
        else:
            storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
        rates: list[float] = []
        overheads: list[float] = []
        names: set[str] = set()
        for s in storage.get_all_studies():
            for t in storage.get_all_trials(s._study_id, deepcopy=False):
                sps = t.user_attrs.get("samples_per_second")
                if t.state == optuna.trial.TrialState.COMPLETE and isinstance(sps, (int, float)) and sps > 0:
                    rates.append(1.0 / float(sps))
                    names.add(s.study_name)
                    train = t.user_attrs.get("train_seconds")
                    if t.duration is not None and isinstance(train, (int, float)):
                        overheads.append(max(0.0, t.duration.total_seconds() - float(train)))
    except Exception:  # a storage the estimate cannot read says nothing about the cost: no measurement
        return None
    if not rates:
        return None
    where = f"{len(rates)} finished trial(s) of {', '.join(sorted(names))} in {mask_url(url)}"
    return statistics.median(rates), (statistics.median(overheads) if overheads else 0.0), where


def training_prompts(study: "Study") -> tuple[int, str] | None:
    """(training prompts, where from), read offline: a built-in task's num_prompts, a local .jsonl's rows, or
    the size the `datasets` cache recorded for a hub dataset's split (dataset_info.json); None otherwise.
    data.max_samples caps it; prompts that data.max_prompt_tokens would drop are not known here."""
    data = study.data
    found: tuple[int, str] | None = None
    if data.task:
        found = (int(data.num_prompts), "data.num_prompts") if data.num_prompts else None
    elif data.dataset and data.dataset.endswith(".jsonl") and Path(data.dataset).is_file():
        with open(data.dataset, "rb") as f:
            found = (sum(1 for line in f if line.strip()), f"the rows of {Path(data.dataset).name}")
    elif data.dataset and "/" in data.dataset and not Path(data.dataset).exists():
        found = _cached_split_rows(data.dataset, data.config_name, data.split)
    if found and data.max_samples and data.max_samples < found[0]:
        found = (data.max_samples, "data.max_samples")
    return found


def _cached_split_rows(dataset: str, config: str | None, split: str) -> tuple[int, str] | None:
    """A hub dataset split's num_examples from the `datasets` cache, when it was loaded on this machine before."""
    import os

    root = Path(os.environ.get("HF_DATASETS_CACHE") or Path.home() / ".cache" / "huggingface" / "datasets")
    # `datasets` names the folder namespace___snake_case_name ("AI-MO___numina_math-tir"): compare letters only
    key = re.sub(r"[^a-z0-9]", "", dataset.lower())
    try:
        folders = [f for f in root.iterdir() if f.is_dir() and re.sub(r"[^a-z0-9]", "", f.name.lower()) == key]
    except OSError:
        return None
    for info in sorted(i for f in folders for i in f.glob(f"{config or '*'}/*/*/dataset_info.json")):
        try:
            rows = json.loads(info.read_text())["splits"][split]["num_examples"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(rows, int) and rows > 0:
            return rows, f"the datasets cache's record of {dataset} {split}"
    return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _trainer_value(study: "Study", key: str) -> Any:
    v = study.trainer.get(key)
    return trl_default(key) if v is None else v


def estimate_trial(study: "Study") -> TrialEstimate:
    """One trial's wall seconds and GPU-hours: measured where possible, else assumed (see the module docstring)."""
    shape = study.space.shape
    steps = study.budget.max_steps or _int(study.trainer.get("max_steps"))
    n = generated_completions(shape, max_steps=steps, completions=study.budget.completions)
    gpus = int(study.hardware.gpus or 0)
    full_run = study.budget.full_run.model_dump() if study.budget.full_run else None
    known = training_prompts(study) if full_run and not full_run.get("prompts") else None
    full_steps = full_run_steps(full_run, shape, known[0] if known else None)
    trial_steps = math.ceil(n / shape.generated_per_step - 1e-9) if n else None
    share = trial_steps / full_steps if full_steps and trial_steps else None
    common = {"gpus": gpus, "completions": n, "full_run_steps": full_steps, "full_run_share": share}
    full_n = full_steps * shape.generated_per_step if full_steps else None

    seconds: tuple[float, float] | None = None
    measured = _measured_pace(study) if n else None
    if measured and n:
        per, overhead, where = measured
        s = overhead + per * n
        full = (per * full_n, per * full_n) if full_n else None
        return _capped(study, TrialEstimate((s, s), measured=True, source=where, full_run_seconds=full,
                                            pace=(per, overhead), **common))
    probe = load_probe(study.output_dir, Owner.of(study))
    if probe is not None and probe.one_trial_estimate_s:
        s = float(probe.one_trial_estimate_s)
        source = ("the probe's pace (probe.json: its measured start-up plus the budget's steps at the baseline G's "
                  "largest fitting batch)")
        return _capped(study, TrialEstimate((s, s), measured=True, source=source, **common))
    if not gpus:
        return _capped(study, TrialEstimate(None, measured=False, source=(
            "no measurement yet (no finished trial in this study's storage, no probe.json); the study runs on CPU, "
            "where no rates are assumed"), **common))
    params, where = model_parameters(study.model.name_or_path, study.model.revision)
    if params is None:
        return _capped(study, TrialEstimate(None, measured=False, source=(
            f"model size {where}; run `grpo-ablate probe` or a first trial to measure"), **common))
    if not n:
        return _capped(study, TrialEstimate(None, measured=False, source=(
            "the budget is tokens or seconds only; run `grpo-ablate probe` to measure"), **common))
    hw = study.hardware
    vllm = hw.vllm.mode in ("server", "colocate")
    gpu = GPU_TYPES[hw.gpu_type] if hw.gpu_type else REFERENCE_GPU
    max_len = _int(study.trainer.get("max_completion_length")) or int(trl_default("max_completion_length"))
    lengths = (ASSUMED.completion_share[0] * max_len, ASSUMED.completion_share[1] * max_len)
    length_words = (f"mean completion {ASSUMED.completion_share[0]:.0%}-{ASSUMED.completion_share[1]:.0%} of "
                    f"max_completion_length {max_len} (not measured)")
    prompt_cap = study.data.max_prompt_tokens
    prompts = (ASSUMED.prompt_share[0] * prompt_cap, ASSUMED.prompt_share[1] * prompt_cap) if prompt_cap else (0.0, 0.0)
    prompt_words = (f"mean prompt {ASSUMED.prompt_share[0]:.0%}-{ASSUMED.prompt_share[1]:.0%} of data.max_prompt_tokens "
                    f"{prompt_cap}" if prompt_cap else "prompt tokens not counted (data.max_prompt_tokens unset)")
    advice = load_advice(study.output_dir, Owner.of(study))
    sampled = float(advice.get("mean_completion_tokens") or 0) if advice else 0.0
    tokens = _probe_tokens_per_completion(probe)
    if sampled > 0:  # advise sampled completions at the study's settings: their mean length
        lengths = (sampled, sampled)
        length_words = f"mean completion {sampled:.0f} tokens (measured by advise, advise.json)"
    elif tokens:  # the probe counted prompt + completion tokens per completion: that bounds both
        lengths, prompts = (tokens, tokens), (0.0, 0.0)
        length_words, prompt_words = f"{tokens:.0f} tokens per completion, prompt included (measured by the probe)", ""
    flops = flops_per_token(params, checkpointing=bool(_trainer_value(study, "gradient_checkpointing")),
                            reference_model=float(_trainer_value(study, "beta") or 0) != 0,
                            old_logprobs=int(_trainer_value(study, "num_iterations")) > 1)
    server = hw.vllm.mode == "server"
    kwargs = dict(training_gpus=study.world_size, generation_gpus=hw.vllm.server_gpus if server else study.world_size,
                  vllm=vllm, flops_per_trained_token=flops, gpu=gpu)
    lo, hi = assumed_trial_seconds(params, n, lengths, prompts, **kwargs)
    full = assumed_trial_seconds(params, full_n, lengths, prompts, **kwargs) if full_n else None
    source = "; ".join(x for x in (
        f"assumed, not measured: model {params / 1e9:.2g} B parameters ({where})",
        f"{flops / params:g} x parameters FLOPs per trained token", length_words, prompt_words,
        ASSUMED.words(vllm, gpu, bool(hw.gpu_type))) if x)
    return _capped(study, TrialEstimate((lo, hi), measured=False, source=source, full_run_seconds=full, **common))


def _probe_tokens_per_completion(probe: Any) -> float | None:
    """Tokens (prompt + completion) per generated completion at the probe's largest fitting point."""
    if probe is None:
        return None
    points = [p for p in probe.points if p.fits and p.tokens_per_second and p.samples_per_second]
    if not points:
        return None
    best = max(points, key=lambda p: p.generation_batch_size)
    return float(best.tokens_per_second) / float(best.samples_per_second)


def _capped(study: "Study", est: TrialEstimate) -> TrialEstimate:
    """budget.seconds caps a trial's training time: no estimate runs past it."""
    cap = study.budget.seconds
    if not cap or est.seconds is None or est.seconds[1] <= cap:
        return est
    return replace(est, seconds=(min(est.seconds[0], cap), cap), source=est.source + "; capped by budget.seconds")
