"""The built-in model is whole when a rank other than 0 of a distributed trial builds it.

transformers (5.x) writes a model's config and weights only from global rank 0 once
torch.distributed is initialised; the cache used to rename a folder holding only the tokenizer
into place when rank 1 took the build lock first (CI, the DeepSpeed tier). Two real gloo ranks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

RANK = r"""
import os, sys, torch.distributed as dist
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
if dist.get_rank() == 1:
    from grpo_ablate.trainer.builtin.model import builtin_model_path
    print("PATH", builtin_model_path("builtin:tiny-untrained", None), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank_one_builds_a_whole_model(tmp_path: Path) -> None:
    env = {**os.environ, "GRPO_ABLATE_CACHE": str(tmp_path), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2"}
    procs = [subprocess.Popen([sys.executable, "-c", RANK], env={**env, "RANK": str(r)}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in (0, 1)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[1][-2000:]
    path = Path(next(line for line in outs[1].splitlines() if line.startswith("PATH ")).split(" ", 1)[1])
    assert (path / "config.json").exists() and list(path.glob("*.safetensors")), sorted(os.listdir(path))
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_a_torn_folder_from_an_older_build_is_replaced(tmp_path: Path, monkeypatch) -> None:
    """A folder holding only a tokenizer (what the old code left behind) is rebuilt, not trusted or tripped on."""
    from grpo_ablate.trainer.builtin import model

    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path))
    label, settings, _ = model._settings("builtin:tiny-untrained", None)
    torn = tmp_path / "models" / f"{label}-{model._cache_key(settings)}"
    torn.mkdir(parents=True)
    (torn / "tokenizer.json").write_text("{}")
    path = model.builtin_model_path("builtin:tiny-untrained", None, log=lambda _: None)
    assert path == torn and (path / "config.json").exists() and list(path.glob("*.safetensors"))
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]
