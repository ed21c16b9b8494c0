"""Two CPU trainings at once on one host: every core each, or the cores split between them.

    python benchmarks/cpu_threads.py                  # 40 warm-start steps of the built-in model, 2 rounds
    python benchmarks/cpu_threads.py --steps 80 --rounds 3

Why it exists: `make test` runs two pytest workers, and before each worker held a CPU slot for
the other (tests/conftest.py), each worker's trials were given every core, so two trials at once
ran cores x 2 OpenMP threads. This measures what that costs, with the work the built-in model's
warm start does (trainer/builtin/model.py `_warm_start`, fewer steps): two child processes side
by side, once with `cores` threads each and once with `cores / 2`, alternating so that drift in
the machine's load falls on both. Each child prints its seconds and final loss; the loss must be
the same in every run of one thread count (a check that both did the same work). Prints a line
per run and the ratio of the mean wall seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import dataclasses, json, sys, time
import torch
torch.set_num_threads(int(sys.argv[1]))
from grpo_ablate.trainer.builtin import model as m
from grpo_ablate.trainer.builtin.tasks import get_task
from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer
task = get_task("addition")
task = dataclasses.replace(task, warm_start=dataclasses.replace(task.warm_start, steps=int(sys.argv[2])))
_, settings, _ = m._settings("builtin:tiny", "addition")
shape = m.TinyModelSettings(**settings["model"])
tokenizer = build_tokenizer(shape.max_position_embeddings, "")
model = m.build_tiny_model(tokenizer, shape)
started = time.perf_counter()
info = m._warm_start(model, tokenizer, task)
print(json.dumps({"seconds": time.perf_counter() - started, "loss": info["final_loss"]}))
"""


def side_by_side(threads: int, steps: int) -> tuple[float, list[dict[str, float]]]:
    """Two children at once; (wall seconds of the pair, each child's report)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": ""}
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(threads), str(steps)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - started
    if any(p.returncode for p in procs):
        raise SystemExit(f"a child failed: {[p.returncode for p in procs]}")
    return wall, [json.loads(out.strip().splitlines()[-1]) for out in outs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    counts = {"every core each": cores, "cores split": max(1, cores // 2)}
    walls: dict[str, list[float]] = {name: [] for name in counts}
    losses: dict[str, set[float]] = {name: set() for name in counts}
    for round_ in range(args.rounds):
        for name, threads in counts.items():
            wall, reports = side_by_side(threads, args.steps)
            walls[name].append(wall)
            losses[name].update(r["loss"] for r in reports)
            print(f"round {round_ + 1} {name} ({threads} thread(s) x 2 processes): {wall:.1f} s wall, children "
                  + ", ".join(f"{r['seconds']:.1f} s" for r in reports), flush=True)
    same = all(len(v) == 1 for v in losses.values())
    means = {name: statistics.mean(v) for name, v in walls.items()}
    print(f"mean wall: every core each {means['every core each']:.1f} s, cores split {means['cores split']:.1f} s: "
          f"{means['every core each'] / means['cores split']:.2f}x; same loss within each thread count: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
