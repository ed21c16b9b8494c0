"""How much compute each search strategy needs to find the right arm, measured on a real grid.

    nice -n 19 python benchmarks/search_efficiency.py            # build the grid once (~30 min), then replay
    python benchmarks/search_efficiency.py --replays 50           # replays only, from the cached table (seconds)

Part 1 runs every (G, generation batch, temperature, seed) of the built-in task as a real
trial and caches the results under benchmarks/.cache/ (git-ignored) with the settings and
library versions; a cache whose settings differ is rebuilt. Part 2 replays each search
strategy against that table (benchmarks/search_replay.py). Compute is in units of the full
grid (every arm on every seed = 1.0; a pruned trial counts its share of the completions).
"to 5%": the median compute from which the recommended arm stays within 5 % of the true best
(the grid's best mean); "reached": the share of replays that got there; "right": the share whose
final answer is the true best or tied with it (paired t-test over the table's seeds, p >= 0.05).

Measured 2026-11-30 on a shared 2-core CPU: G {2,4,8,16} x batch {32,64} x T {0.7,1.0} x seeds
{0,1,2,3} = 64 real trials of 30 steps (32 completions per step), objective final_reward;
true best G=2, batch 64, T=0.7 (0.764); adaptive budget 32 trials (0.5 of the grid).

    strategy (30 replays)                    to 5%   reached  right  mean compute
    full grid                                0.547   1.00     1.00   1.000
    grid + racing (0.95, 2 seeds first)      0.547   1.00     1.00   0.903
    grid + racing (0.90, 2 seeds first)      0.547   1.00     1.00   0.823
    random                                   0.281   0.90     1.00   0.500
    tpe, label encoding (old)                0.359   0.83     1.00   0.500
    tpe, ordinal encoding                    0.438   0.73     1.00   0.500
    tpe ordinal + median pruner, steps       never   0.40     0.87   0.201
    tpe ordinal + median pruner, compute     never   0.40     0.90   0.257
    tpe ordinal + hyperband, compute         never   0.37     0.90   0.342

    100 replays: random 0.281 / 0.75 / 0.99; tpe label 0.375 / 0.74 / 0.94; tpe ordinal 0.391 / 0.76 / 0.98

Read: the seed-to-seed spread of this task is as large as most arm differences, so at 16 arms
random search is as good as TPE; the two encodings are within replay noise (ordinal is kept:
more right answers at 100 replays, and it is the one that scales to many batches). Pruning on
early reward loses the answer here (curves cross); by compute it is slightly better than by
steps. Racing saves 10-18 % of a full grid with the answer unchanged.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_ablate.contract.metrics import read_rows, summarize  # noqa: E402
from grpo_ablate.study.trial_spec import spec_from_sections  # noqa: E402
from grpo_ablate.study.search.encoding import LABEL, ORDINAL  # noqa: E402
from grpo_ablate.study.setup import library_versions  # noqa: E402
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER  # noqa: E402
from grpo_ablate.launch import run_trial  # noqa: E402
from grpo_ablate.core.vocab import Arm  # noqa: E402
from search_replay import Strategy, replay, summarise  # noqa: E402  (benchmarks/, beside this script)
from search_table import GridRow, GridTable, load_table, save_table  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache" / "search_grid.json"
CURVE_METRICS = ("final_reward", "reward_gain", "reward_per_hour")
CURVE_EVERY = 5  # steps between curve points


def grid_settings(args: argparse.Namespace) -> dict:
    return {"generations": args.generations, "temperatures": args.temperatures, "batches": args.batches,
            "seeds": args.seeds, "steps": args.steps, "trainer": TINY_CPU_TRAINER, "task": "addition",
            "model": "builtin:tiny"}


def run_grid(settings: dict, path: Path) -> GridTable:
    """Every cell as a real trial; the table is saved after each so an interrupted build resumes."""
    table = load_table(path) if path.exists() else GridTable([], settings, library_versions())
    same = {k: v for k, v in table.settings.items() if k != "seeds"} == {k: v for k, v in settings.items() if k != "seeds"}
    if not same:  # more seeds extend the table; any other change rebuilds it
        table = GridTable([], settings, library_versions())
    table.settings = settings
    done = {(r.arm, r.seed) for r in table.rows}
    root = Path(tempfile.mkdtemp(prefix="grpo-ablate-search-grid-"))
    cells = list(itertools.product(settings["seeds"], settings["generations"], settings["batches"], settings["temperatures"]))
    for i, (seed, g, b, t) in enumerate(cells):
        arm = Arm(g, b, float(t))
        if (arm, seed) in done:
            continue
        folder = root / f"{arm.key.replace('|', '_')}-s{seed}"
        trainer = {**settings["trainer"], "num_generations": g, "generation_batch_size": b, "temperature": t, "seed": seed}
        spec = spec_from_sections(folder, data={"task": settings["task"]}, trainer=trainer,
                                  budget={"max_steps": settings["steps"]})
        t0 = time.monotonic()
        result = run_trial(spec)
        rows = read_rows(folder / "metrics.jsonl") if (folder / "metrics.jsonl").exists() else []
        curve = []
        for k in range(CURVE_EVERY, len(rows) + 1, CURVE_EVERY):
            part = summarize(rows[:k])
            curve.append((int(part["completions"]), {m: part.get(m) for m in CURVE_METRICS}))
        metrics = {k: v for k, v in (result.metrics or {}).items() if isinstance(v, (int, float)) or v is None}
        metrics["outcome"] = result.outcome.value  # type: ignore[assignment]
        table.rows.append(GridRow(arm, seed, metrics, curve))
        save_table(table, path)
        print(f"[{i + 1}/{len(cells)}] {arm.key} seed {seed}: {result.outcome.value} "
              f"final_reward={metrics.get('final_reward')} ({time.monotonic() - t0:.0f} s)", flush=True)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--grid-only", action="store_true")
    parser.add_argument("--replays", type=int, default=30)
    parser.add_argument("--objective", default="final_reward")
    parser.add_argument("--within", type=float, default=0.05, help="how close to the true best counts as found")
    parser.add_argument("--trials", type=int, default=None, help="adaptive budget (default: 2 x the arms)")
    parser.add_argument("--only", nargs="*", help="strategies whose name contains one of these")
    parser.add_argument("--gp", action="store_true", help="also replay the GP sampler (slow: minutes per strategy)")
    parser.add_argument("--replay-only", action="store_true", help="use the cached table as it is")
    args = parser.parse_args()
    table = load_table(args.cache) if args.replay_only else run_grid(grid_settings(args), args.cache)
    if args.grid_only:
        return 0
    return report(table.complete(), args)


STRATEGIES = [
    Strategy("full grid", kind="grid"),
    Strategy("grid + racing (0.95, 2 seeds first)", kind="racing"),
    Strategy("grid + racing (0.90, 2 seeds first)", kind="racing", confidence=0.90),
    Strategy("random", sampler="random", encoding=LABEL),
    Strategy("tpe, label encoding (old)", sampler="tpe", encoding=LABEL),
    Strategy("tpe, ordinal encoding", sampler="tpe", encoding=ORDINAL),
    Strategy("gp, label encoding", sampler="gp", encoding=LABEL),
    Strategy("gp, ordinal encoding", sampler="gp", encoding=ORDINAL),
    Strategy("tpe ordinal + median pruner, steps", sampler="tpe", pruner="median", fidelity="steps"),
    Strategy("tpe ordinal + median pruner, compute", sampler="tpe", pruner="median"),
    Strategy("tpe ordinal + hyperband, compute", sampler="tpe", pruner="hyperband"),
]


def report(table: GridTable, args: argparse.Namespace) -> int:
    """Replay every strategy; print one line each and save the numbers next to the table."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("optuna").setLevel(logging.ERROR)
    maximize = True
    means = table.arm_means(args.objective)
    best = max(sorted(means), key=lambda a: means[a])
    n_trials = args.trials or 2 * len(table.arms)
    print(f"grid: {len(table.arms)} arms x {len(table.seeds)} seeds = {len(table.rows)} trials; objective "
          f"{args.objective} (maximize); true best {best.key} = {means[best]:.4f}; adaptive budget {n_trials} trials; "
          f"{args.replays} replays each")
    print(f"{'strategy':42} {'median compute to 5%':>21} {'reached':>8} {'right answer':>13} {'mean compute':>13} {'s':>5}")
    out = []
    for st in STRATEGIES:
        if args.only and not any(o in st.name for o in args.only):
            continue
        if st.sampler == "gp" and not args.gp:
            continue
        st = dataclasses.replace(st, n_trials=n_trials)
        t0 = time.monotonic()
        traces = [replay(table, st, seed, args.objective, maximize) for seed in range(args.replays)]
        s = summarise(table, st.name, traces, args.objective, maximize, args.within)
        out.append(s.as_dict())
        med = "never" if s.median_compute_to_5pct is None else f"{s.median_compute_to_5pct:.3f}"
        print(f"{st.name:42} {med:>21} {s.reached_5pct:8.2f} {s.right_answer:13.2f} {s.mean_compute:13.3f} "
              f"{time.monotonic() - t0:5.0f}", flush=True)
    (args.cache.parent / "search_results.json").write_text(json.dumps(
        {"objective": args.objective, "replays": args.replays, "n_trials": n_trials, "best": best.key,
         "settings": table.settings, "versions": table.versions, "results": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
