"""The vLLM/DeepSpeed tier (`make test-vllm`): every test here is marked `vllm` and `slow`.

It runs in its own virtualenv (.venv-vllm: vLLM's CPU build under a `vllm` stand-in, DeepSpeed,
transformers <5.18 as vLLM pins it), on the CPU. `make test` deselects the marker. Where vLLM or
DeepSpeed is missing a test skips, except under CI (CI=true), where it fails (helpers.unavailable).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from helpers import unavailable
from tier import TIER_ENV

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.vllm)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _tier_environment(monkeypatch):
    for key, value in TIER_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="session")
def needs_vllm():
    """vLLM's CPU build, as `make test-vllm` installs it."""
    if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("trl") is None:
        unavailable("vLLM is not installed here: `make test-vllm` runs this tier in .venv-vllm")


@pytest.fixture(scope="session")
def needs_deepspeed():
    if importlib.util.find_spec("deepspeed") is None:
        unavailable("DeepSpeed is not installed here: `make test-vllm` runs this tier in .venv-vllm")


@pytest.fixture(scope="session")
def tiny_vllm_model():
    """The folder of builtin:tiny-vllm warm-started on `addition` (built once, cached)."""
    from grpo_ablate.trainer.builtin.model import builtin_model_path

    return builtin_model_path("builtin:tiny-vllm", "addition")

