"""`grpo-ablate screen STUDY`: the study's screen, before any training (preflight/screen.py); `run` starts with it.

    grpo-ablate screen study.yaml

Probes the study's arms on this hardware, samples its training prompts with the starting model over the screen's
range of G, and drops the arms it shows dominated, each with its reason (screen.json); prints the table. Exit
status: 0 the screen ran; 2 bad input: a study without a `screen:` section, or one that already started (the
probe would change its feasible space under it).
"""

from __future__ import annotations

import argparse
import sys

from grpo_ablate.commands.common import EXIT_OK, add_study, load
from grpo_ablate.config import Problem, StudyConfig, StudyError
from grpo_ablate.files.screen_file import Screen
from grpo_ablate.preflight.screen import run_screen, screen_text
from grpo_ablate.study.owner import check_output_dir, claim_output_dir
from grpo_ablate.study.setup import started_study

__all__ = ["add_parser", "run", "screen_study"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`screen`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("screen", help="the study's screen before any training: drops the arms it shows dominated")
    add_study(p)
    p.set_defaults(func=run)


def screen_study(study: StudyConfig, source: str) -> Screen:
    """Run the study's screen where it may run (a `screen:` section, a study not yet started). StudyError else."""
    if study.file.screen is None:
        raise StudyError([Problem(path="screen", message=(
            "the study has no screen: section; add `screen: {}` (the defaults) to screen its arms before training"))],
            source)
    check_output_dir(study)
    if (started := started_study(study)) is not None:
        raise StudyError([Problem(path="screen", message=(
            f"{started}: the screen's probe would change its feasible space under it; screen before the study's "
            "first `run`, or screen a new study.name (--set study.name=...)"))], source)
    claim_output_dir(study)
    return run_screen(study, log=lambda m: print(m, file=sys.stderr, flush=True))


def run(args: argparse.Namespace) -> int:
    print(screen_text(screen_study(load(args), args.study)))
    return EXIT_OK
