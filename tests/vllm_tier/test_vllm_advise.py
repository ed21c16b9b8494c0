"""`grpo-ablate advise` with the vLLM sampler against the transformers sampler, on the same prompts of
the same model at the same decoding: the two draw from one distribution, so each one's share of
zero-spread prompts lies inside the other's 95% interval.

This found a bug: the vLLM sampler gave every prompt of a call the same request seed, and vLLM
seeds a request's samples seed..seed+k-1, so all prompts shared their random draws and similar
prompts made the same choices (24 of 64 prompts without spread, against 12 of 64 from transformers,
while the two engines' next-token probabilities agreed to three decimals). Each prompt now has a
seed of its own (trainer/request_seeds.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli, write_study

PROMPTS, K = 64, 8


def _study(folder: Path, mode: str) -> Path:
    return write_study(folder, f"""
        study: {{name: advise-{mode}, sampler: tpe, n_trials: 2, seeds: [0], output_dir: {folder / 'out'}}}
        model: {{name_or_path: builtin:tiny-vllm, dtype: float32}}  # else vLLM's "auto" downcasts it to bf16
        data: {{task: addition, num_prompts: 200}}
        trainer: {{per_device_train_batch_size: 16, max_completion_length: 6, vllm_max_model_length: 64}}
        hardware: {{num_processes: 1, vllm: {{mode: {mode}}}}}
        search: {{num_generations: [4, 8]}}
        budget: {{max_steps: 4}}
        """)


def _advise(folder: Path, mode: str) -> dict:
    folder.mkdir()
    r = run_cli("advise", str(_study(folder, mode)), "--k", str(K), "--prompts", str(PROMPTS), timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads((folder / "out" / "advise" / "samples.json").read_text())


def _zero_spread(samples: dict) -> tuple[int, int]:
    """(prompts whose K rewards are all equal, prompts), at the first temperature."""
    per_prompt = samples["rewards"][0]
    return sum(1 for r in per_prompt if max(r) == min(r)), len(per_prompt)


def test_vllm_and_transformers_samplers_agree_on_zero_spread(tmp_path, needs_vllm):
    from scipy.stats import binomtest

    by_vllm = _advise(tmp_path / "vllm", "colocate")
    by_hf = _advise(tmp_path / "hf", "none")
    assert by_vllm["backend"] == "vllm" and by_hf["backend"] == "transformers"
    assert by_vllm["prompts"] == by_hf["prompts"] and len(by_vllm["prompts"]) == PROMPTS
    assert by_vllm["temperatures"] == by_hf["temperatures"]
    shares = {}
    for name, samples in (("vllm", by_vllm), ("transformers", by_hf)):
        zero, n = _zero_spread(samples)
        ci = binomtest(zero, n).proportion_ci(confidence_level=0.95, method="wilson")
        shares[name] = (zero / n, ci.low, ci.high)
    (v, v_lo, v_hi), (h, h_lo, h_hi) = shares["vllm"], shares["transformers"]
    assert h_lo <= v <= h_hi and v_lo <= h <= v_hi, shares
    # not two degenerate samplers: the model answers some prompts right and some wrong
    assert 0 < v < 1 and 0 < h < 1, shares
