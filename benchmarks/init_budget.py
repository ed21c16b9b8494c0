"""Does `init` write a study that costs at most half the run it tunes, and can decide? One line per recipe.

    python benchmarks/init_budget.py                 # every Open R1 recipe fixture, 8 GPUs, vLLM server
    python benchmarks/init_budget.py --budget 1x --json

For each Open R1 recipe in tests/fixtures/open-r1 and studies/recipes, runs the real command
`grpo-ablate init --from RECIPE --gpus 8 --vllm server --budget B --out TMP/study.yaml` (in this
process, through the CLI's own entry point, offline), then, where a study was written, prices it
the way `grpo-ablate plan` does (study/price.planned_price: where the arms branch past the recipe's
warmup, one shared prefix per seed counted once) and checks that its design can decide: the
group-sequential race is on and its planned maximum (the seeds list) reaches the seeds Bechhofer's
design needs for its arms at the study's min_effect (stats/selection.bechhofer_seeds, sd as init
assumes it). A recipe passes when init wrote such a study at <= the budget, or refused saying so
(exit 2, nothing written). Where it refused naming a --min-effect at which a design fits, that is
tried too (the `with --min-effect` column): it passes when init then writes a study within the
budget that can decide at that min_effect. The `from step 0` line is the same init with
--branch-from none (every trial from step 0, trained past warmup): what branching saves.

A recipe whose length is in epochs needs the training set's size, which this machine cannot read
offline: the rows given below are the published splits' (NuminaMath-TIR train 72,441, as
tests/test_fidelity.py uses; MATH-lighteval train 7,500, the MATH benchmark's training split); a
dataset not listed is priced "unknown", and init says what would fix it.

Exit status: 0 every recipe passes; 1 one wrote a study over budget or one that cannot decide.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grpo_ablate.commands.cli import main  # noqa: E402
import re  # noqa: E402

from grpo_ablate.commands.init import (MIN_STEPS_PAST_WARMUP as MIN_STEPS, SEED_SD_SHARE, RACE_CONFIDENCE,  # noqa: E402
                                       InitAnswers, reward_range)
from grpo_ablate.config import load_study  # noqa: E402
from grpo_ablate.config.recipes import read_recipe, recipe_stack, OPEN_R1_STACK  # noqa: E402
from grpo_ablate.cost import parse_share  # noqa: E402
from grpo_ablate.estimate import estimate_trial  # noqa: E402
from grpo_ablate.stats.selection import bechhofer_seeds  # noqa: E402
from grpo_ablate.study.price import planned_price  # noqa: E402

# training rows of the datasets the recipes name (see the docstring); others stay unknown
TRAIN_ROWS = {"AI-MO/NuminaMath-TIR": 72_441, "DigitalLearningGmbH/MATH-lighteval": 7_500}


def recipes() -> list[Path]:
    found = sorted((ROOT / "tests/fixtures/open-r1").glob("*.yaml")) + sorted((ROOT / "studies/recipes").glob("*.yaml"))
    out = []
    for path in found:
        try:
            values = read_recipe(path).values
        except Exception:  # noqa: BLE001 - a study file, not a recipe
            continue
        if "dataset_name" in values and recipe_stack(values) is OPEN_R1_STACK:
            out.append(path)
    return out


def one(recipe: Path, budget: str, tmp: Path, min_effect: str | None = None, scratch: bool = False) -> dict[str, Any]:
    values = read_recipe(recipe).values
    out = tmp / f"{recipe.stem}{'-effect' if min_effect else ''}{'-scratch' if scratch else ''}.yaml"
    argv = ["init", "--from", str(recipe), "--gpus", "8", "--vllm", "server", "--budget", budget, "--out", str(out)]
    argv += ["--min-effect", min_effect] if min_effect else []
    argv += ["--branch-from", "none" if scratch else "warmup"]  # both explicit: the figures do not follow init's default
    rows = TRAIN_ROWS.get(str(values.get("dataset_name")))
    if rows and not (isinstance(values.get("max_steps"), int) and values["max_steps"] > 0):
        argv += ["--full-run-prompts", str(rows)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    row: dict[str, Any] = {"recipe": str(recipe.relative_to(ROOT)), "exit": code, "written": out.exists()}
    if not out.exists():
        row["said"] = stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else ""
        row["pass"] = code == 2
        row["full_run_steps"] = _full_run_steps(recipe, rows, tmp)
        need = re.search(r"pass --budget (\S+) to write it", row["said"])
        effect = re.search(r"--min-effect (\S+) \(", row["said"])
        row["needs_budget"], row["needs_min_effect"] = (need.group(1) if need else None), (effect.group(1) if effect else None)
        if effect and not min_effect and not scratch:
            row["with_min_effect"] = one(recipe, budget, tmp, effect.group(1))
        return row
    study = load_study(out)
    est = estimate_trial(study)
    price = planned_price(study, est)
    k = len(study.generations())
    span = reward_range(InitAnswers(recipe=recipe, recipe_values=values))
    effect = study.study.min_effect if study.study.min_effect is not None else 0.05 * span
    need = bechhofer_seeds(k, effect, SEED_SD_SHARE * span, RACE_CONFIDENCE)
    decides = (study.study.racing is not None and study.study.racing.design == "group_sequential"
               and len(study.study.seeds) >= need)
    within = price.multiple is not None and price.multiple[1] <= (parse_share(budget) or 0) + 1e-9
    row.update(price=price.words(), multiple=list(price.multiple) if price.multiple else None, arms=k,
               min_effect=effect, branch_from=study.budget.branch_from,
               seeds=len(study.study.seeds), bechhofer_seeds=need, steps=study.budget.max_steps,
               full_run_steps=est.full_run_steps, can_decide=decides, within_budget=within, **{"pass": decides and within})
    return row


def _full_run_steps(recipe: Path, rows: int | None, tmp: Path) -> int | None:
    """The recipe's full run in optimizer steps on this hardware (what init priced against), from a minimal study."""
    path = tmp / f"{recipe.stem}-full.yaml"
    full = f", full_run: {{prompts: {rows}}}" if rows else ""
    path.write_text(f"study: {{name: full, sampler: ablation, output_dir: {tmp / 'full'}}}\ntrainer_from: {recipe}\n"
                    f"hardware: {{gpus: 8, vllm: {{mode: server}}}}\nbudget: {{max_steps: 10{full}}}\n")
    return estimate_trial(load_study(path)).full_run_steps


