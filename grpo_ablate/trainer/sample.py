"""Sample K completions per prompt from the starting model and score them: no gradient steps.

The input of `grpo-ablate advise`: per prompt and temperature, the K rewards, with the study's
own model, prompts, decoding (max_completion_length, top_p, top_k) and reward functions. Run as
its own process, like a trial (the orchestrator never imports torch); vLLM when the study
configures it (hardware.vllm.mode), transformers' generate otherwise.

    python -m grpo_ablate.trainer.sample runs/x/advise/sample_spec.json   # writes samples.json beside it
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from grpo_ablate.contract.env import PROGRESS_PREFIX
from grpo_ablate.contract.spec import DataSpec, ModelSpec, RewardEntry, section_from
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX, SAMPLES_FILE

from .request_seeds import prompt_seeds

__all__ = ["decoding", "hf_sampling_kwargs", "main", "prompt_texts", "sample_rewards", "vllm_sampling_kwargs"]

_BATCH_PROMPTS = 64  # prompts per generate call (x K sequences)


def _pick_prompts(dataset: Any, n: int, seed: int) -> list[int]:
    indices = list(range(len(dataset)))
    random.Random(f"advise:{seed}").shuffle(indices)
    return sorted(indices[:n])


def _score(funcs: list[Any], weights: list[float], prompts: list[Any], completions: list[Any],
           completion_ids: list[list[int]], columns: dict[str, list[Any]]) -> list[float]:
    total = [0.0] * len(completions)
    for func, weight in zip(funcs, weights):
        values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)
        for i, v in enumerate(values):
            total[i] += weight * (0.0 if v is None else float(v))
    return total


def _text(completion: Any) -> str:
    """A completion as text: a chat completion's last message content, a plain one as it is."""
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


_DECODING_KEYS = ("max_completion_length", "top_p", "top_k", "min_p", "repetition_penalty", "generation_kwargs")


def decoding(trainer: dict[str, Any]) -> dict[str, Any]:
    """The study's decoding keys over the installed GRPOConfig's own defaults (never literals here).

    So a study that leaves max_completion_length out samples 512 tokens as its trials do (TRL
    1.16), not a number typed in this module.
    """
    return {k: trainer[k] if trainer.get(k) is not None else trl_default(k) for k in _DECODING_KEYS}


def hf_sampling_kwargs(trainer: dict[str, Any], temperature: float, k: int) -> dict[str, Any]:
    """generate()'s sampling settings, as TRL's GRPOTrainer sets them from the same trainer keys.

    Every key is explicit: a missing top_k is TRL's 0 (no top-k cut), never the model's
    generation_config default (often 50), so advise samples the distribution training samples.
    """
    d = decoding(trainer)
    kwargs: dict[str, Any] = {
        "max_new_tokens": int(d["max_completion_length"]), "do_sample": True, "temperature": temperature,
        "top_p": float(d["top_p"]), "top_k": int(d["top_k"]),
        "repetition_penalty": float(d["repetition_penalty"]), "num_return_sequences": k,
    }
    if d["min_p"] is not None:
        kwargs["min_p"] = float(d["min_p"])
    kwargs.update(d["generation_kwargs"] or {})
    return kwargs


def vllm_sampling_kwargs(trainer: dict[str, Any], temperature: float, k: int, seed: int) -> dict[str, Any]:
    """vLLM SamplingParams keywords, as TRL's colocate generate builds them from the same keys."""
    d = decoding(trainer)
    kwargs: dict[str, Any] = {
        "n": k, "temperature": temperature, "top_p": float(d["top_p"]), "top_k": int(d["top_k"]),
        "min_p": 0.0 if d["min_p"] is None else float(d["min_p"]),
        "repetition_penalty": float(d["repetition_penalty"]), "max_tokens": int(d["max_completion_length"]), "seed": seed,
    }
    kwargs.update(d["generation_kwargs"] or {})
    return kwargs


