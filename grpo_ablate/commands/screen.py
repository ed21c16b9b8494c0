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
from grpo_ablate.preflight.screen import screen_before_training, screen_text

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`screen`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("screen", help="the study's screen before any training: drops the arms it shows dominated")
    add_study(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(screen_text(screen_before_training(load(args), args.study, log=_stderr)))
    return EXIT_OK


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
