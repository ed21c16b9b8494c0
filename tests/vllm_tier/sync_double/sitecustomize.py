"""A test double for TRL's server-mode weight sync, loaded into a trial process by the vLLM tier.

TRL sends the trainer's weights to a `trl vllm-serve` server over vLLM's NCCL weight-transfer engine,
which needs CUDA: on a CPU, VLLMClient.init_communicator raises NotImplementedError. The server test
(tests/vllm_tier/test_vllm_server_mode.py) puts this folder on the trial's PYTHONPATH and names a
record file in GRPO_TEST_WEIGHT_RECORD; Python then imports this module at start-up and, once TRL's
client module is imported, replaces two of its methods in that process only:

- init_communicator still asks the real server for its info (real HTTP: the server must have been
  started with a weight-transfer engine) and records it, but opens no NCCL group;
- update_named_params records what it would have broadcast, one JSON line per sync: each tensor's
  name, dtype, shape and a SHA-256 of its bytes, checked against the metadata TRL announced.

Everything else (generate, reset_prefix_cache, the server itself) stays real. The transfer itself
is not exercised here: it is covered only on a GPU.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import sys

_TARGET = "trl.generation.vllm_client"
_RECORD = os.environ.get("GRPO_TEST_WEIGHT_RECORD")


def _write(entry: dict) -> None:
    with open(_RECORD, "a", encoding="utf-8") as handle:  # type: ignore[arg-type]
        handle.write(json.dumps(entry) + "\n")


def _patch(module) -> None:
    client = module.VLLMClient

    def init_communicator(self, device=0):
        info = self.get_server_info()  # real: the server's own account of its weight-transfer engine
        if info.get("weight_transfer_config") is None:
            raise RuntimeError("the vLLM server has no weight-transfer engine")
        self.communicator = None
        _write({"event": "init", "device": str(device), "weight_transfer_config": info["weight_transfer_config"],
                "server_world_size": self.get_world_size()})

    def update_named_params(self, metadata, named_params):
        import torch

        sent = {}
        announced = {name: (dtype, list(shape)) for name, dtype, shape in metadata}
        for name, tensor in named_params:
            data = tensor.detach().to("cpu").contiguous()
            dtype = str(data.dtype).removeprefix("torch.")
            if announced.get(name) != (dtype, list(data.shape)):
                raise AssertionError(f"{name}: sent {dtype} {list(data.shape)}, announced {announced.get(name)}")
            raw = data.view(-1).view(torch.uint8).numpy().tobytes()  # the tensor's bytes, whatever its dtype
            sent[name] = {"dtype": dtype, "shape": list(data.shape), "sha256": hashlib.sha256(raw).hexdigest()}
        if set(sent) != set(announced):
            raise AssertionError(f"announced but not sent: {sorted(set(announced) - set(sent))}")
        _write({"event": "sync", "params": sent})

    client.init_communicator = init_communicator
    client.update_named_params = update_named_params


class _After(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _After(spec.loader)
        return spec


if _RECORD:
    sys.meta_path.insert(0, _Finder())
