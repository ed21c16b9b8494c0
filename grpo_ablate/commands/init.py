"""`grpo-ablate init`: a commented study file from a recipe (or a few answers), validated, priced, then planned.

    grpo-ablate init --from recipes/config_demo.yaml --gpus 8 --vllm server --full-run-prompts 93733 --out study.yaml
    grpo-ablate init --task addition --full-run-steps 500 --out tiny.yaml    # no recipe: flags, or questions on a TTY

The study is written in two stages, sized to a budget (`--budget`, default half the full run):
- a screen that costs no training (`screen:`, preflight/screen.py): advise on the recipe's own prompts with the
  starting model over every feasible G from 2 to 64, and a probe of the study's arms on its hardware; arms it
  shows dominated leave before training, each with its reason;
- a confirm stage: 2-4 arms that span G values that matter (the recipe's G, about half and about twice it, not
  its neighbours; a second temperature where the recipe leaves its temperature to a default), trained past the
  recipe's learning-rate warmup with the seeds the budget buys (at least 3), the race on (Kim & Nelson
  elimination). Its design (plan/design.py) states what it resolves at its price.
Every trial starts from step 0 where a deciding design fits that way (the answer is about the run); else the
arms branch at the end of the warmup (budget.branch_from: warmup: one prefix per seed, counted once; the answer
is about G from the branch step on: docs/your-own-run.md gives what that changed on the CPU benchmark);
`--branch-from none|warmup` forces one. Where no deciding confirm stage fits, the study is the screen alone and
says what the confirm stage would cost.

Pricing needs the full run's size: the recipe's max_steps, the rows of a local dataset (or the `datasets` cache's
record of a hub one), `--full-run-prompts N` or `--full-run-steps N`; without it init exits 2 naming the flags,
unless `--unpriced`. Paths in the file are relative to it (a bundled accelerate config is copied beside it); the
study is named after the recipe, its model and the hardware. The file is checked before it is written, an
existing file is only replaced with --force, and the recipe or dataset init reads is never replaced, however
--out spells it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from grpo_ablate.commands.common import EXIT_OK, check_out, load_study
from grpo_ablate.commands.plan_words import plan_text
from grpo_ablate.config.recipes import read_recipe, recipe_stack
from grpo_ablate.core.errors import Problem, StudyError
from grpo_ablate.plan.design import resolution_line
from grpo_ablate.plan.draft import BRANCH_CHOICES, InitAnswers, accelerate_config, fit_design, study_text
from grpo_ablate.plan.price import planned_price
from grpo_ablate.trl_facts.releases import known_releases
from grpo_ablate.core.vocab import BUILTIN_TASKS

__all__ = ["add_parser", "run", "write_study", "ask_missing"]


def _input_at(a: InitAnswers, out: Path) -> str | None:
    """Which of init's inputs `out` is ("recipe (--from)", "dataset (--dataset)"), however it is spelled: the
    same file by device and inode, so `sub/../recipe.yaml`, a symlink or a hard link to it all count."""
    inputs = [(a.recipe, "recipe (--from)"), (Path(a.dataset) if a.dataset else None, "dataset (--dataset)")]
    for path, what in inputs:
        if path is None:
            continue
        try:
            if os.path.samefile(out, path):
                return what
        except OSError:  # either does not exist (yet): not the same file
            continue
    return None


def write_study(a: InitAnswers, out: Path, *, force: bool = False) -> Path:
    """Validate the study text, then write it (never over an existing file without force, never over an input
    file even with it). Raises StudyError."""
    if (given := _input_at(a, out)) is not None:  # before --force: an input is never replaced, forced or not
        raise StudyError([Problem(path="--out", message=(
            f"{out} is the {given} init reads, and init never writes over its input; name another file with --out"))])
    if out.exists() and not force:
        raise StudyError([Problem(path="--out", message=f"{out} exists; pass --force to replace it")])
    if a.recipe is not None:
        a.recipe_values = read_recipe(a.recipe).values
    tmp = ""
    copied: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        text = study_text(a, out, fit_design(a, out))  # StudyError: no full-run size, or nothing fits the budget
        copied = _copy_accelerate(a, out, force)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            load_study(tmp)  # StudyError: nothing is written
        except StudyError as e:  # name the file the user asked for, not the temporary one
            raise StudyError(e.problems, str(out)) from None
        os.replace(tmp, out)
        copied = None  # written: the copy stays with it
    except StudyError as e:  # the user knows the file as --out, not as our temporary name
        raise StudyError([Problem(path=p.path, message=p.message.replace(tmp, str(out)) if tmp else p.message)
                          for p in e.problems], str(out)) from None
    except OSError as e:
        raise StudyError([Problem(path="--out", message=f"cannot write {out}: {e.strerror or e}")]) from None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        if copied is not None:  # the study was not written: neither is the accelerate config copied for it
            copied.unlink(missing_ok=True)
    return out


def _copy_accelerate(a: InitAnswers, out: Path, force: bool) -> Path | None:
    """Copy a bundled accelerate config beside the study (accelerate/<stage>.yaml), so the file names no path in
    this package's checkout; a file already there is kept when it is the same, replaced only with --force. The
    path it wrote (to remove if the study is not written after all), None when nothing was copied."""
    acc = accelerate_config(a, out)
    if acc is None or not acc.copy:
        return None
    target = out.parent / acc.written
    body = acc.source.read_bytes()
    if target.exists():
        if target.read_bytes() == body:
            return None
        if not force:
            raise StudyError([Problem(path="--out", message=(
                f"{target} exists and differs from the accelerate config init would copy there ({acc.source}); "
                "pass --force to replace it, or write the study elsewhere"))])
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(body)
    os.replace(tmp, target)
    return target


def ask_missing(a: InitAnswers, ask: Callable[[str], str] = input, interactive: bool | None = None) -> InitAnswers:
    """Without a recipe: fill what is missing by asking (on a TTY), else StudyError naming the flags."""
    if a.recipe is not None:
        if a.recipe_trl is None and recipe_stack(read_recipe(a.recipe).values) is None and (
                sys.stdin.isatty() if interactive is None else interactive):
            answer = ask(f"TRL version this recipe was written for (its keys left out mean that release's defaults; "
                         f"known: {', '.join(known_releases())}) [the installed one]: ").strip()
            a.recipe_trl = answer or None
        return a
    if a.task is not None or (a.model and a.dataset):
        return a
    if not (sys.stdin.isatty() if interactive is None else interactive):
        raise StudyError([Problem(path="init", message=(
            "give --from RECIPE, or --model and --dataset (or --task NAME for a built-in task), and --gpus N"))])
    if not a.model:
        a.model = ask("Model (hub id or local folder; builtin:tiny with a built-in task): ").strip() or "builtin:tiny"
    if not a.dataset and not a.task:
        tasks = ", ".join(sorted(BUILTIN_TASKS))
        answer = ask(f"Dataset (hub id or file), or a built-in task ({tasks}): ").strip()
        if answer in BUILTIN_TASKS:
            a.task = answer
        else:
            a.dataset = answer
    if not a.gpus:
        answer = ask("GPUs per trial [0]: ").strip()
        a.gpus = int(answer) if answer.isdigit() else 0
        if a.gpus > 1 and a.vllm == "none":
            a.vllm = (ask("vLLM: none, colocate or server [none]: ").strip() or "none")
    return a


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`init`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("init", help="write a commented study file from a recipe (or a few answers), then plan it")
    p.add_argument("--from", dest="recipe", help="an Open R1 or `trl grpo` recipe file, used as published")
    p.add_argument("--recipe-trl", metavar="VERSION", help="the TRL release a `trl grpo` recipe was written for "
                                                            "(its implicit keys take that release's defaults; asked when unknown)")
    p.add_argument("--gpus", type=int, help="GPUs per trial (0: CPU)")
    p.add_argument("--vllm", choices=["none", "server", "colocate"], default="none",
                   help="vLLM generation: server takes one GPU of each trial's block")
    p.add_argument("--model", help="without --from: a hub id or local folder")
    p.add_argument("--dataset", help="without --from: a hub id or a data file")
    p.add_argument("--task", help="without --from: a built-in offline task instead of a dataset")
    p.add_argument("--name", help="the study name (default: the recipe, its model and the hardware)")
    p.add_argument("--out", default="study.yaml", help="the study file to write (default study.yaml)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--budget", help="the study's price as a share of the full run, e.g. 0.5x (the default); none: "
                                    "the design that decides at min_effect, at its price")
    p.add_argument("--full-run-prompts", type=int, metavar="N",
                   help="the training set's rows, for a recipe that counts epochs over a dataset this machine cannot "
                        "read: prices the study in units of the full run")
    p.add_argument("--full-run-steps", type=int, metavar="N",
                   help="the full run's optimizer steps: prices the study in units of it")
    p.add_argument("--unpriced", action="store_true",
                   help="write the study although the full run's size is not known (no price, no budget)")
    p.add_argument("--min-effect", type=float, help="the smallest held-out reward difference worth acting on "
                                                    "(default 0.05 of the reward's range): sizes the seeds")
    p.add_argument("--branch-from", choices=sorted(BRANCH_CHOICES), default="auto",
                   help="auto (default): every trial from step 0 where a deciding design fits that way, else the arms "
                        "branch at the end of the warmup; none: always from step 0; warmup: always branched (per seed "
                        "the baseline trains once to the end of warmup, counted once). Branching was measured to change "
                        "which G is best on the CPU benchmark (docs/your-own-run.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate init`: write the study file, then print its price, what it resolves, and its plan."""
    check_out(args.out, "--out")
    for flag in ("full_run_prompts", "full_run_steps"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise StudyError([Problem(path=f"--{flag.replace('_', '-')}", message=f"must be >= 1, got {value}")])
    answers = InitAnswers(recipe=Path(args.recipe) if args.recipe else None, model=args.model, dataset=args.dataset,
                          task=args.task, gpus=args.gpus or 0, vllm=args.vllm, name=args.name,
                          recipe_trl=getattr(args, "recipe_trl", None),
                          budget=getattr(args, "budget", None), full_run_prompts=getattr(args, "full_run_prompts", None),
                          full_run_steps=getattr(args, "full_run_steps", None),
                          unpriced=bool(getattr(args, "unpriced", False)),
                          min_effect=getattr(args, "min_effect", None),
                          branch=getattr(args, "branch_from", "auto"))
    out = write_study(ask_missing(answers), Path(args.out), force=args.force)
    study = load_study(out)
    price = planned_price(study)
    print(f"wrote {out}: {price.words()}")  # the figure plan prints below (with what it resolves), from the same call
    if resolution_line(study, price.multiple) is None:
        print("Resolves: nothing: the study is the screen alone, which predicts and does not decide")
    print()
    print(plan_text(study))
    return EXIT_OK
