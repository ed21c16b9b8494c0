"""Fixed G against dynamic sampling and per-prompt G, at equal generated completions, on two tasks.

    nice -n 10 python benchmarks/adaptive.py --out /tmp/adaptive-bench          # both tasks, 4 seeds (~30 min on 2 cores)
    python benchmarks/adaptive.py --tasks addition --seeds 0 1 --steps 20 --out /tmp/quick

For each task (`addition_mixed`: mixed difficulty; `addition`: one carry drill) this runs one
real study with the real command line (`python -m grpo_ablate run studies/tiny-cpu.yaml --set
...`): an ablation whose baseline is TRL's default G=8 and whose other arms are the fixed G in
FIXED, `dynamic:8` (DAPO's dynamic sampling, 2 extra rounds at most) and `adaptive:8[2-16]`
(per-prompt G, 4 prompts per round sharing 32 completions), all on the same seeds (paired), the
same 32 x STEPS generated completions (dynamic sampling's dropped groups count: it trains on
fewer), and the same held-out prompts scored greedily. A small prompt pool (--prompts) lets
each training prompt come back a few times, so per-prompt G has a posterior to use.

Printed per task:
- the study's own verdict (report/verdict.py, through summary.json): each arm against G=8 on
  held-out reward, paired by seed when tighter, at 95%;
- the best fixed G (highest mean held-out reward among the fixed arms, picked on these same
  runs, so it is optimistic) and each adaptive arm against it, with the report's own test
  (stats.seeds.compare_to_baseline);
- per arm: informative groups per step (groups with reward spread that were trained on),
  generated completions, generated tokens per unit of held-out gain.

Measured on the shared 2-core CPU, 2026-12-01, seeds 0-3, 40 steps = 1,280 completions per trial
(`nice -n 10 python benchmarks/adaptive.py --seeds 0 1 2 3 --steps 40`), held-out reward, vs G=8:

    addition_mixed   G=8 0.477 | G=2 0.494 | G=4 0.557 (+0.080, p=0.03) | G=16 0.559 (+0.082, p=0.03)
                     dynamic:8 0.523 (+0.047 [-0.030, +0.124]) | adaptive:8[2-16] 0.490 (+0.014 [-0.044, +0.071])
    addition         G=8 0.805 | G=2 0.822 | G=4 0.795 | G=16 0.754 (-0.051, p=0.04)
                     dynamic:8 0.705 (-0.100 [-0.235, +0.036]) | adaptive:8[2-16] 0.795 (-0.010 [-0.031, +0.011])

Verdict: neither dynamic sampling nor per-prompt G is distinguishable from G=8 on either task at
this budget. Dynamic sampling trains on nearly only informative groups (3.99 of 4 per step vs
2.38 for G=8) but pays half its completions for them (61 vs 74 informative groups per 1,000
generated), so it takes half the optimizer steps; per-prompt G moves G only to 6-10 and behaves
like G=8. The fixed arms' p~0.03 are 2 of 5 unadjusted comparisons on 4 seeds, and they did
not survive 8 seeds (`--tasks addition_mixed --seeds 0 1 2 3 4 5 6 7`): no arm clearly better
than G=8 (G=4 +0.049 [-0.004, +0.101]; dynamic:8 +0.007 [-0.056, +0.069]; adaptive:8[2-16]
-0.016 [-0.056, +0.025]; detectable difference ~0.056).
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
sys.path.insert(0, str(ROOT))

from grpo_ablate.stats.seeds import compare_to_baseline  # noqa: E402
from grpo_ablate.report.text import fmt_interval, fmt_p  # noqa: E402
from grpo_ablate.contract.spec import TrialSpec  # noqa: E402
from grpo_ablate.core.vocab import metric  # noqa: E402

FIXED = [2, 4, 8, 16]  # 8 is the baseline (TRL's default)
ADAPTIVE = ["dynamic:8", "adaptive:8[2-16]"]
METRIC = "eval_final_reward"


def run_study(task: str, out: Path, seeds: list[int], steps: int, prompts: int, eval_prompts: int) -> Path:
    folder = out / task
    gens = [*FIXED, *ADAPTIVE]
    sets = {
        "study.name": f"adaptive-{task}",
        "study.output_dir": str(folder),
        "study.seeds": json.dumps(seeds),
        "study.workers": "1",
        "data.task": task,
        "data.num_prompts": str(prompts),
        "search.num_generations": json.dumps(gens),  # the study file's own text: the loader reads it
        "search.temperature": "[1.0]",
        "budget.max_steps": str(steps),
        "evaluation.num_prompts": str(eval_prompts),
    }
    cmd = [sys.executable, "-m", "grpo_ablate", "run", str(ROOT / "studies" / "tiny-cpu.yaml"), "--no-report"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    print("$ " + " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    (out / f"{task}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"the {task} study failed (exit {proc.returncode}); see {out / f'{task}.log'}")
    report = subprocess.run([sys.executable, "-m", "grpo_ablate", "report", str(ROOT / "studies" / "tiny-cpu.yaml"),
                             *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")]],
                            env=env, cwd=ROOT, capture_output=True, text=True)
    (out / f"{task}.report.log").write_text(report.stdout + report.stderr)
    return folder


def trials(folder: Path) -> list[dict]:
    """Every completed trial: its G label, seed, result metrics and per-step rows."""
    out = []
    for spec_file in sorted((folder / "trials").glob("*/spec.json")):
        d = spec_file.parent
        result = d / "result.json"
        if not result.exists():
            continue
        res = json.loads(result.read_text())
        if res.get("outcome") != "completed":
            continue
        spec = json.loads(spec_file.read_text())
        g = TrialSpec.from_json(spec_file.read_text()).num_generations  # the plan's G: a value, never a label
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines() if x.strip()]
        out.append({"g": g, "label": str(g), "seed": int(spec["trainer"]["seed"]), "m": res["metrics"], "rows": rows})
    return out


def informative_per_step(t: dict) -> float:
    """Groups with reward spread trained on, per generating step."""
    vals = []
    for r in t["rows"]:
        if r.get("reward") is None:
            continue
        if r.get("informative_groups") is not None:
            vals.append(r["informative_groups"])
        elif r.get("frac_reward_zero_std") is not None:
            groups = r["completions"] / int(t["g"])
            vals.append(groups * (1 - r["frac_reward_zero_std"]))
    return sum(vals) / len(vals) if vals else float("nan")


def informative_per_1k(t: dict) -> float:
    """Informative groups trained on per 1,000 generated completions (dropped ones count as generated)."""
    steps = [r for r in t["rows"] if r.get("reward") is not None]
    made = sum(r.get("completions") or 0 for r in steps)
    return 1000 * informative_per_step(t) * len(steps) / made if made else float("nan")


def summarise(task: str, folder: Path) -> None:
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").exists() else {}
    verdict = summary.get("verdict") or {}
    print(f"\n=== {task}: the study's verdict ({verdict.get('metric')}, each arm vs G=8) ===")
    print(verdict.get("words", "(no verdict: see the report log)"))
    for a in verdict.get("arms", []):
        ci = a.get("ci95")
        print(f"  {a['arm']:<40} mean {a['mean'] if a['mean'] is None else round(a['mean'], 3)}  "
              f"delta {a.get('delta') if a.get('delta') is None else round(a['delta'], 3)}  "
              f"ci95 {None if not ci else [round(x, 3) for x in ci]}  p {a.get('p_value')}  "
              f"better {a['clearly_better']} worse {a['clearly_worse']}")
    ts = trials(folder)
    by: dict[str, dict[int, dict]] = {}
    for t in ts:
        by.setdefault(t["label"], {})[t["seed"]] = t
    fixed = [lab for lab in by if lab.isdigit()]
    mean = {lab: sum(t["m"][METRIC] for t in v.values()) / len(v) for lab, v in by.items()}
    best = max(fixed, key=lambda lab: mean[lab])
    m = metric(METRIC)
    print(f"\nper arm ({METRIC}; held-out gain; informative groups per step and per 1,000 generated completions; "
          "completions and tokens generated; tokens per held-out gain):")
    g_of = {t["label"]: t["g"] for t in ts}  # each label's G as the plan carried it (a value, not text)
    for lab in sorted(by, key=lambda x: g_of[x]):
        v = by[lab].values()
        gain = sum(t["m"]["eval_gain"] for t in v) / len(v)
        tokens = sum(t["m"].get("generated_tokens") or 0 for t in v) / len(v)
        made = sum(t["m"].get("completions") or 0 for t in v) / len(v)
        info = sum(informative_per_step(t) for t in v) / len(v)
        per_k = sum(informative_per_1k(t) for t in v) / len(v)
        per_gain = f"{tokens / gain:,.0f}" if gain > 0 else "n/a (no gain)"
        print(f"  {lab:<18} n={len(by[lab])}  held-out {mean[lab]:.3f}  gain {gain:+.3f}  informative/step {info:5.2f} (per 1k completions {per_k:5.1f})  "
              f"completions {made:,.0f}  tokens {tokens:,.0f}  tokens per gain {per_gain}")
    print(f"\nbest fixed G on these runs: G={best} (held-out {mean[best]:.3f}); adaptive arms against it "
          "(stats.seeds.compare_to_baseline: paired by seed when tighter, 95%):")
    for lab in by:
        if lab in fixed:
            continue
        c = compare_to_baseline({s: t["m"][METRIC] for s, t in by[best].items()},
                                {s: t["m"][METRIC] for s, t in by[lab].items()}, low=m.low, high=m.high)
        if c is None:
            continue
        print(f"  {lab:<18} {c.delta:+.3f} {fmt_interval(c.ci95) if c.ci95 else ''} ({c.kind}, {fmt_p(c.p_value)})")


def main() -> int:
    p = argparse.ArgumentParser(description="fixed G vs dynamic sampling vs per-prompt G at equal completions")
    p.add_argument("--tasks", nargs="+", default=["addition_mixed", "addition"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--steps", type=int, default=40, help="budget: steps x 32 generated completions per trial")
    p.add_argument("--prompts", type=int, default=48, help="training prompt pool (small: each prompt recurs)")
    p.add_argument("--eval-prompts", type=int, default=128)
    p.add_argument("--out", default=None)
    p.add_argument("--summarise-only", action="store_true", help="read finished studies under --out")
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="grpo-ablate-adaptive-"))
    out.mkdir(parents=True, exist_ok=True)
    for task in a.tasks:
        folder = out / task if a.summarise_only else run_study(task, out, a.seeds, a.steps, a.prompts, a.eval_prompts)
        summarise(task, folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
