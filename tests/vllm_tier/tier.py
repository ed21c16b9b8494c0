"""Plain helpers of the vLLM tier's tests (fixtures are in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["TIER_ENV", "jsonl"]

# vLLM's CPU engine reserves its KV cache up front (VLLM_CPU_KVCACHE_SPACE, GiB): 1 GiB is plenty for
# the tiny model and keeps two engines at once (the workers check) well inside 24 GiB. No GPU is used
# even where one exists: the tier is vLLM's CPU build.
TIER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "CUDA_VISIBLE_DEVICES": ""}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