def prompt_texts(tokenizer: Any, prompts: list[Any]) -> list[str]:
    """Prompts as the model sees them: chat messages through the template, plain text as is."""
    return [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) if isinstance(p, list) else p
            for p in prompts]


def _generate_hf(model: Any, tokenizer: Any, prompts: list[Any], k: int, temperature: float, trainer: dict[str, Any],
                 seed: int) -> tuple[list[str], list[list[int]]]:
    import torch  # lazy: preflight/advise.py imports this module in the parent, which never loads torch

    texts = prompt_texts(tokenizer, prompts)
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    kwargs = {**hf_sampling_kwargs(trainer, temperature, k), "pad_token_id": tokenizer.pad_token_id}
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(**enc, **kwargs)
    ids = out[:, enc["input_ids"].shape[1]:].tolist()
    return _decoded(tokenizer, ids, pad=tokenizer.pad_token_id)


def _decoded(tokenizer: Any, rows: list[list[int]], pad: int | None = None) -> tuple[list[str], list[list[int]]]:
    """Completion ids cut after the end token (else `pad` filler dropped) and decoded as TRL decodes
    them for the rewards (batch_decode, special tokens skipped); both samplers end here, so equal ids
    score equally."""
    eos = tokenizer.eos_token_id
    cut = [row[: row.index(eos) + 1] if eos in row else [t for t in row if t != pad] for row in rows]
    return tokenizer.batch_decode(cut, skip_special_tokens=True), cut


def _generate_vllm(llm: Any, tokenizer: Any, prompts: list[Any], k: int, temperature: float, trainer: dict[str, Any],
                   seed: int) -> tuple[list[str], list[list[int]]]:
    """vLLM on token ids tokenized as training does (no special tokens added: a text prompt would get
    the tokenizer's BOS again from vLLM, a double BOS for tokenizers that add one). The completions
    are decoded from their ids by the tokenizer, as TRL decodes them, not taken from vLLM's own
    incremental detokenizer, whose text can differ for the same ids.

    Each prompt gets its own seed (request_seeds.py): one seed for the call gave all prompts the
    same draws.
    """
    from vllm import SamplingParams  # optional: vLLM only when the study generates with it

    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in prompt_texts(tokenizer, prompts)]
    params = [SamplingParams(**vllm_sampling_kwargs(trainer, temperature, k, s)) for s in prompt_seeds(seed, len(ids), k)]
    outputs = llm.generate([{"prompt_token_ids": p} for p in ids], sampling_params=params, use_tqdm=False)
    return _decoded(tokenizer, [list(c.token_ids) for request in outputs for c in request.outputs])


