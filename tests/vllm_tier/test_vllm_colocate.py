"""A real colocate-vLLM trial on the CPU: held-out evaluation through the trainer's vLLM engine and a G
schedule; its greedy answers equal transformers' on the same weights, before training (the model on
disk) and after it (the final checkpoint), so the engine saw the trainer's updated weights.

Known to fail on vLLM 0.31's CPU build, in TRL's weight sync, before the first generation: after
loading, vLLM's CPU linear layers hand their weights to oneDNN (vllm/model_executor/layers/utils.py,
dispatch_cpu_unquantized_gemm(remove_weight=True)) and replace `layer.weight` with an empty
Parameter that has no `weight_loader`, so TRL's `sync_weights` -> `model.load_weights` raises
AttributeError. The mark is strict: when a vLLM release keeps the weights loadable, this test
passes, the run reports it, and the mark comes off."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_cli, write_study
from tier import jsonl

STEPS = 4
HELD_OUT = 48


def _study(tmp_path: Path) -> Path:
    return write_study(tmp_path, f"""
        study: {{name: colocate, sampler: tpe, n_trials: 1, seeds: [0], output_dir: {tmp_path / 'out'}, keep_checkpoints: true}}
        model: {{name_or_path: builtin:tiny-vllm}}
        data: {{task: addition, num_prompts: 200}}
        trainer:
          learning_rate: 1.0e-3      # large, so a few steps change greedy answers the engine must then show
          per_device_train_batch_size: 16
          max_completion_length: 6
          beta: 0.0
          lr_scheduler_type: constant
          warmup_steps: 0
          vllm_max_model_length: 64
          save_strategy: steps       # the final weights on disk, for transformers to load
          save_steps: {STEPS}
          save_only_model: true
        hardware: {{num_processes: 1, vllm: {{mode: colocate}}}}
        search: {{num_generations: ["4->8@50%"]}}
        budget: {{max_steps: {STEPS}}}
        evaluation: {{num_prompts: {HELD_OUT}, temperature: 0, points: 1, show_prompts: {HELD_OUT}}}
        """)


def _greedy(folder: Path, prompts: list[str], max_new_tokens: int) -> list[str]:
    """transformers' greedy answers as the evaluator's transformers branch makes them (left padding, no
    special tokens added, cut after the end token, decoded without special tokens)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id)
    texts = []
    for row in out[:, enc["input_ids"].shape[1]:].tolist():
        cut = row[: row.index(tok.eos_token_id) + 1] if tok.eos_token_id in row else row
        texts.append(tok.decode(cut, skip_special_tokens=True))
    return texts


@pytest.mark.xfail(strict=True, reason="vLLM 0.31 CPU build: oneDNN prepacking drops layer.weight, so TRL's "
                   "colocate sync_weights fails ('Parameter' object has no attribute 'weight_loader')")
def test_colocate_trial_evaluates_through_vllm_as_transformers_does(tmp_path, needs_vllm, tiny_vllm_model):
    trial = tmp_path / "trial"
    r = run_cli("run-one", str(_study(tmp_path)), "--trial-dir", str(trial), timeout=900)
    log = (trial / "log.txt").read_text() if (trial / "log.txt").exists() else ""
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + log[-4000:]
    assert "vLLM" in log or "vllm" in log

    steps = jsonl(trial / "metrics.jsonl")
    g = [row.get("num_generations") for row in steps]
    assert len(steps) == STEPS and g[0] == 4 and g[-1] == 8, g  # the schedule switched G

    evals = jsonl(trial / "eval.jsonl")
    assert len(evals) == 3 and [e["num_prompts"] for e in evals] == [HELD_OUT] * 3
    first, last = evals[0], evals[-1]
    assert first["step"] == 0 and last["step"] == STEPS
    prompts = [s["prompt"] for s in first["samples"]]
    assert len(prompts) == HELD_OUT and prompts == [s["prompt"] for s in last["samples"]]
    answers = lambda row: [s["completions"][0]["text"] for s in row["samples"]]  # noqa: E731

    before = _greedy(Path(tiny_vllm_model), prompts, first["max_completion_length"])
    after = _greedy(trial / "trainer" / f"checkpoint-{STEPS}", prompts, last["max_completion_length"])
    # the training changed greedy answers, so an engine still holding the first weights would show
    assert before != after, "training changed no greedy answer: the weight check below would prove nothing"
    assert answers(first) == before  # vLLM's evaluation = transformers' on the model it started from
    assert answers(last) == after  # ... and on the trainer's final weights: the colocate sync is real
