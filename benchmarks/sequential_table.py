"""The sequential benchmark's table: real trials (task x arm x seed) with held-out evaluation points.

    nice -n 10 python benchmarks/sequential_table.py --seeds 40   # the committed table (~2 h on 2 cores)
    nice -n 10 python benchmarks/sequential_table.py --steps 60 --tasks addition_mixed \
        --out benchmarks/data/sequential_table_mixed60.json          # the 60-step table (12 seeds)
    nice -n 19 python benchmarks/sequential_table.py --tasks addition_rare --seeds 40 --steps 60 --points 2 \
        --generations 8 2 4 16 32 --temperatures 1.0 \
        --out benchmarks/data/sequential_table_rare.json               # the task where G matters (~50 min, 1 core)
    python benchmarks/sequential.py                                # replay them

Every trial of one task's ablation (by default baseline G=8 at T=1.0; G=2, G=4, the schedule
2->8@50%, and T=0.5; `--generations` and `--temperatures` set other arms, the first G the baseline) on seeds 0..N-1 runs through the real trainer in one warm session (one process for all
trials, one worker), the study's own trial specs (study/trial_spec.build_spec). The table is saved
after every trial, so an interrupted build resumes where it stopped, and carries its settings and
library versions; a table whose settings differ (other than seeds) is rebuilt. Seeds run outermost,
so a build cut short still has whole seeds of every arm.

The objective is eval_final_reward (held-out greedy reward, in [0, 1]); each row also keeps the
reward at every evaluation point (`curve`: [[completions so far, reward], ...]).
"""

from __future__ import annotations

import argparse
import json
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
from grpo_ablate.study.setup import library_versions  # noqa: E402
from grpo_ablate.study.trial_spec import build_spec  # noqa: E402
from grpo_ablate.launch import WarmSession  # noqa: E402
from grpo_ablate.core.vocab import EVAL_FILE, Outcome  # noqa: E402

__all__ = ["DATA", "study_text", "build", "load"]

DATA = Path(__file__).resolve().parent / "data" / "sequential_table.json"


DEFAULT_G: list[Any] = [8, 2, 4, "2->8@50%"]
DEFAULT_T = [1.0, 0.5]


def study_text(task: str, steps: int, eval_prompts: int, points: int, seeds: int,
               generations: list[Any] | None = None, temperatures: list[float] | None = None) -> dict[str, Any]:
    """The study file each task's trials are specified by (the demo's settings, a smaller budget).

    Every arm generates the same 32 completions per step (per_device_train_batch_size 32 is the
    number of completions), so G arms compare at equal generated compute: G=2 sees 16 prompts per
    step, G=16 two.
    """
    return {
        "study": {"name": f"seq-{task}", "sampler": "ablation", "baseline": {"num_generations": 8, "temperature": 1.0},
                  "seeds": list(range(seeds)), "workers": 1, "trial_timeout": 900},
        "model": {"name_or_path": "builtin:tiny"},
        "data": {"task": task, "num_prompts": 200},
        "trainer": {"learning_rate": 2.0e-4, "per_device_train_batch_size": 32, "gradient_accumulation_steps": 1,
                    "max_completion_length": 6, "beta": 0.0, "lr_scheduler_type": "constant", "warmup_steps": 0},
        "search": {"num_generations": generations or DEFAULT_G, "temperature": temperatures or DEFAULT_T},
        "budget": {"max_steps": steps},
        "evaluation": {"num_prompts": eval_prompts, "temperature": 0, "samples_per_prompt": 1, "points": points},
    }


def load(path: Path = DATA) -> dict[str, Any]:
    return json.loads(Path(path).read_text()) if Path(path).exists() else {"settings": {}, "versions": {}, "rows": []}


def _save(table: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=0, separators=(",", ":")))
    tmp.replace(path)


def build(tasks: list[str], seeds: int, steps: int, eval_prompts: int, points: int, path: Path = DATA,
          generations: list[Any] | None = None, temperatures: list[float] | None = None) -> dict[str, Any]:
    settings: dict[str, Any] = {"tasks": tasks, "steps": steps, "eval_prompts": eval_prompts, "points": points}
    if generations is not None or temperatures is not None:  # the committed tables' arms are the defaults
        settings["search"] = {"num_generations": generations or DEFAULT_G, "temperature": temperatures or DEFAULT_T}
    table = load(path)
    if table.get("settings") != settings:
        if table["rows"]:
            print(f"settings changed ({table.get('settings')} -> {settings}): rebuilding", flush=True)
        table = {"settings": settings, "versions": library_versions(), "rows": []}
    done = {(r["task"], r["arm"], r["seed"]) for r in table["rows"]}
    root = Path(tempfile.mkdtemp(prefix="grpo-ablate-seq-"))
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    plans = {}
    for task in tasks:
        f = root / f"{task}.yaml"
        f.write_text(yaml.safe_dump(study_text(task, steps, eval_prompts, points, seeds, generations, temperatures)))
        study = load_study(f)
        plans[task] = (study, study_plan(study))
    order = [(task, cell) for seed in range(seeds) for task in tasks for cell in plans[task][1] if cell.seed == seed]
    with WarmSession() as session:
        for i, (task, cell) in enumerate(order):
            if (task, cell.arm.key, cell.seed) in done:
                continue
            folder = root / task / f"{i:05d}"
            spec = build_spec(plans[task][0], cell, folder, env)
            t0 = time.monotonic()
            result = session.run(spec)
            evals = [json.loads(x) for x in (folder / EVAL_FILE).read_text().splitlines()] if (folder / EVAL_FILE).exists() else []
            row = {"task": task, "arm": cell.arm.key, "label": cell.arm.label, "role": cell.role, "seed": cell.seed,
                   "outcome": result.outcome.value,
                   "objective": (result.metrics or {}).get("eval_final_reward"),
                   "curve": [[e["completions"], e["reward"]] for e in evals],
                   # the last evaluation point's reward per held-out prompt (same prompts, same order
                   # in every trial): prompt noise is measurable from the table
                   "per_prompt": evals[-1].get("per_prompt") if evals else None,
                   "seconds": round(time.monotonic() - t0, 1)}
            table["rows"].append(row)
            _save(table, path)
            print(f"[{i + 1}/{len(order)}] {task} {cell.arm.label} seed {cell.seed}: {result.outcome.value} "
                  f"eval_final_reward={row['objective']} curve={[round(r, 3) for _, r in row['curve']]} ({row['seconds']} s)",
                  flush=True)
            if result.outcome is not Outcome.COMPLETED:
                print(result.reason, result.log_tail[-2000:] if result.log_tail else "", flush=True)
    return table


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["addition", "addition_mixed"])
    p.add_argument("--seeds", type=int, default=12)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eval-prompts", type=int, default=128)
    p.add_argument("--points", type=int, default=4)
    p.add_argument("--out", type=Path, default=DATA)
    p.add_argument("--generations", nargs="+", default=None,
                   help=f"num_generations values of the ablation (default {DEFAULT_G}; the first is the baseline)")
    p.add_argument("--temperatures", nargs="+", type=float, default=None, help=f"default {DEFAULT_T}")
    a = p.parse_args()
    gens = [int(g) if g.isdigit() else g for g in a.generations] if a.generations else None
    build(a.tasks, a.seeds, a.steps, a.eval_prompts, a.points, a.out, gens, a.temperatures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
