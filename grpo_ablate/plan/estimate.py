"""One trial's cost for a study: measured where possible, else assumed (cost.py's rates and arithmetic).

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml      # "GPU time (estimate): ..."

`estimate_trial(study)` is the one estimate every reader uses (plan's figures, a timeout derived
from it, a GPU-hour budget). In order of trust:
1. measured: finished trials in the study's storage (seconds per completion, plus what a trial
   spends outside training), else probe.json's measured pace;
2. assumed: a (short, long) range from the model's size and cost.py's stated per-GPU rates,
   narrowed by `hardware.gpu_type` and by a measured completion length (advise's mean completion
   tokens, else the probe's tokens per completion).
It reads the study's storage file, probe.json, advise.json and what is known offline of the
dataset's size; it never contacts a server storage or the network, and never imports torch.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.core.cost import (ASSUMED, GPU_TYPES, REFERENCE_GPU, FullRun, TrialEstimate, assumed_trial_seconds, flops_per_token,
                              full_run_steps, model_parameters)
from grpo_ablate.files.advise_file import load_advice
from grpo_ablate.files.reader import Owner
from grpo_ablate.files.probe_file import load_probe
from grpo_ablate.records.gpu_hours import TrialTime
from grpo_ablate.core.space import generated_completions
from grpo_ablate.storage.store import read_existing
from grpo_ablate.storage.url import mask_url
from grpo_ablate.records import trial_record as record
from grpo_ablate.core.vocab import Outcome

if TYPE_CHECKING:  # for annotations only: nothing here runs config code, it reads a StudyConfig it is handed
    from grpo_ablate.config import StudyConfig

__all__ = ["estimate_trial", "trial_time", "training_prompts", "study_full_run_steps", "TrialEstimate"]


def _measured_pace(url: str) -> tuple[float, float, str] | None:
    """(training seconds per completion, seconds of a trial outside training, where from): medians
    over finished trials in the study's storage. The second is the trial's wall time less its
    training time (start-up, model load, evaluation), so a short trial is not estimated at 0 s.

    Read-only: a journal file or SQLite file that exists; a server storage is not contacted.
    """
    try:
        storage = read_existing(url)  # read only: nothing created or repaired
        if storage is None:
            return None
        rates: list[float] = []
        overheads: list[float] = []
        names: set[str] = set()
        for s in storage.get_all_studies():
            for t in storage.get_all_trials(storage.get_study_id_from_name(s.study_name), deepcopy=False):
                # a copy a warm start imported ran elsewhere (its duration is no trial's); an OOM's pace is partial
                if not record.ran_here(t) or record.outcome(t) is not Outcome.COMPLETED:
                    continue
                recorded = record.recorded_metrics(t, ("samples_per_second", "train_seconds"))
                sps, train = recorded["samples_per_second"], recorded["train_seconds"]
                if isinstance(sps, (int, float)) and sps > 0:
                    rates.append(1.0 / float(sps))
                    names.add(s.study_name)
                    if t.duration is not None and isinstance(train, (int, float)):
                        overheads.append(max(0.0, t.duration.total_seconds() - float(train)))
    except Exception:  # a storage the estimate cannot read says nothing about the cost: no measurement
        return None
    if not rates:
        return None
    where = f"{len(rates)} finished trial(s) of {', '.join(sorted(names))} in {mask_url(url)}"
    return statistics.median(rates), (statistics.median(overheads) if overheads else 0.0), where


def training_prompts(study: "StudyConfig") -> tuple[int, str] | None:
    """(training prompts, where from), read offline: a built-in task's num_prompts, a local data file's rows
    (.jsonl, .json, .parquet, .csv), or the size the `datasets` cache recorded for a hub dataset's split
    (dataset_info.json); None otherwise.
    data.max_samples caps it; prompts that data.max_prompt_tokens would drop are not known here."""
    data = study.data
    found: tuple[int, str] | None = None
    if data.task:
        found = (int(data.num_prompts), "data.num_prompts") if data.num_prompts else None
    elif data.dataset and Path(data.dataset).is_file():
        rows = _local_rows(Path(data.dataset))
        found = (rows, f"the rows of {Path(data.dataset).name}") if rows else None
    elif data.dataset and "/" in data.dataset and not Path(data.dataset).exists():
        found = _cached_split_rows(data.dataset, data.config_name, data.split)
    if found and data.max_samples and data.max_samples < found[0]:
        found = (data.max_samples, "data.max_samples")
    return found


def study_full_run_steps(study: "StudyConfig") -> int | None:
    """The study's `budget.full_run` in optimizer steps (core/cost.py full_run_steps), its prompts counted offline
    (training_prompts) when the study file does not give them; None when neither says."""
    full_run = FullRun(**study.budget.full_run.model_dump()) if study.budget.full_run else None
    known = training_prompts(study) if full_run and not full_run.prompts else None
    return full_run_steps(full_run, study.space.shape.generated_per_step, known[0] if known else None)


def _local_rows(path: Path) -> int | None:
    """The rows of a local data file as `datasets` loads it (.jsonl, .json: a list or JSON lines, .parquet from its
    footer, .csv as records); None for another format, or one that does not read."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            with open(path, "rb") as f:
                return sum(1 for line in f if line.strip())
        if suffix == ".json":
            text = path.read_text(encoding="utf-8")
            try:
                loaded = json.loads(text)
            except ValueError:  # JSON lines in a .json file, as `datasets` also reads them
                return sum(1 for line in text.splitlines() if line.strip())
            return len(loaded) if isinstance(loaded, list) else None
        if suffix == ".parquet":
            import pyarrow.parquet as pq  # the footer only; pyarrow comes with `datasets`

            return int(pq.ParquetFile(path).metadata.num_rows)
        if suffix == ".csv":
            with open(path, newline="", encoding="utf-8") as f:
                return max(0, sum(1 for _ in csv.reader(f)) - 1)  # records, quoted newlines included; less the header
    except (OSError, ValueError, ImportError):
        return None
    return None


