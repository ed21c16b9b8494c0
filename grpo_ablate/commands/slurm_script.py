"""`grpo-ablate slurm-script STUDY [--workers N] [--cpus-per-task N] [--time T] [--partition P]`: the array script for this study.

Prints the array script (grpo-ablate-array.sbatch beside this module, package data, so an installed
grpo-ablate has it; sweeps/slurm/ links to it in a checkout) with a resource header that fits the study: GPUs
for `workers` trials side by side (hardware.gpus, else the world size, per trial; none for a CPU
study), the CPUs, the time limit and the early SIGTERM. The time limit defaults to one trial's timeout
(study.trial_timeout, `auto` resolved from the estimate as `run` resolves it) plus the trial's stop grace and
the script's 5-minute early warning, so a task never ends inside the trial it started; `--time` sets another.
The shipped script's header asks for one
whole 8-GPU node (the Open R1 study); a cluster without that gres refuses it, and a CPU study
asks for GPUs it never uses. Command-line `sbatch` options still win over the header.

    grpo-ablate slurm-script study.yaml > grpo-ablate.sbatch
    sbatch --array=0-3 grpo-ablate.sbatch study.yaml
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

from grpo_ablate.core.bounds import flag_value
from grpo_ablate.commands.common import add_study, EXIT_OK, EXIT_USAGE, err, load
from grpo_ablate.config import StudyConfig
from grpo_ablate.launch.base import STOP_GRACE_SECONDS
from grpo_ablate.study.limits import planned_estimate, resolve_timeout

__all__ = ["add_parser", "SCRIPT", "Resources", "resources", "render", "run", "slurm_time", "task_time"]

SCRIPT = Path(__file__).resolve().with_name("grpo-ablate-array.sbatch")  # package data (pyproject.toml)
_RESOURCE_OPTIONS = ("--gres", "--cpus-per-task", "--exclusive", "--time", "--partition", "--mem")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
EARLY_SIGNAL_S = 300  # the array script's `#SBATCH --signal=B:TERM@300`: its warning comes this early
NO_TIMEOUT_TIME = "24:00:00"  # a study without a trial timeout: nothing bounds a trial, so a day


def slurm_time(seconds: float) -> str:
    """SLURM's D-HH:MM:SS (HH:MM:SS under a day), rounded up to the minute."""
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


def task_time(study: StudyConfig) -> tuple[str, str]:
    """(the array task's default time limit, why): one trial's timeout, its stop grace and the early warning."""
    setting = study.study.trial_timeout
    seconds, words = resolve_timeout(setting, planned_estimate(study) if setting == "auto" else None)
    if seconds is None:
        return NO_TIMEOUT_TIME, f"no trial timeout ({words}): a day"
    total = seconds + STOP_GRACE_SECONDS + EARLY_SIGNAL_S
    return slurm_time(total), (f"one trial's timeout {words} + its stop grace {STOP_GRACE_SECONDS:.0f} s + the "
                               f"{EARLY_SIGNAL_S} s early SIGTERM")


@dataclass(frozen=True)
class Resources:
    """What one array task asks SLURM for."""

    workers: int  # trials side by side in one task (GRPO_ABLATE_WORKERS's default in the script)
    gpus: int  # per task: workers x GPUs per trial
    cpus: int | None  # per task; None with whole-node (--exclusive) GPU tasks
    time: str
    partition: str | None = None

    def header(self) -> list[str]:
        lines = []
        if self.partition:
            lines.append(f"#SBATCH --partition={self.partition}")
        if self.gpus:
            lines.append(f"#SBATCH --gres=gpu:{self.gpus}")
        if self.cpus is not None:
            lines.append(f"#SBATCH --cpus-per-task={self.cpus}")
        else:
            lines.append("#SBATCH --exclusive")
        lines.append(f"#SBATCH --time={self.time}")
        return lines


def resources(study: StudyConfig, *, workers: int | None = None, cpus: int | None = None, time: str | None = None,
              partition: str | None = None) -> Resources:
    """The task's resources for `workers` trials side by side (default study.workers).

    A GPU study takes its GPUs and, unless `cpus` is given, the whole node (its CPUs feed the
    data loaders and vLLM); a CPU study takes one CPU per training process of each trial,
    unless `cpus` says more. `time` None: task_time(study).
    """
    if time is None:
        time = task_time(study)[0]
    if not _TIME.match(time):
        raise ValueError(f"--time {time!r} is not a SLURM time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")
    n = workers if workers is not None else study.study.workers
    if n < 1:
        raise ValueError(f"--workers must be at least 1, got {n}")
    per_trial = study.hardware.gpus if study.hardware.gpus is not None else 0
    gpus = n * per_trial
    if cpus is None and not gpus:
        cpus = n * study.world_size
    return Resources(workers=n, gpus=gpus, cpus=cpus, time=time, partition=partition)


def render(script: str, res: Resources, study_path: str) -> str:
    """`script` with its resource lines replaced by `res`'s, after `--ntasks`, and its workers' default `res.workers`; the rest as shipped."""
    lines = [line for line in script.splitlines()
             if not any(line.startswith(f"#SBATCH {opt}") for opt in _RESOURCE_OPTIONS)]
    at = next(i for i, line in enumerate(lines) if line.startswith("#SBATCH --ntasks"))
    made = [f"# resources for {study_path}, written by `grpo-ablate slurm-script` (sbatch options on the command line win)"]
    body = "\n".join(lines[:at + 1] + made + res.header() + lines[at + 1:]) + "\n"
    default = '"${GRPO_ABLATE_WORKERS:-1}"'
    if default not in body:
        raise ValueError(f"the array script no longer reads {default}: update slurm_script.render")
    return body.replace(default, f'"${{GRPO_ABLATE_WORKERS:-{res.workers}}}"')


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`slurm-script`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("slurm-script", help="the SLURM array script with a resource header fitting this study")
    add_study(p)
    p.add_argument("--workers", type=flag_value("workers"), help="trials side by side in each array task (default study.workers)")
    p.add_argument("--cpus-per-task", type=flag_value("processes"), help="CPUs per task (default: the whole node on GPUs, else one per process)")
    p.add_argument("--time", help="the task's time limit (default: one trial's timeout, study.trial_timeout, plus its stop "
                                   "grace and the 5-minute early SIGTERM; 24:00:00 without a timeout)")
    p.add_argument("--partition", help="the SLURM partition")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    study = load(args)
    try:
        res = resources(study, workers=args.workers, cpus=args.cpus_per_task, time=args.time, partition=args.partition)
        text = render(SCRIPT.read_text(), res, args.study)
    except ValueError as e:
        err(str(e))
        return EXIT_USAGE
    except OSError as e:
        err(f"cannot read the shipped array script {SCRIPT} ({e}): reinstall grpo-ablate (the file is package data)")
        return EXIT_USAGE
    print(text, end="")
    return EXIT_OK
