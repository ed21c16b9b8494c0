"""`grpo-ablate probe STUDY [--steps 2] [--keep]`: each G's largest generation batch that fits,
from a few real optimizer steps (the measuring is preflight/probe.py's; this prints it).

Exit status: 0 a largest batch was found for some G and no point failed for a reason other than
memory; 1 otherwise (what was measured is still in probe.json); 2 bad input, or a study that
already started (a probe now would change its feasible space).
"""

from __future__ import annotations

import argparse
import sys

from grpo_ablate.core.bounds import flag_value
from grpo_ablate.commands.common import add_study, EXIT_FAILED, EXIT_OK, err, load
from grpo_ablate.config import Problem, StudyError
from grpo_ablate.files.probe_file import probe_table
from grpo_ablate.preflight.probe import failed_points, run_probe
from grpo_ablate.study.owner import check_output_dir, claim_output_dir
from grpo_ablate.study.setup import started_study

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`probe`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("probe", help="each G's largest generation batch that fits, from a few real optimizer steps")
    add_study(p)
    p.add_argument("--steps", type=flag_value("max_steps"), default=2, help="optimizer steps per probed point")
    p.add_argument("--keep", action="store_true", help="keep the probe's trial folders (<output_dir>/probe/)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.steps < 1:
        raise StudyError([Problem(path="--steps", message=f"must be >= 1, got {args.steps}")], args.study)
    study = load(args)
    check_output_dir(study)
    if (started := started_study(study)) is not None:  # refused up front, not after the probe's work
        raise StudyError([Problem(path="study.name", message=(
            f"{started}: a probe now would change its feasible space, and `run` would then refuse the study. "
            "Probe before the study's first `run` or `advise --enqueue`, or probe for a new study.name "
            "(--set study.name=...)"))], args.study)
    claim_output_dir(study)
    probe = run_probe(study, steps=args.steps, keep_trials=args.keep, log=lambda m: print(m, file=sys.stderr))
    print(probe_table(probe))
    if probe.ooms():
        print(f"{len(probe.ooms())} pair(s) ran out of memory: the study's space leaves them out, and every pair "
              "at or above them (see `grpo-ablate plan`)")
    failed = failed_points(probe)
    for p in failed:
        err(f"probe point G={p.num_generations} batch={p.generation_batch_size} {p.outcome}: {p.reason}")
    if failed:
        err(f"{len(failed)} probe point(s) failed for reasons other than memory (above); what was measured is in "
            "probe.json: fix the cause and probe again")
    return EXIT_OK if probe.best() and not failed else EXIT_FAILED
