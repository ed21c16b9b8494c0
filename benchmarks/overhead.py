"""Overhead bar: a trial through grpo-ablate vs the same GRPOTrainer run from a plain TRL script.

    python benchmarks/overhead.py                      # 3 interleaved pairs of 50-step runs
    python benchmarks/overhead.py --repeats 5 --steps 100

Both sides train the built-in task (cached warm-started tiny model, the trainer section of
studies/tiny-cpu.yaml, grpo_ablate/trainer/builtin/recipe.py) for the same steps and seed, each in a fresh
process, alternating which goes first. Measured: wall time of `trainer.train()` on each side
(grpo-ablate's worker records it as timings.train_seconds), so both include the same generation
and optimizer work; grpo-ablate adds its reward wrapper, the per-step metrics/groups writer and
the stop switch. Process start-up and model loading are the same on both sides and excluded.

The bar: median(grpo-ablate) / median(plain) <= 1.05. Exit status 1 when it is missed.
On a shared CPU, other jobs add +-15% noise to single runs (the pair ratios show it), so the
script also prints the ratio of the fastest runs (contention only ever adds time) and
`grpo_ablate_callback_share`: the share of training time spent inside grpo-ablate's own
callbacks, timed in the worker (timings.callback_seconds) - the overhead without the noise.
The plain side is the script a user would write by hand (see `plain_trl`); nothing of
grpo-ablate is used there except the cached model folder, the dataset and the task's reward.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def plain_trl(out: str, steps: int, seed: int, num_generations: int) -> None:
    """The hand-written TRL script: the same configuration, none of grpo-ablate's machinery."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablate.trainer.builtin.model import builtin_model_path
    from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
    from grpo_ablate.trainer.builtin.tasks import task_dataset, task_reward

    path = builtin_model_path("builtin:tiny", "addition")
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    torch.set_num_threads(1)  # the same thread setting grpo-ablate uses for the built-in model
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="plain-trl-"),
        **{**TINY_CPU_TRAINER, "num_generations": num_generations, "seed": seed},
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[task_reward("addition")],
        args=config,
        train_dataset=task_dataset("addition", 2000),
        processing_class=tokenizer,
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    Path(out).write_text(json.dumps({"train_seconds": seconds, "steps": trainer.state.global_step, "rewards": rewards}))


def run_plain(tmp: Path, steps: int, seed: int, g: int, index: int) -> dict:
    out = tmp / f"plain-{index}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, __file__, "--plain-out", str(out), "--steps", str(steps), "--seed", str(seed), "--num-generations", str(g)],
        check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return json.loads(out.read_text())


def run_grpo_ablate(tmp: Path, steps: int, seed: int, g: int, index: int) -> dict:
    from grpo_ablate.study.trial_spec import spec_from_sections
    from grpo_ablate.launch import run_trial
    from grpo_ablate.core.vocab import Outcome
    from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER

    spec = spec_from_sections(
        tmp / f"grpo-ablate-{index}",
        model={"name_or_path": "builtin:tiny"},
        data={"task": "addition", "num_prompts": 2000},
        trainer={**TINY_CPU_TRAINER, "num_generations": g, "seed": seed},
        budget={"max_steps": steps},
    )
    result = run_trial(spec)
    if result.outcome is not Outcome.COMPLETED:
        raise SystemExit(f"grpo-ablate trial {result.outcome.value}: {result.reason}\n{result.log_tail}")
    rows = [json.loads(line) for line in (spec.path / "metrics.jsonl").read_text().splitlines()]
    return {"train_seconds": result.timings["train_seconds"], "steps": result.metrics["steps"],
            "callback_seconds": result.timings.get("callback_seconds", 0.0),
            "rewards": [r["reward"] for r in rows if r.get("reward") is not None]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--bar", type=float, default=1.05)
    parser.add_argument("--plain-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_out:
        plain_trl(args.plain_out, args.steps, args.seed, args.num_generations)
        return 0

    from grpo_ablate.trainer.builtin.model import builtin_model_path  # build the warm start once, outside the timing

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    builtin_model_path("builtin:tiny", "addition", log=lambda m: print(m, file=sys.stderr))
    tmp = Path(tempfile.mkdtemp(prefix="grpo-ablate-overhead-"))
    plain, ours = [], []
    for i in range(args.repeats):
        order = [("plain", run_plain), ("grpo-ablate", run_grpo_ablate)]
        if i % 2:
            order.reverse()
        for name, fn in order:
            r = fn(tmp, args.steps, args.seed, args.num_generations, i)
            (plain if name == "plain" else ours).append(r)
            print(f"repeat {i + 1}: {name:12s} {r['train_seconds']:7.2f} s training, {r['steps']} steps, "
                  f"final reward {r['rewards'][-1]:.3f}", flush=True)
    same_curve = all(p["rewards"] == o["rewards"] for p, o in zip(plain, ours))
    ratio = statistics.median(o["train_seconds"] for o in ours) / statistics.median(p["train_seconds"] for p in plain)
    ratio_min = min(o["train_seconds"] for o in ours) / min(p["train_seconds"] for p in plain)
    own_share = statistics.median(o["callback_seconds"] / o["train_seconds"] for o in ours)
    pairs = [o["train_seconds"] / p["train_seconds"] for p, o in zip(plain, ours)]
    print(json.dumps({
        "steps": args.steps, "repeats": args.repeats, "num_generations": args.num_generations,
        "plain_median_s": round(statistics.median(p["train_seconds"] for p in plain), 3),
        "grpo_ablate_median_s": round(statistics.median(o["train_seconds"] for o in ours), 3),
        "ratio_of_medians": round(ratio, 4),
        "ratio_of_minimums": round(ratio_min, 4),
        "grpo_ablate_callback_share": round(own_share, 4),
        "pair_ratios": [round(x, 4) for x in pairs],
        "identical_reward_curves": same_curve,
        "bar": args.bar,
        "passed": ratio <= args.bar,
    }, indent=2))
    return 0 if ratio <= args.bar else 1


if __name__ == "__main__":
    raise SystemExit(main())
