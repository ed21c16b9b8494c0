"""Is the demo's answer reproducible? Run the study twice from scratch and compare the two answers.

    python benchmarks/verdict.py                      # studies/tiny-cpu.yaml, twice (minutes on 2 cores)
    python benchmarks/verdict.py --quick              # a smoke run: 10 steps per trial
    python benchmarks/verdict.py --study studies/x.yaml --runs 3 --set study.seeds=[0,1,2] --json

Each run is the real command line, `python -m grpo_ablate run STUDY --set study.output_dir=TMP`,
into its own fresh folder (so its own fresh journal), then reads TMP/summary.json's "verdict":
the answer's words, its kind (winner / no_clear_winner / ...), the recommended configuration,
and the statistics behind it (comparison used, p-value, 95% interval, detectable difference,
seeds needed). Two answers agree when they are of the same kind and recommend the same
configuration (vocab.Arm.key).

Exit codes: 0 the answers agree, 1 they differ, 2 a run failed or wrote no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ablate.report.text import fmt, fmt_interval, fmt_p  # noqa: E402

QUICK_STEPS = 10


def run_once(study: str, folder: Path, sets: list[str]) -> tuple[dict[str, Any] | None, float, str]:
    """One fresh run of the study into folder; (its summary.json or None, seconds, the output's tail)."""
    cmd = [sys.executable, "-m", "grpo_ablate", "run", study, "--set", f"study.output_dir={folder}"]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    tail = (proc.stdout + proc.stderr)[-2000:]
    path = folder / "summary.json"
    if proc.returncode != 0 or not path.exists():
        return None, seconds, tail
    return json.loads(path.read_text(encoding="utf-8")), seconds, tail


def behind(v: dict[str, Any]) -> str:
    """The statistics behind an answer, in one line."""
    parts = [f"on {v.get('metric')}"]
    if v.get("comparison"):
        parts.append(f"{v['comparison']} comparison over {v.get('n')} seeds")
    if v.get("delta") is not None:
        parts.append(f"difference {fmt(v['delta'])}")
    if v.get("ci95"):
        parts.append(f"95% interval {fmt_interval(tuple(v['ci95']))}")
    if v.get("p_value") is not None:
        parts.append(fmt_p(v["p_value"]))
    if v.get("detectable_difference") is not None:
        parts.append(f"detectable difference {fmt(v['detectable_difference'])}")
    need = v.get("seeds_needed")
    if need:
        parts.append(f"~{need['seeds']} seeds to detect {fmt(need['difference'])}")
    return "; ".join(parts)


def identity(v: dict[str, Any]) -> tuple[str, str | None]:
    rec = v.get("recommended") or {}
    return str(v.get("kind")), rec.get("key")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a study twice from scratch; do the answers agree?")
    parser.add_argument("--study", default=str(ROOT / "studies" / "tiny-cpu.yaml"))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help=f"budget.max_steps={QUICK_STEPS}: a smoke run, not a measurement")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--keep", action="store_true", help="keep the run folders (printed)")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    args = parser.parse_args(argv)
    sets = ([f"budget.max_steps={QUICK_STEPS}"] if args.quick else []) + args.sets

    verdicts: list[dict[str, Any]] = []
    folders = []
    try:
        for i in range(args.runs):
            folder = Path(tempfile.mkdtemp(prefix=f"grpo-verdict-{i}-"))
            folders.append(folder)
            summary, seconds, tail = run_once(args.study, folder, sets)
            v = (summary or {}).get("verdict")
            if not v:
                print(f"run {i + 1}: no verdict ({'the run failed' if summary is None else 'summary.json has none'}) "
                      f"after {seconds:.0f} s; its output ended with:\n{tail}", file=sys.stderr)
                return 2
            v = {**v, "seconds": seconds, "folder": str(folder)}
            verdicts.append(v)
            if not args.json:
                print(f"run {i + 1} ({seconds:.0f} s): {v['kind']}, recommends "
                      f"{(v.get('recommended') or {}).get('key')}\n  {v['words']}\n  behind it: {behind(v)}")
    finally:
        if not args.keep:
            for f in folders:
                shutil.rmtree(f, ignore_errors=True)
        elif folders:
            print("run folders: " + " ".join(str(f) for f in folders))
    agree = len({identity(v) for v in verdicts}) == 1
    if args.json:
        print(json.dumps({"agree": agree, "verdicts": verdicts}, indent=2))
    else:
        print(f"the {len(verdicts)} answers {'AGREE' if agree else 'DIFFER'}"
              + ("" if agree else ": " + " vs ".join(f"{k}/{r}" for k, r in (identity(v) for v in verdicts))))
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
