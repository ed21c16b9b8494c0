"""Server mode on the CPU: `grpo-ablate run-one` starts a real `trl vllm-serve` through the project's
server helper (hardware.gpus 0: no second GPU demanded), trains on generations from that server and
evaluates through the evaluator's server branch, seeded; then stops the server.

TRL's weight sync to the server needs vLLM's NCCL engine on CUDA. Here a test double
(tests/vllm_tier/sync_double/sitecustomize.py, loaded into the trial process only) records what TRL
would send; the test checks the first sync against the model the trainer started from, tensor by
tensor, and that later syncs carry updated weights. The transfer itself
is covered only on a GPU. Because the server keeps its first weights, every evaluation point samples
the same model with the same seed: equal samples at every point are the seeding, checked for real.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from grpo_ablate.launch.vllm_server import _port_free
from helpers import free_port, run_cli, write_study
from tier import jsonl

HERE = Path(__file__).resolve().parent
STEPS = 3


def _sha256(tensor) -> str:
    import torch

    return hashlib.sha256(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def test_server_mode_trial_with_a_recording_weight_sync(tmp_path, needs_vllm, tiny_vllm_model):
    port = free_port()
    study = write_study(tmp_path, f"""
        study: {{name: server, sampler: tpe, n_trials: 1, seeds: [0], output_dir: {tmp_path / 'out'}}}
        model: {{name_or_path: {tiny_vllm_model}, dtype: float32}}
        data: {{task: addition, num_prompts: 200}}
        trainer:
          learning_rate: 1.0e-3
          per_device_train_batch_size: 16
          max_completion_length: 6
          beta: 0.0
          vllm_max_model_length: 64
        hardware: {{gpus: 0, num_processes: 1, vllm: {{mode: server, port: {port}}}}}
        search: {{num_generations: [4]}}
        budget: {{max_steps: {STEPS}}}
        evaluation: {{num_prompts: 16, temperature: 1.0, samples_per_prompt: 2, points: 1, show_prompts: 16}}
        """)
    trial, record = tmp_path / "trial", tmp_path / "weights.jsonl"
    path = os.pathsep.join([str(HERE / "sync_double"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    r = run_cli("run-one", str(study), "--trial-dir", str(trial), timeout=900, PYTHONPATH=path,
                GRPO_TEST_WEIGHT_RECORD=str(record))
    log = (trial / "log.txt").read_text() if (trial / "log.txt").exists() else ""
    server_log = (trial / "vllm.log").read_text() if (trial / "vllm.log").exists() else ""
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:] + log[-3000:] + server_log[-3000:]

    # the project's helper ran `trl vllm-serve` on this study's port, on the CPU, and stopped it
    assert "vllm-serve" in server_log and f"--port {port}" in server_log and "CUDA_VISIBLE_DEVICES= " in server_log
    assert _port_free(port)  # free again (TIME_WAIT aside, as the helper itself checks): the server is gone

    # training generated through the server: real completions, scored
    steps = jsonl(trial / "metrics.jsonl")
    assert len(steps) == STEPS and all(row.get("num_generations") == 4 for row in steps)

    # the evaluator's server branch, seeded: same weights on the server + same seed = same samples
    evals = jsonl(trial / "eval.jsonl")
    assert len(evals) == 3
    texts = [[c["text"] for s in e["samples"] for c in s["completions"]] for e in evals]
    assert texts[0] == texts[1] == texts[2] and len(texts[0]) == 32
    assert any(s["completions"][0]["text"] != s["completions"][1]["text"] for s in evals[0]["samples"]), \
        "temperature 1 drew identical pairs for every prompt: sampling is not exercised"

    # what TRL would have sent: every tensor of the trainer's model. The first sync (before the first
    # generation, at step 0) is checked against the model on disk; later ones carry the updates.
    # (A trial that ends for good removes its checkpoints, so the final weights are not on disk.)
    events = jsonl(record)
    init = [e for e in events if e["event"] == "init"]
    syncs = [e for e in events if e["event"] == "sync"]
    assert len(init) == 1 and init[0]["weight_transfer_config"], events[:1]
    assert len(syncs) >= 2  # before generating, and for the final evaluation
    from safetensors.torch import load_file

    start = load_file(str(Path(tiny_vllm_model) / "model.safetensors"))
    first = syncs[0]["params"]
    assert set(start) <= set(first), sorted(set(start) - set(first))
    for name, tensor in start.items():
        assert first[name]["shape"] == list(tensor.shape) and first[name]["sha256"] == _sha256(tensor), name
    assert syncs[-1]["params"] != first and set(syncs[-1]["params"]) == set(first)  # updated weights, all of them
