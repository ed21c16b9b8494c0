"""A replaced warm session forked from its template against one started on its own: time and rewards.

    nice -n 10 python benchmarks/session_template.py                 # 4 trials of studies/tiny-cpu.yaml, 5 steps
    python benchmarks/session_template.py --trials 6 --max-steps 2 --out /tmp/template-bench

A study replaces its warm session after every trial that did not end cleanly (and reruns a
failed one in a fresh process); the probe after every point killed by the memory cap. Here every
trial gets a new session, as after such an end: each of the study's first N planned cells runs
twice, in a session forked from the template (the default) and in one started on its own
(GRPO_ABLATE_SESSION_TEMPLATE=0), the two alternating so drift in the machine's load falls on
both. Prints per cell the wall seconds of each (from asking for the session to the trial's
result) and whether the reward columns of metrics.jsonl and the held-out rows of eval.jsonl are
bit-identical; then the totals, their ratio and one verdict line. Exit status 0 when every cell
is identical, 1 otherwise. The template's own start (the imports, once) is in the first forked trial.
"""

from __future__ import annotations

import dataclasses
import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from warm_session import cell_difference, timed_run  # noqa: E402

from grpo_ablate.config import load_study  # noqa: E402
from grpo_ablate.plan.cells import study_plan  # noqa: E402
from grpo_ablate.study.trial_spec import build_spec  # noqa: E402
from grpo_ablate.launch import WarmSession  # noqa: E402
from grpo_ablate.launch.template import TEMPLATE_ENV, close_templates  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description="a replaced warm session: forked from its template vs started on its own")
    parser.add_argument("--study", default=str(ROOT / "studies" / "tiny-cpu.yaml"))
    parser.add_argument("--trials", type=int, default=4, help="the study's first N planned cells")
    parser.add_argument("--max-steps", type=int, default=5, help="the trials' budget.max_steps (short: the start is the question)")
    parser.add_argument("--threads", type=int, default=1, help="the CPU share's threads (OMP_NUM_THREADS)")
    parser.add_argument("--out", default=None, help="folder for the trial folders (default: a temp dir)")
    args = parser.parse_args()
    study = load_study(args.study)
    cells = study_plan(study)[: args.trials]
    root = Path(args.out or tempfile.mkdtemp(prefix="grpo-ablate-template-"))
    cpu = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    modes = {"forked": cpu, "own": {**cpu, TEMPLATE_ENV: "0"}}
    print(f"{len(cells)} trials of {args.study}, {args.max_steps} steps, {args.threads} thread(s) each, a new session "
          f"for every trial; trial folders in {root}")
    print(f"{'cell':<34} {'forked s':>8} {'own s':>7}  rewards")
    totals = {mode: 0.0 for mode in modes}
    identical = 0
    try:
        for i, cell in enumerate(cells):
            seconds = {}
            for mode, env in modes.items():
                spec = build_spec(study, cell, root / mode / f"{i:05d}", env)
                spec.budget = dataclasses.replace(spec.budget, max_steps=args.max_steps)
                with WarmSession() as session:  # a new session, as after an unclean end
                    took = timed_run(session, spec, mode)
                if took is None:
                    return 1
                seconds[mode] = took
                totals[mode] += took
            diff = cell_difference(root / "own" / f"{i:05d}", root / "forked" / f"{i:05d}")
            identical += diff is None
            label = f"{cell.arm.label}, seed {cell.seed}"
            print(f"{label:<34} {seconds['forked']:>8.1f} {seconds['own']:>7.1f}  {'bit-identical' if diff is None else 'DIFFER: ' + diff}",
                  flush=True)
    finally:
        close_templates()
    print(f"{'total':<34} {totals['forked']:>8.1f} {totals['own']:>7.1f}")
    print(f"started on its own / forked = {totals['own'] / totals['forked']:.2f}x over {len(cells)} new sessions; "
          f"rewards bit-identical in {identical}/{len(cells)} trials")
    return 0 if identical == len(cells) else 1


if __name__ == "__main__":
    raise SystemExit(main())
