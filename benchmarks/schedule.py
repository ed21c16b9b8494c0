"""Does a G schedule beat a fixed G at equal budget? G=2, G=8, 2→8 by progress and by signal, over seeds.

    nice -n 10 python benchmarks/schedule.py                       # 4 arms x 5 seeds, 40 steps each (~10 min on 2 cores)
    python benchmarks/schedule.py --seeds 0 1 2 --steps 30 --arms 2 8 "2->8@50%"

Every trial is a real run of the built-in task (run_trial -> worker process) on the trainer
section of studies/tiny-cpu.yaml, with the same budget of completions for every arm
(budget.completions = steps x 32): the schedule keeps the generation batch, so every arm
generates and trains on the same completions, and only how they are grouped differs.
Prints each trial's final training reward (mean of the last 10% of steps) and G switch step,
then the verdict: each arm against G=8 (TRL's default), paired by seed (the seed fixes the
initial data order and sampling), with the mean paired difference, its 95% t interval and
scipy's paired t-test. Held-out evaluation is not in this tree yet; when it is, its
eval_final_reward is compared the same way (the column is read when the trial has it).

Measured on a shared 2-core CPU, 2026-11-30, seeds 0-3, 40 steps = 1280 completions per trial
(`nice -n 10 python benchmarks/schedule.py --seeds 0 1 2 3 --steps 40`), final training reward:

    arm                 mean    vs G=8, paired (95% t interval)   p
    G=2                 0.779   +0.023 [-0.071, +0.118]           0.49
    G=8                 0.756
    2→8@50%             0.768   +0.012 [-0.069, +0.092]           0.67   (switch at step 21)
    2→8@zero_std<0.6    0.719   -0.037 [-0.126, +0.052]           0.28   (switch at steps 9-16)

Verdict: at this budget no arm is distinguishable from G=8; every interval spans zero and is
~0.18 wide, so an effect below ~0.1 reward would need more seeds or a longer run to show.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_ablate.study.trial_spec import spec_from_sections  # noqa: E402
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER  # noqa: E402
from grpo_ablate.launch import run_trial  # noqa: E402
from grpo_ablate.config.hardware import read_generations  # noqa: E402  (the loader's reader of G's text)
from grpo_ablate.core.vocab import EVENTS_FILE  # noqa: E402

DEFAULT_ARMS = ["2", "8", "2->8@50%", "2->8@zero_std<0.6"]
REFERENCE = "8"


def paired(a: list[float], b: list[float]) -> str:
    """b - a paired by seed: mean, 95% t interval, paired t-test p."""
    from scipy import stats

    d = [y - x for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    if n < 2:
        return f"{mean:+.3f} (one seed: no interval)"
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    p = stats.ttest_rel(b, a).pvalue if sd > 0 else float("nan")
    return f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}], paired t-test p={p:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description="G schedules vs fixed G at an equal completion budget")
    parser.add_argument("--arms", nargs="+", default=DEFAULT_ARMS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", default=None, help="folder for the trial folders (default: a temp dir)")
    args = parser.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="grpo-ablate-schedule-"))
    per_step = TINY_CPU_TRAINER["per_device_train_batch_size"]
    budget = {"completions": args.steps * per_step}
    print(f"budget: {budget['completions']} completions per trial ({args.steps} steps x {per_step}); trials in {root}")
    results: dict[str, dict[str, dict[int, float]]] = {}
    print(f"{'arm':>22} {'seed':>4} {'final':>6} {'held-out':>8} {'switch step':>11} {'completions':>11}")
    gens, unreadable = read_generations([*args.arms, REFERENCE])
    if unreadable:
        parser.error("; ".join(f"{r.num_generations}: {r.reason}" for r in unreadable))
    *arms, reference = gens
    for seed in args.seeds:
        for g in arms:
            label = str(g)
            folder = root / f"G{getattr(g, 'slug', g)}-s{seed}"
            spec = spec_from_sections(folder, data={"task": "addition"},
                                      trainer={**TINY_CPU_TRAINER, "num_generations": g, "seed": seed}, budget=budget)
            result = run_trial(spec)
            if result.outcome.value != "completed":
                print(f"{label:>22} {seed:>4} {result.outcome.value}: {result.reason}")
                continue
            m = result.metrics
            events = folder / EVENTS_FILE
            switch = [json.loads(x)["step"] for x in events.read_text().splitlines()][1:] if events.exists() else []
            rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
            made = sum(r.get("completions") or 0 for r in rows)
            for key in ("final_reward", "eval_final_reward"):
                if m.get(key) is not None:
                    results.setdefault(key, {}).setdefault(label, {})[seed] = float(m[key])
            held = m.get("eval_final_reward")
            print(f"{label:>22} {seed:>4} {m['final_reward']:>6.3f} {'-' if held is None else f'{held:.3f}':>8} "
                  f"{','.join(map(str, switch)) or '-':>11} {made:>11}", flush=True)
    ref = str(reference)
    for key, by_arm in results.items():
        print(f"\nVerdict on {key} (arm - G={ref}, paired by seed):")
        for label, values in by_arm.items():
            mean = sum(values.values()) / len(values)
            if label == ref or ref not in by_arm:
                print(f"  {label:>22}: mean {mean:.3f} over {len(values)} seeds")
                continue
            seeds = sorted(set(values) & set(by_arm[ref]))
            a = [by_arm[ref][s] for s in seeds]
            b = [values[s] for s in seeds]
            print(f"  {label:>22}: mean {mean:.3f}; difference {paired(a, b)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
