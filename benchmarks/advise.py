"""Validate `grpo-ablate advise`: predicted zero-spread share against what real trials measure.

    nice -n 10 python benchmarks/advise.py                 # both built-in tasks, G = 2, 4, 8, 16, T = 0.7 and 1.0
    nice -n 10 python benchmarks/advise.py --tasks addition_mixed --steps 4 --k 16 --prompts 128

Per task: advise samples K completions for N training prompts of the warm-started tiny model
(no training) and predicts E[p^G + (1-p)^G] under the fitted Beta; then one short real trial
per (G, T) measures TRL's frac_reward_zero_std over its first `--steps` steps (zero-spread
groups / groups; each group is a fresh prompt, so a binomial proportion).

The bar, fixed before the run: every prediction inside its measured interval, the intervals
being simultaneous at 95% over all the points of the run (Wilson's interval from scipy at
1 - 0.05/m each, Bonferroni over the m points). Per-point 95% intervals are printed too, but are
not the bar: with 16 points a perfect predictor lands inside all 16 only 0.95^16 = 44% of the
time. On the mixed task the prediction must also be closer to the measurements than the
single-mean-p curve p^G + (1-p)^G (the report's curve) in total, by 30% or more.
Also printed: the seconds advise took against one trial's. Exit status 1 when the bar is missed.
"""

from __future__ import annotations

import dataclasses
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ablate.config import load_study  # noqa: E402
from grpo_ablate.preflight.advise import run_advise  # noqa: E402
from grpo_ablate.study.trial_spec import build_spec  # noqa: E402
from grpo_ablate.launch import run_trial  # noqa: E402
from grpo_ablate.core.vocab import METRICS_FILE, Arm, Cell, Outcome  # noqa: E402

GENS = (2, 4, 8, 16)
TEMPS = (0.7, 1.0)


def wilson(zero: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's interval for a binomial proportion (scipy's)."""
    from scipy.stats import binomtest

    if n <= 0:
        return 0.0, 1.0
    ci = binomtest(zero, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def study_yaml(folder: Path, task: str, batch: int) -> Path:
    path = folder / f"{task}.yaml"
    path.write_text(f"""
study: {{name: advise-bench-{task}, output_dir: {folder / task}, sampler: grid, trial_timeout: 900}}
model: {{name_or_path: "builtin:tiny"}}
data: {{task: {task}, num_prompts: 2000}}
trainer: {{per_device_train_batch_size: {batch}, max_completion_length: 6, beta: 0.0, learning_rate: 1.0e-6}}
hardware: {{command: python}}
search: {{num_generations: {list(GENS)}, temperature: {list(TEMPS)}}}
budget: {{max_steps: 50}}
""")
    return path


def measure(study, g: int, t: float, steps: int, folder: Path, *, seed: int, points: int) -> dict:
    """One short real trial; pooled zero-spread groups over its first `steps` steps."""
    batch = study.trainer["per_device_train_batch_size"]
    spec = build_spec(study, Cell(Arm(g, batch, t), seed, "benchmark"), folder)
    spec.budget = dataclasses.replace(spec.budget, max_steps=steps)
    started = time.perf_counter()
    result = run_trial(spec)
    wall = time.perf_counter() - started
    rows = [json.loads(x) for x in (folder / METRICS_FILE).read_text().splitlines() if x.strip()]
    groups_per_step = batch // g
    zero = total = 0
    for r in rows:
        if r.get("frac_reward_zero_std") is not None:
            zero += round(float(r["frac_reward_zero_std"]) * groups_per_step)
            total += groups_per_step
    lo, hi = wilson(zero, total, 1 - 0.05 / points)
    lo95, hi95 = wilson(zero, total)
    return {"ok": result.outcome is Outcome.COMPLETED, "measured": zero / total if total else None, "lo": lo, "hi": hi,
            "lo95": lo95, "hi95": hi95,
            "groups": int(total), "wall_s": wall, "train_s": (result.timings or {}).get("train_seconds")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["addition", "addition_mixed"])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64, help="completions per step (per_device_train_batch_size)")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1, help="advise's prompt draw and the trials' seed")
    args = parser.parse_args()
    ok = True
    points = len(args.tasks) * len(GENS) * len(TEMPS)
    per_point_inside = 0
    with tempfile.TemporaryDirectory(prefix="advise-bench-") as tmp:
        for task in args.tasks:
            study = load_study(study_yaml(Path(tmp), task, args.batch))
            advice = run_advise(study, k=args.k, num_prompts=args.prompts, seed=args.seed, temperatures=list(TEMPS))
            pred = {(p.num_generations, p.temperature): p for p in advice.predictions}
            print(f"\n== {task}: advise {advice.num_prompts} prompts x K={advice.k} in {advice.seconds:.1f} s; "
                  f"fits {advice.fits}")
            print(f"{'G':>3} {'T':>4} {'predicted':>9} {'mean-p':>7} {'measured':>8} {'simultaneous 95%':>16} "
                  f"{'per-point 95%':>14} {'groups':>6} {'inside':>6}")
            err_pred = err_mean = 0.0
            walls, trains = [], []
            for t in TEMPS:
                for g in GENS:
                    m = measure(study, g, t, args.steps, Path(tmp) / task / "trials" / f"G{g}-T{t}", seed=args.seed,
                                points=points)
                    p = pred[(g, t)]
                    walls.append(m["wall_s"])
                    trains.append(m["train_s"])
                    inside = m["measured"] is not None and m["lo"] <= p.zero_spread <= m["hi"]
                    ok &= bool(m["ok"] and inside)
                    per_point_inside += bool(m["measured"] is not None and m["lo95"] <= p.zero_spread <= m["hi95"])
                    if m["measured"] is not None:
                        err_pred += abs(p.zero_spread - m["measured"])
                        err_mean += abs((p.mean_p_zero_spread or 0.0) - m["measured"])
                    measured = "-" if m["measured"] is None else f"{m['measured']:.3f}"
                    print(f"{g:>3} {t:>4} {p.zero_spread:>9.3f} {p.mean_p_zero_spread or 0:>7.3f} {measured:>8} "
                          f"    [{m['lo']:.2f}, {m['hi']:.2f}]   [{m['lo95']:.2f}, {m['hi95']:.2f}] {m['groups']:>6} "
                          f"{'yes' if inside else 'NO':>6}", flush=True)
            closer = err_pred < err_mean
            if task == "addition_mixed":
                ok &= err_pred < 0.7 * err_mean
            one_trial = sorted(walls)[len(walls) // 2]
            train = sorted(t for t in trains if t)
            per_step = train[len(train) // 2] / args.steps if train else one_trial / args.steps
            steps_full = study.budget.max_steps or 50
            print(f"total |predicted - measured| {err_pred:.3f} vs mean-p curve {err_mean:.3f} "
                  f"({'advise closer' if closer else 'mean-p closer'})")
            print(f"time: advise {advice.seconds:.1f} s; one {args.steps}-step trial {one_trial:.1f} s (median wall, "
                  f"start-up included); one {steps_full}-step trial of this study ~{one_trial + per_step * (steps_full - args.steps):.0f} s")
    print(f"\ninside the per-point 95% intervals: {per_point_inside} of {points} (not the bar; see the docstring)")
    print("PASS" if ok else "\nFAIL: a prediction fell outside its measured interval, or advise was not clearly closer")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
