"""advise's vLLM sampler samples what training samples (issue 19, item 7), against a stand-in vLLM.

vLLM needs a GPU: the stand-in `LLM.generate` and `SamplingParams` record what they get. The
tokenizer and TRL's GRPOConfig are the real ones. benchmarks/gpu_smoke.py runs the same sampler on
the real engine.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from types import SimpleNamespace

import pytest

from grpo_ablate.trainer.sample import _generate_vllm, decoding, hf_sampling_kwargs, vllm_sampling_kwargs


class _Params:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class _LLM:
    def __init__(self):
        self.calls = []

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        per_prompt = [p.kwargs for p in sampling_params] if isinstance(sampling_params, list) else [sampling_params.kwargs] * len(prompts)
        self.calls.append((prompts, per_prompt))
        return [SimpleNamespace(outputs=[SimpleNamespace(text="7", token_ids=(3, 4)) for _ in range(kw["n"])])
                for kw in per_prompt]


@pytest.fixture
def fake_vllm(monkeypatch):
    # TRL asks importlib whether vllm is installed when it is first imported, and a stand-in without a spec
    # makes that ask raise: import TRL's trainer against the real environment first (run alone, nothing has).
    from trl import GRPOTrainer  # noqa: F401

    module = types.ModuleType("vllm")
    module.SamplingParams = _Params
    monkeypatch.setitem(sys.modules, "vllm", module)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from grpo_ablate.trainer.builtin.model import builtin_model_path

    return AutoTokenizer.from_pretrained(builtin_model_path("builtin:tiny", "addition"))


def test_defaults_come_from_grpo_config():
    from trl import GRPOConfig

    fields = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    d = decoding({})
    assert d["max_completion_length"] == fields["max_completion_length"]  # 512 in TRL 1.16, not a literal 256
    assert hf_sampling_kwargs({}, 1.0, 2)["max_new_tokens"] == fields["max_completion_length"]
    v = vllm_sampling_kwargs({}, 0.7, 4, seed=3)
    assert v["max_tokens"] == fields["max_completion_length"] and v["top_k"] == fields["top_k"]
    assert v["top_p"] == fields["top_p"] and v["repetition_penalty"] == fields["repetition_penalty"]
    assert (v["n"], v["temperature"], v["seed"], v["min_p"]) == (4, 0.7, 3, 0.0)
    assert vllm_sampling_kwargs({"max_completion_length": 9, "generation_kwargs": {"top_p": 0.5}}, 1.0, 1, 0)["top_p"] == 0.5


def test_vllm_sampler_passes_token_ids_without_added_special_tokens(tokenizer, fake_vllm):
    llm = _LLM()
    completions, ids = _generate_vllm(llm, tokenizer, ["12+3=", "4+40="], 2, 0.9, {"max_completion_length": 6}, seed=5)
    (prompts, params), = llm.calls
    assert [p["prompt_token_ids"] for p in prompts] == [tokenizer(t, add_special_tokens=False)["input_ids"]
                                                         for t in ["12+3=", "4+40="]]
    assert all(set(p) == {"prompt_token_ids"} for p in prompts)  # no text: vLLM would add special tokens again
    assert all(p["max_tokens"] == 6 and p["n"] == 2 for p in params)
    # a seed per prompt, k apart: vLLM seeds a request's samples seed..seed+k-1, so none is shared
    assert [p["seed"] for p in params] == [5 * 10**6, 5 * 10**6 + 2]
    # the text is the tokenizer's decoding of the ids (as TRL decodes them), not vLLM's own text ("7")
    assert completions == [tokenizer.decode([3, 4], skip_special_tokens=True)] * 4 and ids == [[3, 4]] * 4
    assert completions[0] != "7"


def test_prompt_seeds_never_share_a_sample_seed_within_or_across_calls():
    from grpo_ablate.trainer.request_seeds import prompt_seeds

    k = 8
    calls = [prompt_seeds(c, 64, k) for c in (0, 1, 64, 10_007)]  # consecutive and batch-offset call seeds
    samples = [s + i for seeds in calls for s in seeds for i in range(k)]
    assert len(samples) == len(set(samples)) == 4 * 64 * k
    with pytest.raises(ValueError, match=r"10\*\*6"):
        prompt_seeds(0, 200_000, 8)
