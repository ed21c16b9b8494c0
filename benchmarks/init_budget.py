"""Does default `init` write a deciding study of at most half the run it tunes? One row per Open R1 recipe.

    python benchmarks/init_budget.py                     # Open R1's current recipes, 8 GPUs with a vLLM server, 0.5x
    python benchmarks/init_budget.py --all --json        # every Open R1 recipe fixture and study recipe
    python benchmarks/init_budget.py --branch-from none  # what from step 0 would take instead

For each recipe it runs the real command, in this process and offline:
`grpo-ablate init --from RECIPE --gpus 8 --vllm server [--budget B] [RUN SIZE] --out TMP/study.yaml`, first
without the run's size where the recipe's dataset is one this machine cannot read (it must exit 2 naming
--full-run-prompts and --full-run-steps, writing nothing), then with it. Where a study is written it is priced
the way `plan` prices it (plan/price.planned_price) and checked against issue 49's goal:
- written at most the budget (the high end of the price range), its screen at most 0.05x of the run;
- a confirm stage that decides: the elimination race on, at least 3 seeds per arm;
- every trial ends past the learning-rate warmup of the run it stands for (study/warmup.trial_end);
- `plan` states the effect it resolves ("Resolves: at ... your run this study tells apart differences of ...").
A study written as the screen alone is reported as such (it passes only the refusal side of the goal).

The run's size where this machine cannot read it: OpenR1-Math-220k's default split, 93,733 rows (the dataset
viewer's 93.7k); NuminaMath-TIR's train split, 72,441 rows (tests/test_fidelity.py); MATH-lighteval's train split,
7,500; codeforces' run, 1,150 steps: issue 49's own figure (a 115-step warmup at warmup_ratio 0.1), as this
machine cannot read open-r1/codeforces-verifiable's size. A recipe with max_steps needs none.

Exit status: 0 every current recipe meets the goal; 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grpo_ablate.commands.cli import main  # noqa: E402
from grpo_ablate.config import load_study  # noqa: E402
from grpo_ablate.config.recipes import OPEN_R1_STACK, read_recipe, recipe_stack  # noqa: E402
from grpo_ablate.core.cost import fmt_multiple, parse_share  # noqa: E402
from grpo_ablate.plan.design import MIN_SEEDS, study_resolution  # noqa: E402
from grpo_ablate.plan.price import planned_price  # noqa: E402
from grpo_ablate.study.warmup import trial_end  # noqa: E402

# the training rows of hub datasets the recipes name (see the docstring), and runs known only by their steps
TRAIN_ROWS = {"open-r1/OpenR1-Math-220k": 93_733, "AI-MO/NuminaMath-TIR": 72_441,
              "DigitalLearningGmbH/MATH-lighteval": 7_500}
RUN_STEPS = {"open-r1/codeforces-verifiable": 1_150}
SCREEN_CAP = 0.05


def recipes(every: bool) -> list[Path]:
    found = sorted((ROOT / "tests/fixtures/open-r1").glob("current-*.yaml" if not every else "*.yaml"))
    if every:
        found += sorted((ROOT / "studies/recipes").glob("*.yaml"))
    out = []
    for path in found:
        try:
            values = read_recipe(path).values
        except Exception:  # noqa: BLE001 - a study file, not a recipe
            continue
        if "dataset_name" in values and recipe_stack(values) is OPEN_R1_STACK:
            out.append(path)
    return out


def _init(argv: list[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def size_args(values: dict[str, Any]) -> list[str]:
    if isinstance(values.get("max_steps"), int) and values["max_steps"] > 0:
        return []
    dataset = str(values.get("dataset_name"))
    if dataset in TRAIN_ROWS:
        return ["--full-run-prompts", str(TRAIN_ROWS[dataset])]
    if dataset in RUN_STEPS:
        return ["--full-run-steps", str(RUN_STEPS[dataset])]
    return []


def one(recipe: Path, budget: str, branch: str, tmp: Path) -> dict[str, Any]:
    values = read_recipe(recipe).values
    out = tmp / f"{recipe.stem}-{branch}.yaml"
    argv = ["init", "--from", str(recipe), "--gpus", "8", "--vllm", "server", "--budget", budget, "--out", str(out),
            "--branch-from", branch]
    row: dict[str, Any] = {"recipe": str(recipe.relative_to(ROOT)), "budget": budget, "branch_from": branch}
    given = size_args(values)
    if given:  # without the run's size: refused, naming the flags, nothing written
        code, _, err = _init(argv)
        row["unsized_refused"] = code == 2 and "--full-run-prompts" in err and "--full-run-steps" in err and not out.exists()
    row["run_size"] = " ".join(given) or "the recipe's max_steps"
    code, stdout, err = _init(argv + given)
    row["exit"] = code
    if not out.exists():
        row.update(written=False, said=(err.strip().splitlines() or [""])[-1], goal=False)
        return row
    study = load_study(out)
    price = planned_price(study)
    end = trial_end(study)
    res = study_resolution(study)
    plan_code, plan_out, _ = _init(["plan", str(out)])
    confirm = study.file.screen is None or study.file.screen.confirm
    row.update(
        written=True, confirm=confirm, multiple=list(price.multiple) if price.multiple else None,
        screen=list(price.screen) if price.screen else None, price=price.words(),
        arms=len({c for c in study.generations()}) + (len(study.temperatures()) - 1 if isinstance(study.temperatures(), list) else 0),
        seeds=len(study.study.seeds), steps=study.budget.max_steps, start=study.budget.branch_from or "step 0",
        full_run_steps=end[2] if end else None, warmup=end[1] if end else None, ends_at=end[0] if end else None,
        resolves=res.effect if res else None, span=res.span if res else None,
        plan_states=plan_code == 0 and bool(re.search(r"^Resolves: at \S+ your run this study tells apart", plan_out, re.M)))
    if not confirm:  # what the confirm stage it switched off would cost
        on = planned_price(load_study(out, ["screen.confirm=true"]))
        row["confirm_would_cost"] = list(on.multiple) if on.multiple else None
    cap = parse_share(budget) or float("inf")
    row["goal"] = bool(
        confirm and price.multiple and price.multiple[1] <= cap + 1e-9 and price.screen and price.screen[1] <= SCREEN_CAP
        and study.study.racing is not None and study.study.racing.design == "elimination" and len(study.study.seeds) >= MIN_SEEDS
        and end is not None and end[0] > end[1] and row["plan_states"] and row.get("unsized_refused", True))
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| recipe | run size given | full run (steps) / warmup | design | price (screen) | resolves | goal |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        name = Path(r["recipe"]).stem.replace("current-", "").replace("-grpo-", " ")
        refused = "" if "unsized_refused" not in r else (" (without it: exit 2)" if r["unsized_refused"] else " (NOT refused without it)")
        if not r["written"]:
            lines.append(f"| {name} | {r['run_size']}{refused} | - | not written: {r['said']} | - | - | no |")
            continue
        start = "branched at the warmup" if r["start"] == "warmup" else "from step 0"
        design = (f"{r['arms']} arms x {r['seeds']} seeds x {r['steps']} steps, {start}" if r["confirm"]
                  else f"the screen alone (a confirm stage of {r['seeds']} seeds x {r['steps']} steps {start} would cost "
                       f"{fmt_multiple(*r['confirm_would_cost'])})")
        resolves = f"{r['resolves']:.3g} ({r['resolves'] / r['span']:.1%} of {r['span']:g})" if r["resolves"] else "-"
        lines.append(f"| {name} | {r['run_size']}{refused} | {r['full_run_steps']:,} / {r['warmup']} | {design} | "
                     f"{fmt_multiple(*r['multiple'])} ({fmt_multiple(*r['screen'])}) | {resolves} | "
                     f"{'yes' if r['goal'] else 'no'} |")
    return "\n".join(lines)


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--budget", default="0.5x")
    ap.add_argument("--branch-from", default="auto", choices=["auto", "none", "warmup"])
    ap.add_argument("--all", action="store_true", help="every Open R1 fixture and study recipe, not only the current ones")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one(recipe, args.budget, args.branch_from, Path(tmp)) for recipe in recipes(args.all)]
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    current = [r for r in rows if "/current-" in r["recipe"]]
    return 0 if current and all(r["goal"] for r in current) else 1


if __name__ == "__main__":
    sys.exit(main_())