def _cached_split_rows(dataset: str, config: str | None, split: str) -> tuple[int, str] | None:
    """A hub dataset split's num_examples from the `datasets` cache, when it was loaded on this machine before."""
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


def _trainer_value(study: "StudyConfig", key: str) -> Any:
    v = study.trainer.get(key)
    return trl_default(key) if v is None else v


def estimate_trial(study: "StudyConfig") -> TrialEstimate:
    """One trial's wall seconds and GPU-hours: measured where possible, else assumed (see the module docstring);
    budget.seconds caps the training time of every kind of estimate."""
    return _capped(study.budget.seconds, _estimate(study))


def trial_time(est: TrialEstimate) -> TrialTime | None:
    """One trial's seconds of an estimate (measured from the study's storage file or probe.json, else the
    assumption range), as the timeout and the GPU-hour budget read them; None when nothing estimates a trial."""
    if est.seconds is None:
        return None
    return TrialTime((float(est.seconds[0]), float(est.seconds[1])), est.measured, est.source)


def _estimate(study: "StudyConfig") -> TrialEstimate:
    """The estimate before the cap. What is read of the study's files and storage is read first, in one
    place, so the arithmetic below works on plain values (the storage is read even for a tokens-only
    budget, where the pace goes unused: it is read-only and a missing file reads as nothing; a bad
    probe.json or advise.json is refused whether or not a measurement makes it unneeded)."""
    owner = Owner.of(study)
    probe = load_probe(study.output_dir, owner)
    advice = load_advice(study.output_dir, owner)
    sampled = float(advice.get("mean_completion_tokens") or 0) if advice else 0.0
    tokens = _probe_tokens_per_completion(probe)
    checkpointing, beta, iterations = (_trainer_value(study, k) for k in ("gradient_checkpointing", "beta", "num_iterations"))
    measured = _measured_pace(study.storage_url)
    shape = study.space.shape
    steps = study.budget.max_steps or _int(study.trainer.get("max_steps"))
    n = generated_completions(shape, max_steps=steps, completions=study.budget.completions)
    gpus = int(study.hardware.gpus or 0)
    full_steps = study_full_run_steps(study)
    trial_steps = math.ceil(n / shape.generated_per_step - 1e-9) if n else None
    share = trial_steps / full_steps if full_steps and trial_steps else None
    common: dict[str, Any] = {"gpus": gpus, "completions": n, "full_run_steps": full_steps, "full_run_share": share}
    full_n = full_steps * shape.generated_per_step if full_steps else None

    if measured and n:
        per, overhead, where = measured
        s = overhead + per * n
        full = (per * full_n, per * full_n) if full_n else None
        return TrialEstimate((s, s), measured=True, source=where, full_run_seconds=full,
                                            pace=(per, overhead), **common)
    if probe is not None and probe.one_trial_estimate_s:
        s = float(probe.one_trial_estimate_s)
        source = ("the probe's pace (probe.json: its measured start-up plus the budget's steps at the baseline G's "
                  "largest fitting batch)")
        return TrialEstimate((s, s), measured=True, source=source, **common)
    if not gpus:
        return TrialEstimate(None, measured=False, source=(
            "no measurement yet (no finished trial in this study's storage, no probe.json); the study runs on CPU, "
            "where no rates are assumed"), **common)
    params, where = model_parameters(study.model.name_or_path, study.model.revision)
    if params is None:
        return TrialEstimate(None, measured=False, source=(
            f"model size {where}; run `grpo-ablate probe` or a first trial to measure"), **common)
    if not n:
        return TrialEstimate(None, measured=False, source=(
            "the budget is tokens or seconds only; run `grpo-ablate probe` to measure"), **common)
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
    if sampled > 0:  # advise sampled completions at the study's settings: their mean length
        lengths = (sampled, sampled)
        length_words = f"mean completion {sampled:.0f} tokens (measured by advise, advise.json)"
    elif tokens:  # the probe counted prompt + completion tokens per completion: that bounds both
        lengths, prompts = (tokens, tokens), (0.0, 0.0)
        length_words, prompt_words = f"{tokens:.0f} tokens per completion, prompt included (measured by the probe)", ""
    flops = flops_per_token(params, checkpointing=bool(checkpointing), reference_model=float(beta or 0) != 0,
                            old_logprobs=int(iterations) > 1)
    server = hw.vllm.mode == "server"
    kwargs: dict[str, Any] = dict(training_gpus=study.world_size, generation_gpus=hw.vllm.server_gpus if server else study.world_size,
                  vllm=vllm, flops_per_trained_token=flops, gpu=gpu)
    lo, hi = assumed_trial_seconds(params, n, lengths, prompts, **kwargs)
    full = assumed_trial_seconds(params, full_n, lengths, prompts, **kwargs) if full_n else None
    source = "; ".join(x for x in (
        f"assumed, not measured: model {params / 1e9:.2g} B parameters ({where})",
        f"{flops / params:g} x parameters FLOPs per trained token", length_words, prompt_words,
        ASSUMED.words(vllm, gpu, bool(hw.gpu_type))) if x)
    return TrialEstimate((lo, hi), measured=False, source=source, full_run_seconds=full, **common)


def _probe_tokens_per_completion(probe: Any) -> float | None:
    """Tokens (prompt + completion) per generated completion at the probe's largest fitting point."""
    if probe is None:
        return None
    points = [p for p in probe.points if p.fits and p.tokens_per_second and p.samples_per_second]
    if not points:
        return None
    best = max(points, key=lambda p: p.generation_batch_size)
    return float(best.tokens_per_second) / float(best.samples_per_second)


def _capped(cap: float | None, est: TrialEstimate) -> TrialEstimate:
    """budget.seconds (`cap`) caps a trial's training time: no estimate runs past it."""
    if not cap or est.seconds is None or est.seconds[1] <= cap:
        return est
    return replace(est, seconds=(min(est.seconds[0], cap), cap), source=est.source + "; capped by budget.seconds")
