"""The SLURM fault matrix: every fault x the process, warm and slurm launchers, on the test cluster, with times.

    python benchmarks/slurm_matrix.py [--launcher slurm] [--fault scancel] [-n 2]

Runs tests/test_slurm_faults.py's `test_matrix_cell` for each cell (a real single-node SLURM
cluster, tests/slurm_cluster.py, and a real PostgreSQL server, the suite's fixtures), collects
each cell's record and prints the table the manual's Many machines page shows: the recorded outcomes, whether the
arm completed exactly once, where the retry resumed, the faulted task's exit, and the seconds
from the fault to the job's last process. Needs Debian's slurm-wlm, munge and postgresql.

The process and warm cells run the shipped array script (an orchestrator per task, the fault
on the task's job); the slurm cells run one orchestrator on this host whose trial is a job of
its own (the fault on that job, on the orchestrator: "orchestrator-kill", or on the controller:
"controller-restart", "controller-outage", slurmctld away GRPO_ABLATE_CONTROLLER_OUTAGE_S seconds,
300 by default, while the job runs on), and "faulted task" is then the orchestrator's exit (0:
the study finished). "jobs" counts the jobs the slurm cells submitted (one per attempt), "steps
trained twice" the optimizer steps more than one trial process trained.

    python benchmarks/slurm_matrix.py --launcher slurm --fault controller-restart --fault controller-outage
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resumed(row: dict) -> str:
    """Where the retry started; a retry that trained nothing (it recorded the finished attempt's result) says so."""
    return "none: the attempt had finished, its result recorded" if row.get("adopted") else str(row["resumed_from_step"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launcher", action="append", help="only these launchers (process, warm, slurm)")
    parser.add_argument("--fault", action="append", help="only these faults (tests/slurm_cells.py FAULTS)")
    parser.add_argument("-n", type=int, default=1, help="pytest workers (each runs its own cluster)")
    args = parser.parse_args(argv)
    rows_file = Path(tempfile.mkdtemp(prefix="slurm-matrix-")) / "cells.jsonl"
    keyword = " or ".join(f"-{fault}]" for fault in args.fault or [])  # the test ids: test_matrix_cell[<launcher>-<fault>]
    launchers = " or ".join(f"[{launcher}-" for launcher in args.launcher or [])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests/test_slurm_faults.py"),
               "-k", "matrix_cell" + (f" and ({keyword})" if keyword else "") + (f" and ({launchers})" if launchers else "")]
    if args.n > 1:
        command += ["-n", str(args.n)]
    env = dict(os.environ, GRPO_ABLATE_SLURM_MATRIX=str(rows_file), HF_HUB_OFFLINE="1")
    code = subprocess.run(command, cwd=ROOT, env=env).returncode
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    print("| launcher | fault | outcomes | arm completed | resumed from step (stopped at) | faulted task | fault to job end (s) "
          "| jobs | steps trained twice | cell (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["launcher"], r["fault"])):
        away = f" (controller away {r['outage_s']:.0f} s)" if r.get("outage_s") else ""
        print(f"| {r['launcher']} | {r['fault']}{away} | {' → '.join(r['outcomes'])} | "
              f"{'once' if r['lost_nothing'] else 'NO: ' + json.dumps(r['arms_completed'])} | "
              f"{resumed(r)} ({r['interrupted_steps']}) | {r['first_exit']} | {r['seconds_to_end']:.1f} | "
              f"{r.get('jobs') or '-'} | {r.get('trained_twice', '-')} | {r['seconds']:.0f} |")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
