"""The GPU smoke check (benchmarks/gpu_smoke.py) as tests.

- gpu: on a CUDA machine with vLLM, both generation paths run a bf16 trial through the real
  CLI within 5 minutes and report samples/sec, then probe (CUDA memory) and advise (vLLM)
  run on the same model (skipped without CUDA or vLLM; CI never runs it);
- slow: the same script's plumbing on the CPU (HF generate, float32), so it cannot rot between
  visits to a GPU machine;
- fast: the saved model folder is what vLLM needs to load on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from helpers import ROOT, cli_env

SCRIPT = ROOT / "benchmarks" / "gpu_smoke.py"
sys.path.insert(0, str(ROOT / "benchmarks"))


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_saved_model_folder_loads_on_its_own(tmp_path):
    """vLLM loads the model by path: config, weights and tokenizer must all be in the folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    import gpu_smoke

    folder = gpu_smoke.save_tiny_model(tmp_path / "m", dtype="bfloat16")
    assert (folder / "tokenizer.json").exists() and list(folder.glob("*.safetensors"))
    config = AutoConfig.from_pretrained(folder)
    assert config.architectures == ["Qwen2ForCausalLM"]
    assert config.hidden_size // config.num_attention_heads == 64  # a head size every vLLM backend supports
    assert str(config.dtype if hasattr(config, "dtype") else config.torch_dtype).endswith("bfloat16")
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.decode(tok("12+34=")["input_ids"]) == "12+34="
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    assert next(model.parameters()).dtype == torch.bfloat16


@pytest.mark.slow
def test_smoke_plumbing_on_cpu(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--modes", "hf", "--steps", "3", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_smoke.json").read_text())
    hf, preflight = report["results"]
    assert hf["outcome"] == "completed" and hf["steps"] == 3 and hf["samples_per_second"] > 0
    assert "HF generate" in r.stdout and "samples/s" in r.stdout
    assert not preflight.get("error"), preflight
    assert preflight["memory_kind"] == ["rss"] and preflight["probe_processes"] == 1
    assert preflight["advise_backend"] == "transformers" and preflight["advise_seconds"] > 0


@pytest.mark.gpu
def test_gpu_smoke_hf_and_vllm_colocate(tmp_path):
    if not _cuda():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("vllm", reason="needs vLLM (pip install 'grpo-ablate[gpu]')")
    started = time.monotonic()
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                       cwd=ROOT, env=cli_env(), timeout=330)
    wall = time.monotonic() - started
    print(r.stdout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_smoke.json").read_text())
    by_mode = {x["mode"]: x for x in report["results"]}
    for mode in ("hf", "vllm"):
        assert by_mode[mode]["outcome"] == "completed", by_mode[mode]
        assert by_mode[mode]["samples_per_second"] > 0
    preflight = by_mode["preflight"]  # probe on CUDA's memory; advise samples with vLLM
    assert not preflight.get("error") and preflight["memory_kind"] == ["cuda"] and preflight["advise_backend"] == "vllm"
    assert wall <= 300, f"the smoke check took {wall:.0f} s; it must stay within 5 minutes"
