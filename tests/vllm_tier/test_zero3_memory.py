"""ZeRO-3 loads the model partitioned: each rank's host memory holds its shard, not the whole model (issue 41 item 6).

trainer/build.py creates GRPOConfig (and with it accelerate's DeepSpeed plugin, `zero3_init_flag: true` in
the shipped sweeps/accelerate/zero3.yaml) before it loads the model, so transformers loads it under
deepspeed.zero.Init. Two CPU ranks over gloo build a trial (build_trial, as the trial process does) of a
67M-parameter Qwen2-shaped model, bf16 on disk as hub checkpoints are and loaded in fp32 (TRL's default:
256 MB), through the shipped ZeRO-3 config and, as the control, the ZeRO-2 one (whole weights on every
rank). Memory is each rank's private (USS) growth over the build, after gc and glibc's malloc_trim (freed
heap handed back, so what is counted is what is held). Measured (tests/vllm_tier, 2-core CPU): ZeRO-3
holds 128 MB of parameters per rank and grows by 167 MB; ZeRO-2 holds 256 MB and grows by 262 MB. On a
slower machine ZeRO-3 grew by 203 MB and ZeRO-2 by 262 MB; in a later CI run ZeRO-3 by 163-167 MB and ZeRO-2
by 209-262 MB. The growth moves by tens of MB from run to run and rank to rank, the parameter bytes held do
not: so the parameter bytes are checked exactly, and the growth with margins wider than that spread (each
ZeRO-3 rank's below the whole model; each ZeRO-2 rank's, the control that the measure sees a whole model
held, above 0.6 of it; the two ranks' ZeRO-2 growth above their ZeRO-3 growth).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, free_port

ACCELERATE = ROOT / "sweeps" / "accelerate"
RANK_SCRIPT = Path(__file__).resolve().parent / "zero3_rank.py"


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory, needs_deepspeed) -> Path:
    """A Qwen2-shaped model of 67M parameters (4 layers, hidden 1024), random weights, a character tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("zero3-model")
    vocab = {t: i for i, t in enumerate(["<pad>", "<unk>", "<eos>", *"0123456789+= ?Whatis"])}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.save_pretrained(folder)
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=1024, intermediate_size=4096, num_hidden_layers=4,
                         num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=128,
                         pad_token_id=0, eos_token_id=2, bos_token_id=2, tie_word_embeddings=False)
    import torch

    Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)  # bf16 on disk, as hub checkpoints are
    return folder


def _ranks(model: Path, out: Path, config: str) -> list[dict]:
    out.mkdir()
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--main_process_port",
           str(free_port()), "--config_file", str(ACCELERATE / config), str(RANK_SCRIPT), str(model), str(out),
           str(ACCELERATE / config)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return [json.loads((out / f"rank{i}.json").read_text()) for i in (0, 1)]


def test_zero3_ranks_hold_a_shard_of_the_model_in_host_memory(model_folder, tmp_path):
    zero3 = _ranks(model_folder, tmp_path / "zero3", "zero3.yaml")
    zero2 = _ranks(model_folder, tmp_path / "zero2", "zero2.yaml")
    whole = zero2[0]["whole_param_bytes"]
    grew = {name: [r["private_after"] - r["private_before"] for r in ranks] for name, ranks in (("zero3", zero3), ("zero2", zero2))}
    print(f"whole model {whole / 2**20:.0f} MB; per-rank parameter bytes held, MB: ZeRO-3 "
          f"{[round(r['local_param_bytes'] / 2**20) for r in zero3]}, ZeRO-2 {[round(r['local_param_bytes'] / 2**20) for r in zero2]}; "
          f"per-rank private memory growth building the trial, MB: ZeRO-3 {[round(g / 2**20) for g in grew['zero3']]}, "
          f"ZeRO-2 {[round(g / 2**20) for g in grew['zero2']]}")
    assert whole > 250e6  # 67M fp32 parameters: large next to what else a rank allocates
    for r, g in zip(zero3, grew["zero3"]):
        assert r["zero3"] and r["whole_param_bytes"] == whole
        assert r["local_param_bytes"] < 0.55 * whole, r  # its shard: about half of each partitioned tensor
        assert g < whole, r  # host memory below the whole model's
    for r, g3, g2 in zip(zero2, grew["zero3"], grew["zero2"]):
        assert not r["zero3"] and r["local_param_bytes"] == whole, r
        # the control: the same trial holds the whole model on every rank under ZeRO-2, and the growth sees it
        # (0.82-1.02 of the model measured)
        assert g2 > 0.6 * whole, (g2, g3)
    # and ZeRO-3 grows by less (two ranks together: 141 MB less in the run that measured 209 MB above)
    assert sum(grew["zero2"]) > sum(grew["zero3"]), grew
