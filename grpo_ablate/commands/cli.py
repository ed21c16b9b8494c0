"""The `grpo-ablate` command: one subcommand per job, each returning an exit code.

    grpo-ablate validate studies/tiny-cpu.yaml
    grpo-ablate plan studies/tiny-cpu.yaml [--json]
    grpo-ablate run studies/tiny-cpu.yaml [--workers 2] [--n-trials N] [--storage URL] [--set key=value]
    grpo-ablate run-one studies/tiny-cpu.yaml --set num_generations=4 --set temperature=0.9
    grpo-ablate report studies/tiny-cpu.yaml [--out report.html]
    grpo-ablate compare runs/a/summary.json runs/b/summary.json [--tolerance reward_per_hour=0.1]
    grpo-ablate dashboard studies/tiny-cpu.yaml [--port 8080]
    grpo-ablate init --from RECIPE --gpus N [--vllm server|colocate] [--budget 0.5x] [--out study.yaml] [--force]
    grpo-ablate probe studies/tiny-cpu.yaml [--steps 2]
    grpo-ablate advise studies/tiny-cpu.yaml [--k 16] [--prompts 64] [--seed 0] [--enqueue]
    grpo-ablate explain [budget.max_steps]
    grpo-ablate schema [--out study.schema.json] [--markdown]

Exit codes (commands/common.py): 0 success, 1 the job ran and failed (or compare found a
regression), 2 bad input (an invalid study, a malformed `--set`, a missing file or unusable path:
one line on stderr), 130 interrupted. Each subcommand's work is in its own module of this room
(commands/run.py, validate.py, plan.py, ...); the small one, report, is here.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from grpo_ablate import __version__
from grpo_ablate.commands import (advise, compare, dashboard, explain, init, plan, probe, run, run_one, schema,
                                  slurm_script, smoke, validate)
from grpo_ablate.commands.common import (EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, add_study, check_out, err, load,
                                         set_value)
from grpo_ablate.config import StudyError
from grpo_ablate.report import write_report
from grpo_ablate.report.publish import say_answer
from grpo_ablate.report.snapshot import writes_into_study
from grpo_ablate.study.owner import check_output_dir

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-ablate", description="Decide GRPO's num_generations on real runs.")
    parser.add_argument("--version", action="version", version=f"grpo-ablate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="every check a trial start runs, without training; every problem at once")
    add_study(p)
    p.add_argument("--quick", action="store_true", help="the study file's checks only (no trial-start child process)")
    p.set_defaults(func=validate.run)

    p = sub.add_parser("plan", help="the feasible (num_generations, generation batch) pairs on this hardware")
    add_study(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--commands", action="store_true",
                   help="a dry run: each arm's launch command lines and GRPOConfig arguments, nothing started")
    p.set_defaults(func=plan.run)

    p = sub.add_parser("run", help="run (or resume) the Optuna study of real GRPO trials, then write the report")
    add_study(p)
    p.add_argument("--n-trials", type=int, help="total trials of the study (finished ones count)")
    p.add_argument("--workers", type=int, help="parallel trial processes on this machine")
    p.add_argument("--storage", help="Optuna storage URL (e.g. postgresql://user@host/db) shared by many machines")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report at the end")
    p.add_argument("--warm-start", metavar="OTHER_STUDY",
                   help="seed a new study from a finished one: its study file, or its name (see --warm-start-storage)")
    p.add_argument("--warm-start-storage", metavar="URL",
                   help="the storage of --warm-start given as a name (default: this study's storage)")
    p.set_defaults(func=run.run)

    smoke.add_parser(sub)

    p = sub.add_parser("run-one", help="one trial without Optuna, e.g. --set num_generations=4")
    add_study(p)
    p.add_argument("--trial-dir", help="where the trial writes (default <output_dir>/run-one/<date-time>)")
    p.set_defaults(func=run_one.run)

    p = sub.add_parser("report", help="write the HTML ablation report and CSV/JSON exports")
    add_study(p)
    p.add_argument("--out", help="the HTML file (default <output_dir>/report.html)")
    p.add_argument("--storage", help="read the study from this storage URL")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="deltas between two studies; non-zero exit on a regression")
    p.add_argument("a", help="the accepted baseline: a summary.json, a run folder or a study file")
    p.add_argument("b", help="the candidate: a summary.json, a run folder or a study file")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=FRACTION",
                   help="allowed relative worsening, e.g. reward_per_hour=0.1; repeatable")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--allow-different", action="store_true",
                   help="compare two studies that differ in name, objectives or search space (refused otherwise)")
    p.set_defaults(func=compare.run)

    p = sub.add_parser("dashboard", help="optuna-dashboard on the study's storage and artifacts")
    add_study(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--storage", help="read the study from this storage URL")
    p.set_defaults(func=dashboard.run)

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
    p.add_argument("--name", help="the study name (default from the recipe and the hardware)")
    p.add_argument("--out", default="study.yaml", help="the study file to write (default study.yaml)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--budget", help="the study's price as a share of the full run, e.g. 0.5x (default 0.5x where the "
                                    "full run can be priced); none: the design that can decide, at its price")
    p.add_argument("--full-run-prompts", type=int, help="the training set's rows, for a recipe that counts epochs: "
                                                        "prices the study in units of the full run")
    p.add_argument("--min-effect", type=float, help="the smallest held-out reward difference worth acting on "
                                                    "(default 0.05 of the reward's range): sizes the seeds")
    p.add_argument("--branch-from", choices=["warmup", "none"], default="none",
                   help="none (default): every trial from step 0; warmup (where the recipe has one): per seed the "
                        "baseline trains once to the end of warmup and every arm branches from there, which is "
                        "cheaper but measured to change which G is best (README, 'Does branching change the answer?')")
    p.set_defaults(func=init.run)
    p = sub.add_parser("probe", help="each G's largest generation batch that fits, from a few real optimizer steps")
    add_study(p)
    p.add_argument("--steps", type=int, default=2, help="optimizer steps per probed point")
    p.add_argument("--keep", action="store_true", help="keep the probe's trial folders (<output_dir>/probe/)")
    p.set_defaults(func=probe.run)

    p = sub.add_parser("advise", help="predict which G pays off from samples of the starting model (no training)")
    add_study(p)
    p.add_argument("--k", type=int, default=16, help="completions sampled per prompt (>= 2)")
    p.add_argument("--prompts", type=int, default=64, help="training prompts sampled")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, action="append", help="a candidate temperature (default: the study's)")
    p.add_argument("--enqueue", action="store_true", help="seed the study with the shortlist, best first")
    p.set_defaults(func=advise.run)

    explain.add_parser(sub)
    schema.add_parser(sub)
    p = sub.add_parser("slurm-script", help="the SLURM array script with a resource header fitting this study")
    add_study(p)
    p.add_argument("--workers", type=int, help="trials side by side in each array task (default study.workers)")
    p.add_argument("--cpus-per-task", type=int, help="CPUs per task (default: the whole node on GPUs, else one per process)")
    p.add_argument("--time", default="24:00:00", help="the task's time limit (default 24:00:00)")
    p.add_argument("--partition", help="the SLURM partition")
    p.set_defaults(func=slurm_script.run)
    return parser



def cmd_report(args: argparse.Namespace) -> int:
    extra = [set_value("study.storage", args.storage)] if args.storage else []
    study = load(args, extra)
    if args.out is None or os.path.abspath(os.path.dirname(args.out) or ".") == os.path.abspath(study.output_dir):
        check_output_dir(study)  # report.html and summary.json of another study would replace the owner's
    check_out(args.out or study.output_dir / "report.html", "--out")
    paths = write_report(study, out=args.out)
    say_answer(paths)  # the answer run prints, in the report's words, and the report's path
    if not writes_into_study(paths["html"], study.output_dir):
        print(f"Note: {study.output_dir} was only read (the report went elsewhere), so the study's note in the "
              f"dashboard is unchanged; `grpo-ablate report {args.study}` without --out updates it.")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
