"""What every subcommand shares: the exit codes, the study argument, loading it, and the checks
made on the command line before any work.

Exit codes: 0 success, 1 the job ran and failed (or compare found a regression), 2 bad input
(an invalid study, a malformed `--set`, a missing file or unusable path: one line on stderr),
130 interrupted.

Every command loads a study file through this module's `load_study` (config's, then the launcher
registry's check of the names in `hardware.launcher` and GRPO_ABLATE_LAUNCHER: config sits below
launch and cannot see the registry; and study/warmup.py's refusal of trials that end inside their
run's learning-rate warmup, which may need the dataset's size), and documents the keys with
`key_choices`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from grpo_ablate.config import Problem, StudyConfig, StudyError, apply_overrides
from grpo_ablate.config import load_study as load_study_file
from grpo_ablate.config.keys import Choices
from grpo_ablate.config.places import writable_dir_problem
from grpo_ablate.launch.registry import launcher_choices, launcher_problems
from grpo_ablate.plan.price import resolve_budget
from grpo_ablate.study.warmup import inside_warmup

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "add_study", "load", "load_study", "key_choices",
           "set_value", "check_sets", "check_out", "err"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_study(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help="the study file (YAML)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a study key (dotted path, e.g. study.n_trials=4; bare GRPOConfig keys go to trainer, "
                        "num_generations/temperature/generation_batch_size to search); repeatable")


def load_study(path: "str | os.PathLike[str]", overrides: list[str] | None = None, *, reads_only: bool = False) -> StudyConfig:
    """config's load_study, and the launcher names checked against the registry: StudyError (exit 2) with every problem.

    When the file itself is invalid, a bad GRPO_ABLATE_LAUNCHER is reported with its problems, as one list."""
    try:
        study = load_study_file(path, overrides, reads_only=reads_only)
    except StudyError as e:
        env = launcher_problems(None)
        if env:
            raise StudyError([*e.problems, *env], e.source) from None
        raise
    problems = launcher_problems(study)
    if (warm := inside_warmup(study)) is not None:  # the full run's length may need the dataset: not config's check
        problems.append(warm)
    if problems:
        raise StudyError(problems, str(path))
    return study


def key_choices() -> Choices:
    """The allowed values the schema cannot hold, for `explain`, `schema` and the key table of docs/study-file.md (config/keys.py)."""
    return {"hardware.launcher": launcher_choices()}


def load(args: argparse.Namespace, extra: Sequence[str] = (), *, reads_only: bool = False) -> StudyConfig:
    """The study with `--set`s applied; a budget written as a share of the full run ("0.5x") in GPU-hours.
    `reads_only`: the command writes nothing into the study's folder (config.load_study)."""
    study = load_study(args.study, list(args.sets) + list(extra), reads_only=reads_only)
    resolve_budget(study)
    return study


def set_value(key: str, value: str) -> str:
    """An override from a command-line option, quoted so YAML keeps it a string (URLs hold `#`, `: `)."""
    return f"{key}={json.dumps(value)}"


def check_sets(args: argparse.Namespace) -> None:
    """Every `--set` parses, before any command acts on one (run-one splits them itself)."""
    try:
        apply_overrides({}, list(args.sets))
    except ValueError as e:
        raise StudyError([Problem(path="--set", message=str(e))], args.study) from None


def check_out(out: "str | os.PathLike[str]", flag: str) -> None:
    """Refuse an output file whose folder cannot be written, before any work (one line, exit 2)."""
    path = Path(out)
    problem = writable_dir_problem(path.parent) if not path.is_dir() else f"{path} is a folder; name a file"
    if problem:
        raise StudyError([Problem(path=flag, message=f"cannot write {path}: {problem}")])


def err(msg: str) -> None:
    print(f"grpo-ablate: {msg}", file=sys.stderr)
