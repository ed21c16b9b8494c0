"""A warm session against a process per trial, side by side on the demo's trials: time and rewards.

    nice -n 10 python benchmarks/warm_session.py                 # the first 4 trials of studies/tiny-cpu.yaml
    python benchmarks/warm_session.py --trials 6 --max-steps 20 --out /tmp/warm-bench

Each of the study's first N planned cells runs twice through the real launchers: once in a
process of its own (ProcessLauncher, as every trial ran before) and once in one warm session
(WarmSession) that all N share. The two runs of a cell alternate, so drift in the machine's
load falls on both. Every trial gets the environment a study worker gives a CPU trial
(CUDA_VISIBLE_DEVICES="" and a CPU share of --threads threads). Prints per cell the wall
seconds of each and whether the reward columns of metrics.jsonl (every key naming a reward:
reward, reward_std, rewards/<func>/mean, ...) are bit-identical step by step, and so the
held-out evaluation rows of eval.jsonl (all but their timings); then the totals, their ratio,
and one verdict line. Exit status 0 when every cell is identical, 1 otherwise.
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
from grpo_ablate.plan.cells import study_plan  # noqa: E402
from grpo_ablate.study.trial_spec import build_spec  # noqa: E402
from grpo_ablate.launch import Launcher, ProcessLauncher, WarmSession  # noqa: E402
from grpo_ablate.contract.spec import TrialSpec  # noqa: E402
from grpo_ablate.core.vocab import EVAL_FILE, METRICS_FILE, Outcome  # noqa: E402


def reward_columns(trial_dir: Path) -> list[dict[str, object]]:
    """Per logged step, the step and every column whose name mentions a reward, as written."""
    rows = []
    for line in (trial_dir / METRICS_FILE).read_text().splitlines():
        row = json.loads(line)
        rows.append({k: v for k, v in row.items() if k == "step" or "reward" in k})
    return rows


def eval_rows(trial_dir: Path) -> list[dict[str, object]]:
    """The held-out evaluation rows without their timings ([] when the study evaluates nothing)."""
    path = trial_dir / EVAL_FILE
    if not path.exists():
        return []
    return [{k: v for k, v in json.loads(line).items() if "seconds" not in k} for line in path.read_text().splitlines()]


def first_difference(a: list[dict[str, object]], b: list[dict[str, object]]) -> str | None:
    if len(a) != len(b):
        return f"{len(a)} logged steps against {len(b)}"
    for x, y in zip(a, b):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return f"step {x.get('step')}: {', '.join(f'{k} {x.get(k)!r} vs {y.get(k)!r}' for k in keys[:3])}"
    return None


def cell_difference(a: Path, b: Path) -> str | None:
    """The first difference between two runs of one cell (reward columns, then held-out rows); None if bit-identical."""
    diff = first_difference(reward_columns(a), reward_columns(b))
    if diff is None and eval_rows(a) != eval_rows(b):
        diff = "held-out evaluation rows differ"
    return diff


def timed_run(launcher: Launcher, spec: TrialSpec, mode: str) -> float | None:
    """Wall seconds of one trial through `launcher`; None (and the reason printed) unless it completed."""
    started = time.perf_counter()
    result = launcher.run(spec)
    seconds = time.perf_counter() - started
    if result.outcome is not Outcome.COMPLETED:
        print(f"{mode} trial {spec.trial_dir} ended {result.outcome.value}: {result.reason}\n{result.log_tail}")
        return None
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description="warm session vs a process per trial on the demo's trials")
    parser.add_argument("--study", default=str(ROOT / "studies" / "tiny-cpu.yaml"))
    parser.add_argument("--trials", type=int, default=4, help="the study's first N planned cells")
    parser.add_argument("--max-steps", type=int, default=None, help="override the study's budget.max_steps")
    parser.add_argument("--threads", type=int, default=1, help="the CPU share's threads (OMP_NUM_THREADS)")
    parser.add_argument("--out", default=None, help="folder for the trial folders (default: a temp dir)")
    args = parser.parse_args()
    study = load_study(args.study)
    cells = study_plan(study)[: args.trials]
    root = Path(args.out or tempfile.mkdtemp(prefix="grpo-ablate-warm-"))
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    print(f"{len(cells)} trials of {args.study}, {args.threads} thread(s) each; trial folders in {root}")
    print(f"{'cell':<34} {'process s':>9} {'warm s':>7}  rewards")
    totals = {"process": 0.0, "warm": 0.0}
    identical = 0
    with WarmSession() as session:
        for i, cell in enumerate(cells):
            seconds = {}
            for mode, launcher in (("process", ProcessLauncher()), ("warm", session)):
                spec = build_spec(study, cell, root / mode / f"{i:05d}", env)
                if args.max_steps is not None:
                    spec.budget = dataclasses.replace(spec.budget, max_steps=args.max_steps)
                took = timed_run(launcher, spec, mode)
                if took is None:
                    return 1
                seconds[mode] = took
                totals[mode] += took
            diff = cell_difference(root / "process" / f"{i:05d}", root / "warm" / f"{i:05d}")
            identical += diff is None
            label = f"{cell.arm.label}, seed {cell.seed}"
            print(f"{label:<34} {seconds['process']:>9.1f} {seconds['warm']:>7.1f}  {'bit-identical' if diff is None else 'DIFFER: ' + diff}",
                  flush=True)
        processes = session.processes_started
    ratio = totals["process"] / totals["warm"]
    print(f"{'total':<34} {totals['process']:>9.1f} {totals['warm']:>7.1f}")
    print(f"process per trial / warm session = {ratio:.2f}x; warm session used {processes} process(es) for {len(cells)} trials; "
          f"rewards bit-identical in {identical}/{len(cells)} trials")
    return 0 if identical == len(cells) else 1


if __name__ == "__main__":
    raise SystemExit(main())
