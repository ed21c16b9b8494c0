"""A trial forked from a template that froze its imports out of the garbage collector, against one that did not.

    nice -n 10 python benchmarks/gc_freeze.py                  # 6 forked trials each way, tiny model, 4 steps
    python benchmarks/gc_freeze.py --trials 10 --max-steps 8

What it answers: worker.import_trial_modules ends with gc.freeze(), in a warm-session template
before it forks sessions and in a trial process of its own. Here one process does those imports
as a template does, then forks one trial at a time, alternating: with the imports frozen, and with
them unfrozen (gc.unfreeze() just before the fork), so drift in the machine's load falls on both.
Each child trains the same trial spec (a fresh folder) in-process and exits; the parent reads the
child's CPU seconds from os.wait4 (user + system). Prints each pair, the medians and their ratio,
and whether the rewards of every pair were bit-identical (freezing must change no result).
Exit status 0 when they were, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def _forked_trial(spec, frozen: bool) -> float:
    """CPU seconds of one child that runs `spec` in-process, forked with the imports frozen or not."""
    from grpo_ablate.trainer.worker import run_spec

    if not frozen:
        gc.unfreeze()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            outcome, _ = run_spec(spec)
            code = 0 if outcome.value == "completed" else 1
        finally:
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    gc.freeze()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the trial in {spec.trial_dir} did not complete (exit {os.waitstatus_to_exitcode(status)})")
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description="forked trials: imports frozen out of the collector vs not")
    parser.add_argument("--trials", type=int, default=6, help="pairs of forked trials")
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the trials")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)

    from helpers import tiny_spec

    from grpo_ablate.contract.metrics import read_rows
    from grpo_ablate.core.vocab import METRICS_FILE
    from grpo_ablate.trainer.worker import import_trial_modules

    import_trial_modules()  # as a template does: the imports, then gc.freeze()
    root = Path(tempfile.mkdtemp(prefix="grpo-ablate-gc-freeze-"))
    print(f"{args.trials} pairs of forked trials of the tiny model, {args.max_steps} steps, {args.threads} thread(s); "
          f"folders in {root}")
    print(f"{'pair':>4} {'frozen s':>9} {'unfrozen s':>11}  rewards")
    cpu: dict[bool, list[float]] = {True: [], False: []}
    identical = 0
    for i in range(args.trials):
        rewards = {}
        for frozen in ((True, False) if i % 2 == 0 else (False, True)):
            spec = tiny_spec(root / f"{i:03d}-{'frozen' if frozen else 'unfrozen'}", steps=args.max_steps)
            cpu[frozen].append(_forked_trial(spec, frozen))
            rewards[frozen] = [row["reward"] for row in read_rows(Path(spec.trial_dir) / METRICS_FILE)]
        same = rewards[True] == rewards[False]
        identical += same
        print(f"{i:>4} {cpu[True][-1]:>9.3f} {cpu[False][-1]:>11.3f}  {'identical' if same else 'DIFFER'}")
    frozen, unfrozen = statistics.median(cpu[True]), statistics.median(cpu[False])
    print(f"median CPU s a trial: frozen {frozen:.3f}, unfrozen {unfrozen:.3f}, ratio {frozen / unfrozen:.2f}; "
          f"rewards identical in {identical} of {args.trials} pairs")
    return 0 if identical == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
