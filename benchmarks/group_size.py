"""What num_generations does on the built-in task: one 50-step trial per (temperature, G).

    python benchmarks/group_size.py                    # G 2,4,8,16 x temperature 0.7,1.0, seed 0 (~2 min)
    python benchmarks/group_size.py --seeds 0 1 --steps 80

Every trial is a real run through the trainer core (run_trial -> worker process) with the
recommended CPU settings of grpo_ablate/trainer/tasks.py: 64 completions per step, so G=2 sees
32 prompts per step and G=16 sees 4. Prints, per trial: the smoothed start and final reward,
the share of zero-spread groups, stability_variance, the first step at which the 5-step
trailing mean reward reaches 0.6, and the training seconds. The table in tasks.py came from it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_ablate.metrics import read_rows  # noqa: E402
from grpo_ablate.run_one import spec_from_sections  # noqa: E402
from grpo_ablate.trainer.launch import run_trial  # noqa: E402
from grpo_ablate.trainer.tasks import TINY_CPU_TRAINER  # noqa: E402


def steps_to(rewards: list[float], level: float, window: int = 5) -> int | None:
    for i in range(len(rewards)):
        recent = rewards[max(0, i - window + 1) : i + 1]
        if sum(recent) / len(recent) >= level:
            return i + 1
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description="num_generations x temperature on the built-in task")
    parser.add_argument("--generations", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out", default=None, help="folder for the trial folders (default: a temp dir)")
    args = parser.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="grpo-ablate-groups-"))
    print(f"{'temp':>5} {'G':>3} {'seed':>4} {'start':>6} {'final':>6} {'zero-spread':>11} {'stability':>10} {'to 0.6':>6} {'train s':>7}")
    for temperature in args.temperatures:
        for g in args.generations:
            for seed in args.seeds:
                folder = root / f"T{temperature}-G{g}-s{seed}"
                spec = spec_from_sections(folder, data={"task": "addition"},
                                          trainer={**TINY_CPU_TRAINER, "num_generations": g, "temperature": temperature, "seed": seed},
                                          budget={"max_steps": args.steps})
                result = run_trial(spec)
                m = result.metrics
                if result.outcome.value != "completed":
                    print(f"{temperature:5g} {g:3d} {seed:4d} {result.outcome.value}: {result.reason}")
                    continue
                rewards = [r["reward"] for r in read_rows(folder / "metrics.jsonl") if r.get("reward") is not None]
                print(f"{temperature:5g} {g:3d} {seed:4d} {m['start_reward']:6.2f} {m['final_reward']:6.2f} "
                      f"{m['mean_frac_reward_zero_std']:11.2f} {m['stability_variance']:10.4f} "
                      f"{str(steps_to(rewards, 0.6)):>6} {m['train_seconds']:7.1f}", flush=True)
    print(f"trial folders: {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