def line(r: dict[str, Any]) -> str:
    name = Path(r["recipe"]).name
    if not r["written"]:
        head = (f"{'PASS' if r['pass'] else 'FAIL'}  {name} (full run {r['full_run_steps'] or 'unknown'} steps): not written "
                f"(exit {r['exit']}): {r['said'].split('--budget: ', 1)[-1]}")
        alt = r.get("with_min_effect")
        return head + (f"\n      with --min-effect {r['needs_min_effect']}: {line(alt).strip()}" if alt else "") + _scratch(r)
    branch = f", branched at the {r['branch_from']} end" if r.get("branch_from") else ""
    return (f"{'PASS' if r['pass'] else 'FAIL'}  {name}: {r['arms']} arms x {r['seeds']} seeds (Bechhofer needs "
            f"{r['bechhofer_seeds']} at min_effect {r['min_effect']:g}) x {r['steps']} of {r['full_run_steps']} steps"
            f"{branch}, raced: {r['price']}") + _scratch(r)


def _scratch(r: dict[str, Any]) -> str:
    s = r.get("from_scratch")
    if not s:
        return ""
    said = re.search(r"the smallest \((.*?), the fewest.*?\) costs at most (\S+) your run", s.get("said", ""))
    what = (f"smallest {said.group(1)} x {MIN_STEPS} steps past warmup costs at most {said.group(2)}" if said else
            f"{s['arms']} arms x {s['seeds']} seeds x {s['steps']} steps, {s['price']}" if s["written"] else s["said"])
    return f"\n      from step 0 (--branch-from none): {what}"


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="0.5x")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for recipe in recipes():
            row = one(recipe, args.budget, Path(tmp))
            if row.get("branch_from") or "branched at" in row.get("said", ""):  # what branching saves
                row["from_scratch"] = one(recipe, args.budget, Path(tmp), scratch=True)
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(line(r))
    return 0 if all(r["pass"] and r.get("with_min_effect", {"pass": True})["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main_())