def sample_rewards(spec: dict[str, Any]) -> dict[str, Any]:
    """{prompts, temperatures, rewards[t][prompt][k], completions[t][prompt][k], reward_names, seconds, tokens}."""
    # here, not at the top: preflight/advise.py imports this module (PROGRESS_PREFIX) in the orchestrator,
    # which never imports torch, transformers or trl; only the sampling process runs this function
    from .build import load_model_and_tokenizer
    from .prompts import load_prompts
    from .rewards import RewardContext, build_rewards

    started = time.perf_counter()
    data = section_from(DataSpec, spec["data"], "data")
    model, tokenizer, path = load_model_and_tokenizer(section_from(ModelSpec, spec["model"], "model"), data,
                                                      log=lambda m: print(m, flush=True))
    dataset = load_prompts(data, tokenizer)
    n, k, seed = int(spec["num_prompts"]), int(spec["k"]), int(spec.get("seed", 0))
    chosen = _pick_prompts(dataset, n, seed)
    rows = dataset.select(chosen)
    trainer = dict(spec.get("trainer") or {})
    ctx = RewardContext(task=data.task, max_completion_length=decoding(trainer)["max_completion_length"])
    funcs, names, weights = build_rewards([section_from(RewardEntry, r, "rewards[]") for r in spec["rewards"]], ctx)
    if trainer.get("reward_weights"):
        weights = [float(w) for w in trainer["reward_weights"]]
    use_vllm = (spec.get("hardware", {}).get("vllm") or {}).get("mode", "none") != "none"
    llm = None
    if use_vllm:
        from vllm import LLM  # optional: vLLM only when the study generates with it

        from .vllm_cpu import keep_weights_loadable  # vLLM's modules only when the study generates with it

        keep_weights_loadable()  # the same kernels as a trial's colocated engine on a CPU
        engine: dict[str, Any] = {"gpu_memory_utilization": float(trainer.get("vllm_gpu_memory_utilization") or 0.9)}
        if trainer.get("vllm_max_model_length"):  # the study's own cap, as its trials' engine gets
            engine["max_model_len"] = int(trainer["vllm_max_model_length"])
        llm = LLM(model=path, dtype=spec["model"].get("dtype") or "auto", seed=seed,
                  trust_remote_code=bool(spec["model"].get("trust_remote_code")), **engine)
    else:
        import torch  # lazy: preflight/advise.py imports this module in the parent, which never loads torch

        if torch.cuda.is_available():
            model = model.to("cuda")
        model.eval()
    load_seconds = time.perf_counter() - started
    columns_all = {c: rows[c] for c in rows.column_names if c != "prompt"}
    rewards: list[list[list[float]]] = []
    texts: list[list[list[str]]] = []  # the completions themselves, so a person can check the reward
    tokens = 0
    for ti, temperature in enumerate(spec["temperatures"]):
        per_prompt: list[list[float]] = []
        written: list[list[str]] = []
        for start in range(0, len(rows), _BATCH_PROMPTS):
            prompts = list(rows["prompt"][start:start + _BATCH_PROMPTS])
            call_seed = seed * 1_000_003 + ti * 10_007 + start
            gen = _generate_vllm if llm is not None else _generate_hf
            completions, ids = gen(llm if llm is not None else model, tokenizer, prompts, k, float(temperature), trainer, call_seed)
            tokens += sum(len(x) for x in ids)
            repeated = [p for p in prompts for _ in range(k)]
            columns = {c: [v for v in values[start:start + _BATCH_PROMPTS] for _ in range(k)] for c, values in columns_all.items()}
            scores = _score(funcs, weights, repeated, completions, ids, columns)
            per_prompt += [scores[i * k:(i + 1) * k] for i in range(len(prompts))]
            written += [[_text(c) for c in completions[i * k:(i + 1) * k]] for i in range(len(prompts))]
            print(f"{PROGRESS_PREFIX} T={float(temperature):g}: {len(per_prompt)}/{len(rows)} prompts x {k} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        rewards.append(per_prompt)
        texts.append(written)
    prompts_text = [p if isinstance(p, str) else json.dumps(p) for p in rows["prompt"]]
    return {"prompts": prompts_text, "prompt_indices": chosen, "temperatures": list(spec["temperatures"]), "k": k,
            "rewards": rewards, "completions": texts, "reward_names": names, "completion_tokens": tokens, "load_seconds": round(load_seconds, 3),
            "seconds": round(time.perf_counter() - started, 3), "backend": "vllm" if llm is not None else "transformers"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.sample <folder>/sample_spec.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0])
    spec = json.loads(spec_path.read_text())
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import torch  # lazy: preflight/advise.py imports this module in the parent, which never loads torch

    if str(spec["model"].get("name_or_path", "")).startswith(BUILTIN_MODEL_PREFIX):
        torch.set_num_threads(1)
    out = sample_rewards(spec)
    target = spec_path.parent / SAMPLES_FILE
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out))
    os.replace(tmp, target)
    print(f"[grpo-ablate] sampled {len(out['prompts'])} prompts x {out['k']} at {out['temperatures']} in {out['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
