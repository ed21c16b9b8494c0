"""The held-out evaluator's vLLM branches, against a stand-in for vLLM (which needs a GPU), on CPU.

Everything but vLLM is real: the Evaluator, the built-in tokenizer, a real reward function. The
stand-in engine has vLLM's method names (`wake_up`, `sleep`, `generate`) and TRL's
VLLMGeneration attributes (`mode`, `enable_sleep_mode`, `_llm_weights_sleeping`,
`sync_weights`), and records every call, so the tests check the ORDER of the calls (issue 19,
item 4), that prompts go as token ids without added special tokens, and that the server request
carries the evaluation seed (item 8). The GPU smoke (benchmarks/gpu_smoke.py) runs the same
branches against the real engine and server.
"""

from __future__ import annotations

import inspect
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_ablate.trainer.evaluation import EVAL_SEED, Evaluator, server_completions, shard
from grpo_ablate.contract.spec import EvaluationSpec


class _SamplingParams:
    """vLLM's SamplingParams as a record of its keyword arguments."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class _Engine:
    """vLLM's LLM: wake_up / sleep / generate, each call recorded in order."""

    def __init__(self, calls: list, eos: int):
        self.calls = calls
        self.eos = eos
        self.awake = {"weights": False, "kv_cache": False}

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tuple(tags or ("weights", "kv_cache"))))
        for t in tags or ("weights", "kv_cache"):
            self.awake[t] = True

    def sleep(self, level=1):
        self.calls.append(("sleep", level))
        self.awake = {"weights": False, "kv_cache": False}

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        # vLLM 0.31 schedules nothing until the engine is fully awake: a sleeping engine hangs.
        assert all(self.awake.values()), f"generate on an engine not fully awake: {self.awake}"
        per_prompt = [p.kwargs for p in sampling_params] if isinstance(sampling_params, list) else [sampling_params.kwargs] * len(prompts)
        self.calls.append(("generate", [p["prompt_token_ids"] for p in prompts], per_prompt))
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[5, 6, self.eos, 7]) for _ in range(kw["n"])])
                for kw in per_prompt]


class _Generation:
    """TRL's VLLMGeneration surface the evaluator uses (colocate mode)."""

    def __init__(self, calls: list, eos: int, *, sleep_mode: bool):
        self.mode = "colocate"
        self.enable_sleep_mode = sleep_mode
        self.tensor_parallel_size = 1
        self.llm = _Engine(calls, eos)
        self._llm_weights_sleeping = sleep_mode
        if not sleep_mode:
            self.llm.awake = {"weights": True, "kv_cache": True}
        self.calls = calls

    def sync_weights(self):  # TRL: under sleep mode, wake the weights, then load them
        self.calls.append(("sync_weights",))
        if self.enable_sleep_mode:
            self.llm.wake_up(tags=["weights"])
            self._llm_weights_sleeping = False


class _Client:
    """TRL's VLLMClient.generate, recording the request."""

    def __init__(self):
        self.requests = []

    def generate(self, prompts, n=1, **kwargs):
        self.requests.append({"prompts": prompts, "n": n, **kwargs})
        return {"completion_ids": [[9, 9] for _ in range(len(prompts) * n)]}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from grpo_ablate.trainer.builtin.model import builtin_model_path

    return AutoTokenizer.from_pretrained(builtin_model_path("builtin:tiny", "addition"))


@pytest.fixture
def fake_vllm(monkeypatch):
    # TRL asks importlib whether vllm is installed when it is first imported, and a stand-in without a spec
    # makes that ask raise: import TRL's trainer against the real environment first (run alone, nothing has).
    from trl import GRPOTrainer  # noqa: F401

    module = types.ModuleType("vllm")
    module.SamplingParams = _SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)


def _evaluator(tmp_path: Path, tokenizer, *, samples=2, temperature=1.0):
    from datasets import Dataset

    prompts = Dataset.from_dict({"prompt": ["12+3=", "4+40=", "7+7="], "answer": ["15", "44", "14"]})
    recorder = SimpleNamespace(train_seconds=0.0, completions_total=0, tokens_total=0.0, paused_seconds=0.0)
    return Evaluator(tmp_path, prompts=prompts, tokenizer=tokenizer,
                     reward_funcs=[lambda completions, **kw: [float(len(c)) for c in completions]], reward_weights=[1.0],
                     settings=EvaluationSpec(temperature=temperature, samples_per_prompt=samples, max_completion_length=6),
                     unit="completions", total=0.0, recorder=recorder)


def _attach(ev, generation):
    # The trainer attributes the evaluator reads (GRPOTrainer's own names); vLLM cannot be built here.
    ev.attach(SimpleNamespace(args=SimpleNamespace(use_vllm=True), vllm_generation=generation, _last_loaded_step=0))


