"""vLLM's CPU build, made to keep a colocated engine's weights loadable, as its GPU build does.

TRL's colocate weight sync writes the trainer's updated weights into the engine's model with
`model.load_weights` after each optimizer step. On a GPU, a linear layer computes with its own
`layer.weight`, so the write is what the next generation uses. vLLM's CPU build (checked on 0.31,
vllm/model_executor/layers/utils.py `dispatch_cpu_unquantized_gemm`) instead hands each linear
layer's weight to a prepacked oneDNN (or AMX sgl-kernel) matmul after loading and replaces
`layer.weight` with an empty parameter: the sync then fails (`'Parameter' object has no attribute
'weight_loader'`), and even a sync that reached the parameter would not reach the packed copy the
engine computes with.

`keep_weights_loadable()` turns both packings off for this process before the engine is built, so
every linear layer falls back to `torch.nn.functional.linear` on its own weight: the sync is then
the same code path as on a GPU, at the cost of vLLM's faster CPU kernels (irrelevant to the tiny
models this path runs on). It does nothing without vLLM or on a GPU platform, and says so when the
vLLM it finds no longer has the switches it turns (an upgrade is then a known event).
"""

from __future__ import annotations

from typing import Callable


def keep_weights_loadable(log: Callable[[str], None] = print) -> bool:
    """Turn vLLM's CPU weight prepacking off in this process; True when it was on a CPU platform and done."""
    try:
        from vllm import _custom_ops as ops  # optional: vLLM (the gpu extra, or the vLLM tier's CPU build)
        from vllm.model_executor.layers import utils as layer_utils
        from vllm.platforms import current_platform
    except ImportError:
        return False
    if not current_platform.is_cpu():
        return False
    if not hasattr(ops, "_supports_onednn") or not hasattr(layer_utils, "check_cpu_sgl_kernel"):
        log("vLLM on CPU: this vLLM has no _custom_ops._supports_onednn or check_cpu_sgl_kernel to turn off; "
            "a colocated engine may not see the trainer's weight updates")
        return False
    ops._supports_onednn = False
    layer_utils.check_cpu_sgl_kernel = lambda n, k, dtype: False
    log("vLLM on CPU: weight prepacking off; each linear layer computes with its own weight, as on a GPU, "
        "so TRL's weight sync reaches the engine")
    return True
