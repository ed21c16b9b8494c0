"""`grpo-ablate validate STUDY [--quick]`: every check a trial start runs, without training; every problem at once.

    grpo-ablate validate study.yaml            # the study file's checks, then each arm's trial start (a child process)
    grpo-ablate validate study.yaml --quick    # the study file's checks only (no torch, under a second)

First the study file (config/validate.py: schema, types as TRL casts them, the feasible space,
the evaluation section, the inputs); then what each arm's trial start runs short of training
(preflight/trial_start.py: the trial's plan, the launcher's refusals, GRPOConfig and the trial's
own checks, the optimizer and scheduler of the first step, vLLM and DeepSpeed where used).
Exit 0 when a trial start would pass, 2 with every problem otherwise. `GRPO_ABLATE_VALIDATE=quick`
in the environment is `--quick` (the test suite sets it: its many validate calls check the file;
tests/test_validate_trial_start.py runs the whole of it).
"""

from __future__ import annotations

import argparse
import os
import sys

from grpo_ablate.commands.common import add_study, EXIT_OK, EXIT_USAGE, err, load
from grpo_ablate.commands.plan_words import limits_json, note_text
from grpo_ablate.config.recipes import RecipeNote
from grpo_ablate.core.errors import StudyError
from grpo_ablate.core.space import FeasibleSpace
from grpo_ablate.preflight.trial_start import trial_start_checks
from grpo_ablate.storage.store import mask_url

__all__ = ["add_parser", "run", "QUICK_ENV", "dropped_generations"]

QUICK_ENV = "GRPO_ABLATE_VALIDATE"  # "quick": the study file's checks only


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`validate`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("validate", help="every check a trial start runs, without training; every problem at once")
    add_study(p)
    p.add_argument("--quick", action="store_true", help="the study file's checks only (no trial-start child process)")
    p.set_defaults(func=run)


def dropped_generations(space: FeasibleSpace) -> dict[str, str]:
    """Each value of search.num_generations that no feasible pair holds, with TRL's reasons (one per batch tried):
    the study runs without it, so `validate` says so instead of a plain OK (`plan` lists every rejected pair)."""
    kept = {str(p.num_generations) for p in space.feasible}
    out: dict[str, list[str]] = {}
    for r in space.rejected:
        g = str(r.num_generations)
        if g not in kept and r.reason not in out.setdefault(g, []):
            out[g].append(r.reason)
    return {g: "; ".join(reasons) for g, reasons in out.items()}


def run(args: argparse.Namespace) -> int:
    study = load(args)
    for w in study.warnings:
        print(f"{'note' if isinstance(w, RecipeNote) else 'warning'}: {note_text(w)}", file=sys.stderr)
    for g, why in dropped_generations(study.space).items():  # asked for, but no feasible pair holds it
        print(f"warning: search.num_generations {g} is dropped: {why}", file=sys.stderr)
    if (late := limits_json(study)["timeout_warning"]) is not None:  # a timeout below the per-trial estimate
        print(f"warning: {late}", file=sys.stderr)
    quick = args.quick or os.environ.get(QUICK_ENV) == "quick"
    checked = "the study file" if quick else "the study file and each arm's trial start"
    if not quick:
        try:
            report = trial_start_checks(study)
        except (RuntimeError, OSError) as e:
            err(f"{e}; `--quick` checks the study file alone")
            return EXIT_USAGE
        for note in report.notes:
            print(f"note: {note}", file=sys.stderr)
        if report.problems:
            raise StudyError(report.problems, args.study)  # the command's refusal: every problem, exit 2
    n = len(study.space.feasible)
    print(f"OK: {args.study} (study {study.study.name!r}, {n} feasible pair(s), sampler {study.sampler_kind}, "
          f"storage {mask_url(study.storage_url)}; checked {checked})")
    return EXIT_OK
