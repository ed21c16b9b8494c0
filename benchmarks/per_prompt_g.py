"""Per-prompt G against fixed G=8, set up so that it could win: enough prompts per round, enough
visits per prompt for the posteriors to move, and enough paired seeds to see 0.03.

    nice -n 10 python benchmarks/per_prompt_g.py                 # build / extend the table, then compare
    python benchmarks/per_prompt_g.py --replay                   # compare from the committed table only

The round-3 comparison (benchmarks/adaptive.py) gave per-prompt G 4 prompts per round and about 3
visits per prompt over 4-8 seeds: the Beta posteriors stayed near their prior, G stayed at 6-10,
and the intervals (-0.016 [-0.056, +0.025] held-out reward vs G=8) could not have shown a
difference of the size that matters. Here, on `addition_mixed` (mixed difficulty, where a G per
prompt has something to exploit):
- 16 prompts per round (128 completions per step at G=8; per-prompt G re-divides the same 128
  among the round's 16 prompts, each between 2 and 16);
- a pool of 32 training prompts over 30 steps: 480 prompt draws, about 15 visits per prompt;
- 23 seeds, paired: 23 pairs detect 0.03 with 80% power at 5% when the paired sd is 0.049
  (stats.seeds.seeds_needed(0.03, 0.049) = 23), the spread issue 26 measured with the last two
  evaluation points averaged; the 40-seed table's single-point paired sd on this task is
  0.061-0.072 (benchmarks/data/sequential_table.json, 32 completions per step), at which 23
  pairs detect about 0.036-0.042: --seeds 40 buys 0.03 there;
- every trial's G per group (metrics.jsonl `g_sizes`) is kept, so the table shows whether the
  allocation moved (the G distribution, printed).
Trials run through one warm session (as sequential_table.py does), the table is saved after
every trial (benchmarks/data/per_prompt_g.json) and a rerun resumes; the comparison is the
report's own (stats.seeds.compare_to_baseline, paired over shared seeds) and is worded as what
its interval allows ("not detected" when it spans zero).

Measured 2026-12-01 on the shared 2-core CPU (46 trials, ~25 min): per-prompt G minus G=8,
held-out reward -0.024 [-0.044, -0.004] over 23 paired seeds (detectable with 80% power: 0.028);
the allocation moved (10% of groups at G=2, a third at 9-11, 13% at 12-16).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from grpo_ablate.config import load_study  # noqa: E402
from grpo_ablate.plan.cells import study_plan  # noqa: E402
from grpo_ablate.stats.seeds import compare_to_baseline, detectable_difference  # noqa: E402
from grpo_ablate.study.setup import library_versions  # noqa: E402
from grpo_ablate.study.trial_spec import build_spec  # noqa: E402
from grpo_ablate.launch import WarmSession  # noqa: E402
from grpo_ablate.core.vocab import EVAL_FILE, METRICS_FILE, Outcome  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "per_prompt_g.json"
ADAPTIVE = "adaptive:8[2-16]"


def study_text(seeds: int, steps: int, prompts: int, batch: int, eval_prompts: int) -> dict[str, Any]:
    return {
        "study": {"name": "per-prompt-g", "sampler": "ablation", "baseline": {"num_generations": 8, "temperature": 1.0},
                  "seeds": list(range(seeds)), "workers": 1, "trial_timeout": 1800},
        "model": {"name_or_path": "builtin:tiny"},
        "data": {"task": "addition_mixed", "num_prompts": prompts},
        "trainer": {"learning_rate": 2.0e-4, "per_device_train_batch_size": batch, "gradient_accumulation_steps": 1,
                    "max_completion_length": 6, "beta": 0.0, "lr_scheduler_type": "constant", "warmup_steps": 0},
        "search": {"num_generations": [8, ADAPTIVE], "temperature": [1.0]},
        "budget": {"max_steps": steps},
        "evaluation": {"num_prompts": eval_prompts, "temperature": 0, "samples_per_prompt": 1, "points": 2},
    }


def _save(table: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=0, separators=(",", ":")))
    tmp.replace(path)


def build(seeds: int, steps: int, prompts: int, batch: int, eval_prompts: int, path: Path) -> dict[str, Any]:
    settings = {"steps": steps, "prompts": prompts, "batch": batch, "eval_prompts": eval_prompts}
    table = json.loads(path.read_text()) if path.exists() else {}
    if table.get("settings") != settings:
        table = {"settings": settings, "versions": library_versions(), "rows": []}
    done = {(r["arm"], r["seed"]) for r in table["rows"]}
    root = Path(tempfile.mkdtemp(prefix="grpo-ablate-ppg-"))
    f = root / "study.yaml"
    f.write_text(yaml.safe_dump(study_text(seeds, steps, prompts, batch, eval_prompts)))
    study = load_study(f)
    cells = sorted(study_plan(study), key=lambda c: (c.seed, c.role != "baseline"))  # seeds outermost: whole pairs
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with WarmSession() as session:
        for i, cell in enumerate(cells):
            if (cell.arm.key, cell.seed) in done:
                continue
            folder = root / f"{i:05d}"
            t0 = time.monotonic()
            result = session.run(build_spec(study, cell, folder, env))
            rows = [json.loads(x) for x in (folder / METRICS_FILE).read_text().splitlines() if x.strip()] \
                if (folder / METRICS_FILE).exists() else []
            sizes = [g for r in rows for g in (r.get("g_sizes") or ([r["num_generations"]] * (batch // r["num_generations"])
                                                                     if r.get("num_generations") and r.get("completions")
                                                                     else []))]
            evals = [json.loads(x) for x in (folder / EVAL_FILE).read_text().splitlines()] \
                if (folder / EVAL_FILE).exists() else []
            row = {"arm": cell.arm.key, "label": cell.arm.label, "role": cell.role, "seed": cell.seed,
                   "outcome": result.outcome.value, "objective": (result.metrics or {}).get("eval_final_reward"),
                   "g_counts": dict(collections.Counter(int(g) for g in sizes)),
                   "curve": [[e["completions"], e["reward"]] for e in evals], "seconds": round(time.monotonic() - t0, 1)}
            table["rows"].append(row)
            _save(table, path)
            print(f"[{i + 1}/{len(cells)}] {cell.arm.label} seed {cell.seed}: {result.outcome.value} "
                  f"eval_final_reward={row['objective']} ({row['seconds']} s)", flush=True)
            if result.outcome is not Outcome.COMPLETED:
                print(result.reason, flush=True)
    return table


def compare(table: dict[str, Any]) -> None:
    rows = [r for r in table["rows"] if r["outcome"] == "completed" and r["objective"] is not None]
    base = {r["seed"]: float(r["objective"]) for r in rows if r["role"] == "baseline"}
    ada = {r["seed"]: float(r["objective"]) for r in rows if r["role"] != "baseline"}
    print(f"table: {len(rows)} completed trials, settings {table['settings']}")
    for role, name in (("baseline", "G=8"), ("other", ADAPTIVE)):
        counts: collections.Counter = collections.Counter()
        for r in rows:
            if (r["role"] == "baseline") == (role == "baseline"):
                counts.update({int(k): v for k, v in r["g_counts"].items()})
        total = sum(counts.values()) or 1
        print(f"  {name:<18} G per group: " + ", ".join(f"{g}: {n / total:.0%}" for g, n in sorted(counts.items())))
    c = compare_to_baseline(base, ada, low=0.0, high=1.0)
    if c is None or c.ci95 is None:
        print("  fewer than two paired seeds: nothing to compare yet")
        return
    mde = detectable_difference(c.sd, c.n, paired=c.kind == "paired") if c.sd else None
    clear = not (c.ci95[0] <= 0 <= c.ci95[1])
    print(f"  {ADAPTIVE} minus G=8, held-out reward: {c.delta:+.4f} [{c.ci95[0]:+.4f}, {c.ci95[1]:+.4f}] "
          f"({c.words}); {'a difference' if clear else 'no difference detected'}"
          + (f"; detectable with 80% power: {mde:.3f}" if mde else ""))
    print(f"  means: G=8 {statistics.fmean(base.values()):.3f}, {ADAPTIVE} {statistics.fmean(ada.values()):.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=23)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--prompts", type=int, default=32, help="training prompt pool (visits per prompt = steps x batch/8 / this)")
    p.add_argument("--batch", type=int, default=128, help="completions per step (16 prompts per round at G=8)")
    p.add_argument("--eval-prompts", type=int, default=128)
    p.add_argument("--out", type=Path, default=DATA)
    p.add_argument("--replay", action="store_true", help="compare from the table only; run no trial")
    a = p.parse_args()
    table = json.loads(a.out.read_text()) if a.replay else build(a.seeds, a.steps, a.prompts, a.batch, a.eval_prompts, a.out)
    compare(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
