"""Parallel workers on one machine: wall time with 1 vs 2 workers, and the orchestrator's memory.

    python benchmarks/workers.py [--trials 6] [--steps 12] [--long-trials 16]

Runs the same planned study (equal trials: the tiny-cpu ablation, a fixed step budget) twice,
side by side in this one invocation: once with `--workers 1`, once with `--workers 2`, each
into its own fresh folder, and prints the ratio of wall times. Then runs a longer study of many
short trials and prints the orchestrating process's resident memory as each trial ended (the
`orchestrator_rss_mb` user attribute): it should stay flat, since the orchestrator never imports
torch or TRL and each trial lives in its own process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_study(out: Path, name: str, workers: int, trials: int, steps: int) -> float:
    seeds = list(range(max(1, trials // 3)))
    args = [sys.executable, "-m", "grpo_ablate", "run", str(ROOT / "studies/tiny-cpu.yaml"), "--no-report",
            "--set", f"study.name={name}", "--set", f"study.output_dir={out / name}",
            "--set", f"budget.max_steps={steps}", "--set", f"study.seeds={seeds}", "--workers", str(workers)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    res = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"study {name} failed:\n{res.stdout}\n{res.stderr}")
    return wall


def rss_series(out: Path, name: str) -> list[float]:
    import optuna

    from grpo_ablate.records import trial_record as record
    from grpo_ablate.storage.store import open_storage

    st = optuna.load_study(study_name=name, storage=open_storage(str(out / name / "study.journal")))
    trials = sorted(st.get_trials(deepcopy=False), key=lambda t: t.datetime_complete or t.datetime_start)
    return [rss for t in trials if (rss := record.orchestrator_rss_mb(t)) is not None]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=6, help="trials per study (a multiple of 3: G in {2,4,8} x seeds)")
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps per trial")
    ap.add_argument("--long-trials", type=int, default=15, help="trials of the memory-flatness study")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="grpo-bench-") as tmp:
        out = Path(tmp)
        # warm the cached tiny model once so neither side pays for building it
        run_study(out, "warm", 1, 3, 1)
        one = run_study(out, "w1", 1, args.trials, args.steps)
        two = run_study(out, "w2", 2, args.trials, args.steps)
        print(f"{args.trials} trials x {args.steps} steps: 1 worker {one:.1f} s, 2 workers {two:.1f} s, "
              f"ratio 2w/1w = {two / one:.2f} (speed-up {one / two:.2f}x) on {os.cpu_count()} cores")
        run_study(out, "mem", 2, args.long_trials, 2)
        rss = rss_series(out, "mem")
        if rss:
            print(f"orchestrator RSS over {len(rss)} trials (MB): first {rss[0]:.0f}, max {max(rss):.0f}, "
                  f"last {rss[-1]:.0f}; growth first->last {rss[-1] - rss[0]:+.1f} MB")
            print("series:", " ".join(f"{x:.0f}" for x in rss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
