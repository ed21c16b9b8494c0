"""The GRPOConfig keyword arguments each trial would pass, computed by the trial's own code, without training.

    grpo-ablate plan STUDY --commands        # runs this in a child: the parent never imports torch

Reads a JSON list of {"spec": TrialSpec as a dict, "world_size": int, "gpu": bool} on stdin and
prints one JSON list of keyword-argument dicts. `gpu` says the trial machine has CUDA (the study
names GPUs), so the arguments are those of that machine, not of the laptop planning it.
"""

from __future__ import annotations

import json
import sys

from grpo_ablate.trainer import build
from grpo_ablate.trainer.spec import TrialSpec

__all__ = ["config_kwargs"]


def config_kwargs(spec: TrialSpec, world_size: int, gpu: bool) -> dict:
    """build.build_config_kwargs as the trial calls it, on a machine with (gpu) or without CUDA."""
    cuda = build._cuda
    build._cuda = lambda: gpu  # type: ignore[assignment]  # the trial machine's answer, not this one's
    try:
        weights = [float(r.get("weight", 1.0)) for r in spec.rewards]
        return build.build_config_kwargs(spec, world_size=world_size, reward_weights=weights)
    finally:
        build._cuda = cuda  # type: ignore[assignment]


def main() -> int:
    out = []
    for item in json.loads(sys.stdin.read()):
        spec = TrialSpec.from_json(json.dumps(item["spec"]))
        kwargs = config_kwargs(spec, int(item["world_size"]), bool(item["gpu"]))
        out.append({k: v for k, v in kwargs.items() if _plain(v)})
    print(json.dumps(out))
    return 0


def _plain(v: object) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True

if __name__ == "__main__":
    sys.exit(main())
