"""A study on PostgreSQL survives its orchestrator paused for 10 x the heartbeat grace, and its server stopped and
started again mid-trial, with no step trained twice: tests/test_postgres_faults.py at the figures given here.

    python benchmarks/liveness.py --grace 30 --steps 400 --outage 60

Runs the two tests of tests/test_postgres_faults.py (real `grpo-ablate run` processes, a real PostgreSQL server,
the tiny model) with the heartbeat grace period (`--grace`; the orchestrator is paused 10 x that, the heartbeat
interval a third of it), the trial's steps and the last outage's seconds given, and prints what each run did:
outcomes, exit statuses, steps trained twice, who took the paused run's trial over, seconds. The tests assert
the properties; this prints the figures the docs quote (docs/many-machines.md). Needs Debian's postgresql.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", type=int, default=30, help="study.grace_period in seconds (the pause is 10 x this)")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps of the one trial")
    parser.add_argument("--outage", type=float, default=60.0, help="seconds the server is down the last time")
    args = parser.parse_args(argv)
    rows_file = Path(tempfile.mkdtemp(prefix="liveness-")) / "rows.jsonl"
    env = dict(os.environ, GRPO_ABLATE_LIVENESS_ROWS=str(rows_file), GRPO_ABLATE_LIVENESS_GRACE=str(args.grace),
               GRPO_ABLATE_LIVENESS_STEPS=str(args.steps), GRPO_ABLATE_LIVENESS_OUTAGE=str(args.outage),
               HF_HUB_OFFLINE="1")
    code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests/test_postgres_faults.py")], cwd=ROOT, env=env).returncode
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    print("| fault | figures | outcomes | exit statuses | steps trained twice | taken over by | seconds |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        figures = (f"grace {r['grace_s']} s, paused {r['paused_s']:.0f} s, {r['steps']} steps" if "paused_s" in r
                   else f"last outage {r['outage_s']:g} s (two of 4 s before), {r['steps']} steps")
        print(f"| {r['test']} | {figures} | {' → '.join(r['outcomes'])} | {r['exits']} | {r['trained_twice']} | "
              f"{r.get('taken_by', '-')} | {r['seconds']} |")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
