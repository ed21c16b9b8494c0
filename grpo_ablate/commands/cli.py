"""The `grpo-ablate` command: one subcommand per job, each returning an exit code.

    grpo-ablate validate studies/tiny-cpu.yaml
    grpo-ablate plan studies/tiny-cpu.yaml [--json]
    grpo-ablate run studies/tiny-cpu.yaml [--workers 2] [--n-trials N] [--storage URL] [--set key=value]
    grpo-ablate run-one studies/tiny-cpu.yaml --set num_generations=4 --set temperature=0.9
    grpo-ablate report studies/tiny-cpu.yaml [--out report.html]
    grpo-ablate compare runs/a/summary.json runs/b/summary.json [--tolerance reward_per_hour=0.1]
    grpo-ablate dashboard studies/tiny-cpu.yaml [--port 8080]
    grpo-ablate init --from RECIPE --gpus N [--vllm server|colocate] [--budget 0.5x] [--out study.yaml] [--force]
    grpo-ablate screen study.yaml                      # before any training: drops the arms it shows dominated
    grpo-ablate probe studies/tiny-cpu.yaml [--steps 2]
    grpo-ablate advise studies/tiny-cpu.yaml [--k 16] [--prompts 64] [--seed 0] [--enqueue]
    grpo-ablate explain [budget.max_steps]
    grpo-ablate schema [--out study.schema.json] [--markdown]

Exit codes (commands/common.py): 0 success, 1 the job ran and failed (or compare found a
regression), 2 bad input (an invalid study, a malformed `--set`, a missing file or unusable path:
one line on stderr), 130 interrupted. Each subcommand is a module of this room (commands/run.py,
validate.py, plan.py, report.py, ...) that registers its own arguments; this module only loops over them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from grpo_ablate import __version__
from grpo_ablate.commands import (advise, compare, dashboard, explain, init, plan, probe, report, run, run_one, schema,
                                  screen, slurm_script, smoke, validate)
from grpo_ablate.commands.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, err
from grpo_ablate.config import StudyError

__all__ = ["main", "build_parser", "COMMANDS"]

# Every subcommand is a module of this room with `add_parser(sub)` (its arguments, `func` set to its `run`) and
# `run(args) -> exit code`; a new command is one module and one entry here. The order is `--help`'s.
COMMANDS = (validate, plan, run, smoke, run_one, report, compare, dashboard, init, screen, probe, advise, explain,
            schema, slurm_script)


def build_parser() -> argparse.ArgumentParser:
    """One subparser per command module, in COMMANDS' order: each module owns its arguments (`add_parser`)."""
    parser = argparse.ArgumentParser(prog="grpo-ablate", description="Decide GRPO's num_generations on real runs.")
    parser.add_argument("--version", action="version", version=f"grpo-ablate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse's refusal (2, its message printed) or --help/--version (0): returned, as below
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except StudyError as e:
        err(str(e))
        return EXIT_USAGE
    except FileNotFoundError as e:
        err(f"file not found: {e.filename or e}")
        return EXIT_USAGE
    except BrokenPipeError:  # `grpo-ablate plan ... | head`: the reader left; nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        if e.filename is None:  # not about a path the user can change: a real failure, with its traceback
            raise
        # a folder or file that cannot be used: read-only file system, no permission, a name too long
        err(f"cannot use {e.filename}: {e.strerror or e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
