"""What `grpo-ablate plan` prints: the hardware arithmetic, feasible pairs, rejections, the plan,
what each trial generates and costs (estimate.estimate_trial), the notes on a translated recipe and what
differs from the recipe's own run; with --commands, a dry run of every arm's command lines and
GRPOConfig arguments.

    grpo-ablate plan studies/tiny-cpu.yaml --json
    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml --commands
"""

from __future__ import annotations

import argparse
import json

from grpo_ablate.commands.common import add_study, EXIT_OK, load
from grpo_ablate.commands.plan_words import commands_text, plan_json, plan_text
from grpo_ablate.preflight.launch_plan import launch_plan

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`plan`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("plan", help="the feasible (num_generations, generation batch) pairs on this hardware")
    add_study(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--commands", action="store_true",
                   help="a dry run: each arm's launch command lines and GRPOConfig arguments, nothing started")
    p.add_argument("--verbose", action="store_true",
                   help="list every TRL field a recipe's TRL and the installed one do not share (one line each otherwise)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate plan` (with --commands: the dry run of every arm's launch)."""
    study = load(args)
    if getattr(args, "commands", False):
        print(json.dumps(launch_plan(study)) if args.json else commands_text(study))
    else:
        print(json.dumps(plan_json(study)) if args.json else plan_text(study, verbose=getattr(args, "verbose", False)))
    return EXIT_OK
