"""`grpo-ablate smoke STUDY [--dataset SAMPLE] [--steps 2]`: one short CPU trial per arm of any study, before GPU time.

    grpo-ablate smoke study.yaml                              # the study's own data (a local file, or the hub)
    grpo-ablate smoke study.yaml --dataset sample.jsonl       # a local sample of it (no network, or a big dataset)

A study written for a GPU node (a recipe's vLLM server, 8 processes, DeepSpeed, bf16) cannot run on a
laptop as is, and the overrides that make it run are easy to get wrong. This command derives the CPU
variant itself: the built-in tiny model over the study's own prompts (its tokenizer learns their
characters), the study's rewards, chat template and system prompt unchanged, vLLM, multi-process and
accelerate settings off, a batch that fits every arm's G, a few steps, one seed, a small held-out
evaluation when the study has one. It then runs one trial per arm in its own folder
(<output_dir>/smoke, a study of its own: the real study's storage is never touched) and says, per
arm, whether it trained, and why not. It proves the data loads, the prompt column and template are
right, every reward runs on the trainer's real call, and every arm's configuration is accepted; the
model learns nothing useful.

A rerun of an unchanged smoke test reads the finished trials back; once the derived study or its data
changed (the study file, the recipe, a dataset file), the previous smoke study is cleared and every arm
trains again (smoke.json in the smoke folder holds the fingerprint of what it ran).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

from grpo_ablate.commands.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_study, err, load_study, set_value
from grpo_ablate.config import StudyConfig, StudyError
from grpo_ablate.config.names import module_findable
from grpo_ablate.config.recipes.registry import OPEN_R1_MODULE
from grpo_ablate.plan.cells import completions_per_trial, study_plan
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.study.runner import run_study
from grpo_ablate.study.setup import open_study
from grpo_ablate.core.schedule import Schedule
from grpo_ablate.records.trial_record import trial_arm
from grpo_ablate.records.trial_record import reason

__all__ = ["add_parser", "run", "smoke_overrides", "smoke_fingerprint", "SMOKE_STEPS", "FINGERPRINT_FILE"]

FINGERPRINT_FILE = "smoke.json"
_SMOKE_RUN = ("study.journal", "study.journal.lock", "trials", "artifacts")  # what a smoke run writes and a new one clears

SMOKE_STEPS = 2
SMOKE_COMPLETION_TOKENS = 8
SMOKE_EVAL_PROMPTS = 4
MAX_BATCH = 256  # completions per optimizer step on the CPU; beyond it the arms' G values are refused


def _generations(study: StudyConfig) -> list[int]:
    """Every group size an arm of the study generates with (each phase of a schedule included)."""
    out: set[int] = set()
    for cell in study_plan(study) or []:
        g = cell.arm.num_generations
        out.update(int(v) for v in (g.phases if isinstance(g, Schedule) else (g,)))
    return sorted(out) or [2]


def _sample_split(dataset: Path, out: Path, held_out: int) -> tuple[Path, Path]:
    """A local sample as a training file and a held-out file (its last rows), so evaluation has prompts apart."""
    rows = [line for line in dataset.read_text(encoding="utf-8").splitlines() if line.strip()]
    if dataset.suffix != ".jsonl" or len(rows) <= held_out:
        raise ValueError(f"--dataset {dataset}: expected a .jsonl file of more than {held_out} rows")
    out.mkdir(parents=True, exist_ok=True)
    train, held = out / "smoke-train.jsonl", out / "smoke-heldout.jsonl"
    train.write_text("\n".join(rows[:-held_out]) + "\n", encoding="utf-8")
    held.write_text("\n".join(rows[-held_out:]) + "\n", encoding="utf-8")
    return train, held


def smoke_overrides(study: StudyConfig, out: Path, dataset: Path | None = None, steps: int = SMOKE_STEPS) -> list[str]:
    """The `--set` overrides that turn a study into its CPU smoke variant (see the module docstring)."""
    gens = _generations(study)
    batch = math.lcm(*gens)
    if batch > MAX_BATCH:
        raise ValueError(f"the arms' group sizes {gens} need {batch} completions per step (their least common "
                         f"multiple) to run on one process; smoke-test a subset with --set search.num_generations=[...]")
    sets = [
        set_value("study.name", f"{study.study.name}-smoke"), set_value("study.output_dir", str(out)),
        "study.storage=null", f"study.seeds=[{study.study.seeds[0]}]", "study.sampler=ablation",
        "study.workers=1", "study.racing=null", "study.budget_gpu_hours=null", "study.max_retry=0",
        "study.trackers=[]",
        "model.name_or_path=builtin:tiny", "model.dtype=float32", "model.revision=null",
        "model.trust_remote_code=false", "model.attn_implementation=null",
        "hardware.gpus=0", "hardware.num_processes=1", "hardware.accelerate_config=null",
        "hardware.vllm={mode: none}", "hardware.command=auto",
        "trainer.use_vllm=false", "trainer.bf16=false", "trainer.fp16=false", "trainer.gradient_checkpointing=false",
        "trainer.use_liger_kernel=false", f"trainer.max_completion_length={SMOKE_COMPLETION_TOKENS}",
        f"trainer.per_device_train_batch_size={batch}", "trainer.gradient_accumulation_steps=1",
        "trainer.num_iterations=1", f"budget.max_steps={steps}", f"data.max_samples={max(64, 4 * batch)}",
        # a smoke test runs every arm a few steps from step 0: no screen, no branch, inside any warmup on purpose
        "screen=null", "budget.branch_from=null", "budget.allow_inside_warmup=true",
    ]
    if "generation_batch_size" in study.trainer or "steps_per_generation" in study.trainer:
        sets.append("trainer.steps_per_generation=1")
    if study.file.evaluation is not None:
        sets += [f"evaluation.num_prompts={SMOKE_EVAL_PROMPTS}", "evaluation.points=0",
                 f"evaluation.batch_size={SMOKE_EVAL_PROMPTS}", f"evaluation.max_completion_length={SMOKE_COMPLETION_TOKENS}"]
    if dataset is not None:
        held = SMOKE_EVAL_PROMPTS if study.file.evaluation is not None else 0
        train = dataset
        if held:
            train, held_file = _sample_split(dataset, out, held)
            sets += [set_value("evaluation.dataset", str(held_file)), set_value("evaluation.split", "train")]
        sets += [set_value("data.dataset", str(train)), "data.config_name=null", set_value("data.split", "train")]
    return sets


# How to get an external reward's package, by its top-level module (the rest: `pip install <module>`).
OPEN_R1_INSTALL = ("Open R1's package, installed from its repository (in a clone of huggingface/open-r1: "
                   "`pip install -e '.[code]'`; its code rewards also run each completion's tests in a sandbox: "
                   "E2B_API_KEY, or the router the recipe names)")


def missing_rewards(study: StudyConfig) -> list[str]:
    """One line per study reward whose module does not import here, naming the install it needs."""
    out = []
    for reward in study.rewards:
        module, sep, function = reward.name.partition(":")
        if not sep or "/" in module or module_findable(module):
            continue  # a built-in, a module beside the study file (its folder form), or one that imports
        top = module.split(".")[0]
        how = OPEN_R1_INSTALL if module == OPEN_R1_MODULE else f"`pip install {top}` (the package that provides {module})"
        out.append(f"reward {function} ({reward.name}) needs {how}")
    return out


def _file_digest(name: object) -> str | None:
    path = Path(str(name)) if name else None
    if path is None or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def smoke_fingerprint(study: StudyConfig) -> str:
    """What the smoke study runs: its every resolved key and the content of its local data files."""
    files = {key: _file_digest(value) for key, value in (
        ("data", study.data.dataset), ("evaluation", study.file.evaluation.dataset if study.file.evaluation else None))}
    text = json.dumps({"study": study.file.model_dump(mode="json"), "files": files}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _fresh_if_changed(study: StudyConfig) -> bool:
    """Clear the previous smoke run when what it ran differs from `study` (or is unknown); True when cleared."""
    folder = study.output_dir
    marker = folder / FINGERPRINT_FILE
    now = smoke_fingerprint(study)
    try:
        before = json.loads(marker.read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        before = None
    cleared = False
    if before != now and any((folder / name).exists() for name in _SMOKE_RUN):
        for name in _SMOKE_RUN:
            target = folder / name
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        cleared = True
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"fingerprint": now}) + "\n")
    return cleared


def _derived(args: argparse.Namespace) -> tuple[StudyConfig, list[str]]:
    original = load_study(args.study, list(args.sets))
    out = Path(args.out) if args.out else original.output_dir / "smoke"
    dataset = Path(args.dataset).resolve() if args.dataset else None
    sets = list(args.sets) + smoke_overrides(original, out.resolve(), dataset, args.steps)
    return load_study(args.study, sets), sets


def run(args: argparse.Namespace) -> int:
    """Derive the CPU variant, run one trial per arm, and say per arm whether it trained."""
    try:
        study, sets = _derived(args)
    except ValueError as e:
        err(str(e))
        return EXIT_USAGE
    try:
        plan = resolve_plan(study)  # once: the run and the count of arms below read this one
    except StudyError as e:
        err(str(e))
        return EXIT_USAGE
    cells = list(plan.cells)
    missing = missing_rewards(study)
    if missing:  # every trial would fail at its first step on the import: say what to install instead
        print(f"Smoke test of {args.study}: not run, {len(missing)} reward(s) cannot be imported here:")
        for line in missing:
            print(f"  {line}")
        print("Install them and run smoke again, or smoke-test the other rewards with --set 'rewards=[...]'")
        return EXIT_FAILED
    if _fresh_if_changed(study):
        print(f"the study or its data changed since the last smoke test in {study.output_dir}: its trials run again")
    print(f"Smoke test of {args.study}: {len(cells)} arm(s), {args.steps} step(s) each, builtin:tiny on the CPU, "
          f"in {study.output_dir}")
    if args.verbose:
        print("  derived with: " + " ".join(f"--set {s}" for s in sets))
    result = run_study(study, plan, say=lambda m: print(m, flush=True), warn=lambda m: print(m, file=sys.stderr, flush=True))
    if result.refused is not None:
        err(result.refused)
        return EXIT_USAGE
    rows = _outcomes(study)
    failed = [r for r in rows if r["state"] != "COMPLETE"]
    for r in rows:
        print(f"  {r['arm']}: {'trained' if r['state'] == 'COMPLETE' else r['state'].lower()}"
              + (f" ({r['reason']})" if r["reason"] else ""))
    if args.json:
        print(json.dumps(rows))
    if failed or len(rows) < len(cells):
        print(f"Smoke test failed: {len(failed)} of {len(cells)} arm(s) did not train; the reasons are above")
        return EXIT_FAILED
    print(f"Smoke test passed: every arm trained {args.steps} step(s) on the CPU")
    return EXIT_OK


def _outcomes(study: StudyConfig) -> list[dict[str, Any]]:
    """Each trial of the smoke study: its arm, its state and the reason it recorded when it did not finish."""
    ostudy, _ = open_study(study, completions_per_trial(study))
    out = []
    for t in ostudy.get_trials(deepcopy=False):
        arm = trial_arm(t, study.space)
        out.append({"arm": arm.label if arm else json.dumps(t.params, sort_keys=True), "state": t.state.name,
                    "reason": str(reason(t) or "")[:300]})
    return out


def add_parser(sub: Any) -> None:
    """`smoke`'s arguments (commands/cli.py registers it)."""
    p = sub.add_parser("smoke", help="one short CPU trial per arm with the built-in tiny model: the study's data, "
                                     "rewards and every arm's configuration, before GPU time")
    add_study(p)
    p.add_argument("--dataset", help="a local .jsonl sample of the study's data (no network, or a large dataset)")
    p.add_argument("--steps", type=int, default=SMOKE_STEPS, help=f"optimizer steps per trial (default {SMOKE_STEPS})")
    p.add_argument("--out", help="the smoke study's folder (default <output_dir>/smoke)")
    p.add_argument("--json", action="store_true", help="also print each arm's outcome as JSON")
    p.add_argument("--verbose", action="store_true", help="print the --set overrides the CPU variant is made of")
    p.set_defaults(func=run)
