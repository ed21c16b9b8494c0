"""`grpo-ablate report`: the HTML ablation report and its CSV/JSON exports, from the study's storage and files.

    grpo-ablate report studies/tiny-cpu.yaml [--out report.html] [--storage URL]

Written into the study's folder by default (and the dashboard's note with it); with --out elsewhere the
study's folder is only read.
"""

from __future__ import annotations

import argparse
import os

from grpo_ablate.commands.common import EXIT_OK, add_study, check_out, load, set_value
from grpo_ablate.config import Problem, StudyError
from grpo_ablate.config.places import writable_dir_problem
from grpo_ablate.report import write_report
from grpo_ablate.report.publish import say_answer
from grpo_ablate.report.snapshot import writes_into_study
from grpo_ablate.study.owner import check_output_dir

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`report`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("report", help="write the HTML ablation report and CSV/JSON exports")
    add_study(p)
    p.add_argument("--out", help="the HTML file (default <output_dir>/report.html)")
    p.add_argument("--storage", help="read the study from this storage URL")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    extra = [set_value("study.storage", args.storage)] if args.storage else []
    # with --out the study's folder may only be read (a read-only mount): checked as written only if --out lands there
    study = load(args, extra, reads_only=args.out is not None)
    if args.out is None or os.path.abspath(os.path.dirname(args.out) or ".") == os.path.abspath(study.output_dir):
        check_output_dir(study)  # report.html and summary.json of another study would replace the owner's
        if args.out is not None and (problem := writable_dir_problem(study.output_dir)) is not None:
            raise StudyError([Problem(path="study.output_dir", message=f"{problem}; give --out a file elsewhere")],
                             args.study)
    check_out(args.out or study.output_dir / "report.html", "--out")
    paths = write_report(study, out=args.out)
    say_answer(paths)  # the answer run prints, in the report's words, and the report's path
    if not writes_into_study(paths["html"], study.output_dir):
        print(f"Note: {study.output_dir} was only read (the report went elsewhere), so the study's note in the "
              f"dashboard is unchanged; `grpo-ablate report {args.study}` without --out updates it.")
    return EXIT_OK