def test_sleep_mode_wakes_syncs_generates_and_sleeps_in_trls_order(tmp_path, tokenizer, fake_vllm):
    calls: list = []
    ev = _evaluator(tmp_path, tokenizer)
    gen = _Generation(calls, tokenizer.eos_token_id, sleep_mode=True)
    _attach(ev, gen)
    state = SimpleNamespace(global_step=0, num_input_tokens_seen=0, is_world_process_zero=True)
    ev._evaluate(state)  # the step is unchanged (0), but the weights sleep: they must be re-pushed
    names = [c[0] if c[0] != "wake_up" else f"wake_up{c[1]}" for c in calls]
    assert names == ["sync_weights", "wake_up('weights',)", "wake_up('kv_cache',)", "generate", "sleep"]
    assert calls[-1] == ("sleep", 2) and gen._llm_weights_sleeping is True
    _, prompt_ids, params = calls[3]
    assert prompt_ids == [tokenizer(t, add_special_tokens=False)["input_ids"] for t in ["12+3=", "4+40=", "7+7="]]
    assert all(p["n"] == 2 and p["max_tokens"] == 6 for p in params)
    # a seed per held-out prompt from its index, 2 (= n) apart: no two prompts share a draw
    assert [p["seed"] for p in params] == [EVAL_SEED * 10**6 + 2 * i for i in range(3)]
    row = (tmp_path / "eval.jsonl").read_text().splitlines()
    assert len(row) == 1 and '"num_prompts": 3' in row[0]
    # a second point at the same step goes through the same order again (TRL left it asleep)
    calls.clear()
    ev._evaluate(state)
    assert [c[0] for c in calls] == ["sync_weights", "wake_up", "wake_up", "generate", "sleep"]


def test_without_sleep_mode_an_unchanged_step_only_generates(tmp_path, tokenizer, fake_vllm):
    calls: list = []
    ev = _evaluator(tmp_path, tokenizer)
    _attach(ev, _Generation(calls, tokenizer.eos_token_id, sleep_mode=False))
    ev._evaluate(SimpleNamespace(global_step=0, num_input_tokens_seen=0, is_world_process_zero=True))
    assert [c[0] for c in calls] == ["generate"]
    ev._evaluate(SimpleNamespace(global_step=3, num_input_tokens_seen=0, is_world_process_zero=True))
    assert [c[0] for c in calls] == ["generate", "sync_weights", "generate"]
    assert ev.trainer._last_loaded_step == 3


def test_completions_are_cut_after_the_end_token(tmp_path, tokenizer, fake_vllm):
    calls: list = []
    ev = _evaluator(tmp_path, tokenizer, samples=1)
    _attach(ev, _Generation(calls, tokenizer.eos_token_id, sleep_mode=False))
    indices, ids = ev._generate(SimpleNamespace(global_step=0), 0, 1)
    assert indices == [0, 1, 2] and ids == [[[5, 6, tokenizer.eos_token_id]]] * 3


def test_server_request_carries_the_evaluation_seed_and_token_ids(tmp_path, tokenizer):
    ev = _evaluator(tmp_path, tokenizer, samples=2)
    client = _Client()
    gen = SimpleNamespace(mode="server", vllm_client=client, enable_sleep_mode=False,
                          sync_weights=lambda: None)
    _attach(ev, gen)
    indices, ids = ev._generate(SimpleNamespace(global_step=0), 0, 1)
    assert indices == [0, 1, 2] and len(ids) == 3 and all(len(x) == 2 for x in ids)
    (request,) = client.requests
    assert request["generation_kwargs"] == {"seed": EVAL_SEED}
    assert request["prompts"][0] == tokenizer("12+3=", add_special_tokens=False)["input_ids"]
    assert request["n"] == 2 and request["temperature"] == 1.0 and request["max_tokens"] == 6
    # rank 1 of a server-mode trial asks for nothing: only rank 0 holds the client
    assert ev._generate(SimpleNamespace(global_step=0), 1, 2) == ([], [])


def test_server_completions_groups_n_per_prompt():
    client = _Client()
    out = server_completions(client, [[1], [2]], {"n": 3, "temperature": 0.5, "top_p": 1.0, "top_k": 0,
                                                  "max_tokens": 4, "seed": 7})
    assert len(out) == 2 and all(len(x) == 3 for x in out)
    assert client.requests[0]["generation_kwargs"] == {"seed": 7}


@pytest.mark.parametrize("n,parts", [(23, 2), (3, 4), (8, 8), (0, 2), (10, 3)])
def test_shards_cover_every_prompt_once(n, parts):
    seen = [i for p in range(parts) for i in shard(n, parts, p)]
    assert seen == list(range(n))


def test_trl_still_wakes_the_kv_cache_before_generate_and_sleeps_after():
    """Our order copies TRL's: if TRL's colocate generate changes it, this says so."""
    from trl.generation import vllm_generation

    src = inspect.getsource(vllm_generation.VLLMGeneration.generate)
    wake = src.index('self.llm.wake_up(tags=["kv_cache"])')
    gen = src.index("self.llm.generate(")
    sleep = src.index("self.llm.sleep(level=2)")
    assert wake < gen < sleep
    sync = inspect.getsource(vllm_generation.VLLMGeneration.sync_weights)
    assert 'self.llm.wake_up(tags=["weights"])' in sync
