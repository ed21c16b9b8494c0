"""Trainer peak and vLLM pool apart (issue 19, item 6): the engine's size from its own tensors.

The engine is a stand-in with vLLM's attribute path (the one TRL's sync_weights writes through)
holding real torch tensors; CUDA's peak reset runs only on a GPU (benchmarks/gpu_smoke.py checks
that two batch sizes give two trainer peaks over one pool).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from grpo_ablate.files.reader import Owner
from grpo_ablate.files.probe_file import Probe, ProbePoint, load_probe, save_probe
from grpo_ablate.trainer.callbacks import engine_memory_mb, peak_memory_mb


def _trainer_with_engine(kv: list, model: torch.nn.Module):
    runner = SimpleNamespace(kv_caches=kv, model=model)
    llm = SimpleNamespace(llm_engine=SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))))
    return SimpleNamespace(vllm_generation=SimpleNamespace(llm=llm))


def test_engine_pool_counts_kv_cache_and_weights():
    kv = [torch.zeros(2, 256, 1024, dtype=torch.float16), [torch.zeros(256, 1024, dtype=torch.float16)]]  # 1 MiB + 0.5 MiB
    model = torch.nn.Linear(512, 512, bias=False)  # 1 MiB of float32
    assert engine_memory_mb(_trainer_with_engine(kv, model)) == 2.5


def test_no_colocated_engine_no_pool():
    assert engine_memory_mb(SimpleNamespace()) is None
    assert engine_memory_mb(SimpleNamespace(vllm_generation=SimpleNamespace(llm=None))) is None  # server mode


def test_cpu_peak_is_the_process_rss_whatever_the_engine():
    assert peak_memory_mb(10_000.0) == peak_memory_mb() > 0


def test_probe_json_keeps_the_pool_beside_the_peak(tmp_path):
    point = ProbePoint(num_generations=8, generation_batch_size=64, fits=True, outcome="completed",
                       peak_memory_mb=900.0, memory_kind="cuda", engine_memory_mb=40_000.0)
    owner = Owner(study="s", model="m", hardware="h")
    save_probe(tmp_path, Probe(owner=owner, points=[point]))
    again = load_probe(tmp_path, owner).points[0]
    assert (again.peak_memory_mb, again.engine_memory_mb) == (900.0, 40_000.0)
