"""Is the demo's answer reproducible? Run the study twice from scratch and compare the two answers.

    python tools/verdict.py                      # studies/tiny-cpu.yaml, twice (minutes on 2 cores)
    python tools/verdict.py --quick              # a smoke run: 10 steps per trial
    python tools/verdict.py --study studies/x.yaml --runs 3 --set study.seeds=[0,1,2] --json

Each run is the real command line, `python -m grpo_ablate run STUDY --set study.output_dir=TMP`,
into its own fresh folder (so its own fresh journal), then reads TMP/summary.json's "verdict":
the answer's words, its kind (winner / no_clear_winner / ...), the recommended configuration,
and the statistics behind it (comparison used, p-value, 95% interval, detectable difference,
seeds needed). Two answers agree when they are of the same kind and recommend the same
configuration (vocab.Arm.key).

Exit codes: 0 the answers agree, 1 they differ, 2 a run failed or wrote no verdict.

    python tools/verdict.py --runs 1 --readme    # also write the README's quoted answer and timings

`--readme` keeps the README's first screen true: from the last run it writes docs/demo-answer.json
(the answer's three lines, its kind, the recommended, as-good and worse arms, each arm's held-out
reward per seed, the wall time of each run, the built-in model's build time for the record: the quote states no
build time, which a cold build on a loaded machine makes meaningless) and the quote between
the `demo-answer` markers of the README and of docs/getting-started.md, rendered from that file.
tests/test_docs.py fails when a page differs from the file, or when the code, given the recorded
per-seed rewards, now answers differently in kind (another kind, recommendation, as-good set or
worse set): rerun this.
"""

from __future__ import annotations

import argparse
import csv
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

from docs_blocks import replace_block  # noqa: E402 - tools/docs_blocks.py: the one writer of the docs' generated blocks
from grpo_ablate.report.text import fmt, fmt_interval, fmt_p  # noqa: E402

QUICK_STEPS = 10
README = ROOT / "README.md"
RECORD = ROOT / "docs" / "demo-answer.json"
START, END = "<!-- demo-answer:start -->", "<!-- demo-answer:end -->"
# Every page that quotes the demo's answer: the README, and the manual's getting-started page.
PAGES = (README, ROOT / "docs" / "getting-started.md")


def trials_by_arm(folder: Path, metric: str) -> dict[str, dict[str, Any]]:
    """Each arm's configuration and, per seed, its held-out reward at the start and the end (trials.csv)."""
    arms: dict[str, dict[str, Any]] = {}
    with open(folder / "trials.csv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row.get("outcome") != "completed" or not row.get(metric):
                continue
            arm = arms.setdefault(row["role"], {"arm": {"num_generations": int(row["num_generations"]),
                                                        "generation_batch_size": int(row["generation_batch_size"]),
                                                        "temperature": float(row["temperature"])}, "seeds": {}})
            start = float(row["eval_start_reward"]) if row.get("eval_start_reward") else None
            arm["seeds"][row["seed"]] = {"start": start, "end": float(row[metric])}
    return arms


def build_seconds() -> float | None:
    """How long the built-in model took to build when it was first used (its cached build record)."""
    from grpo_ablate.trainer.builtin.model import cache_root

    found = sorted((cache_root() / "models").glob("tiny-addition-*/grpo_ablate_builtin.json"))
    return json.loads(found[-1].read_text()).get("build_seconds") if found else None


def demo_record(v: dict[str, Any], folder: Path, seconds: list[float], study: str, load: float) -> dict[str, Any]:
    """docs/demo-answer.json: what the README quotes and what tests/test_docs.py checks the code against."""
    return {
        "generated_by": "python tools/verdict.py --readme",
        "study": os.path.relpath(study, ROOT),
        "measured": {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
                     "load_average_1min": round(load, 1), "run_seconds": [round(x) for x in seconds],
                     "model_build_seconds": build_seconds()},
        "answer": {"kind": v["kind"], "recommended": (v.get("recommended") or {}).get("arm"),
                   "as_good": v.get("as_good") or [], "worse": v.get("worse") or [], "lines": v.get("lines") or [],
                   "metric": v.get("metric")},
        "arms": trials_by_arm(folder, v.get("metric") or "eval_final_reward"),
    }


def readme_block(record: dict[str, Any]) -> str:
    """The README's quote, rendered from docs/demo-answer.json alone (the test renders it the same way)."""
    m = record["measured"]
    runs = m["run_seconds"]
    took = (f"{runs[0]} s" if len(runs) == 1 else f"{min(runs)}-{max(runs)} s") + " of wall time"
    quote = "\n".join(f"> **{line}**" + ("  " if i < len(record["answer"]["lines"]) - 1 else "")
                       for i, line in enumerate(record["answer"]["lines"]))
    return (f"{START}\n<!-- written by `{record['generated_by']}` from a real run of {record['study']} "
            f"(docs/demo-answer.json); do not edit by hand -->\n{quote}\n\n"
            f"Measured on this project's {m['cpus']}-core CPU machine (no GPU), {m['date']}, load average "
            f"{m['load_average_1min']} when the run started: one demo run took {took} with the built-in model "
            f"already cached. The first run on a machine also builds the built-in model, once (it is cached in "
            f"~/.cache/grpo-ablate) and says how far it is while it does.\n{END}")


def write_readme(record: dict[str, Any], pages: tuple[Path, ...] = PAGES, path: Path = RECORD) -> None:
    """Write docs/demo-answer.json and replace each page's block between the markers with its rendering."""
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for page in pages:
        replace_block(page, START, END, readme_block(record))


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
    parser.add_argument("--readme", action="store_true",
                        help="write docs/demo-answer.json and the README's quote from the last run")
    args = parser.parse_args(argv)
    sets = ([f"budget.max_steps={QUICK_STEPS}"] if args.quick else []) + args.sets

    verdicts: list[dict[str, Any]] = []
    folders = []
    load = os.getloadavg()[0]  # other work on the machine when the runs start (the timings depend on it)
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
            if args.readme and i == args.runs - 1:
                write_readme(demo_record(v, folder, [x["seconds"] for x in verdicts], args.study, load))
                print(f"wrote {RECORD.relative_to(ROOT)} and the quote in " + ", ".join(str(p.relative_to(ROOT)) for p in PAGES))
            if not args.json:
                lines = "\n  ".join(v.get("lines") or [v["words"]])
                print(f"run {i + 1} ({seconds:.0f} s): {v['kind']}, recommends "
                      f"{(v.get('recommended') or {}).get('key')}\n  {lines}\n  behind it: {behind(v)}")
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
