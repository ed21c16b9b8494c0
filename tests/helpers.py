"""Plain helpers the tests share, defined once: paths, the CLI (in a child process or in this
one), study files, the tiny model's trial specs, and a real tmpfs.

Fixtures live in conftest.py; everything here is an ordinary function a test imports with
`from helpers import ...` (pytest puts tests/ on the import path). The reward functions that
trials load by name are in helpers_rewards.py, kept apart so a trial process imports nothing
else of the tests.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
TINY_CPU = ROOT / "studies" / "tiny-cpu.yaml"

__all__ = ["ROOT", "TESTS", "TINY_CPU", "TRIAL_ENV", "CliResult", "FinishedStudy", "cli_env", "cli_inprocess", "environment_kept", "fail_when_stale", "fill_disk", "free_port", "read_only_bind", "run_cli",
           "tiny_spec", "tmpfs", "unavailable", "write_study"]


def unavailable(reason: str) -> None:
    """Skip locally; fail under CI, where every non-GPU test must really run."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"required under CI but unavailable: {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def environment_kept() -> Iterator[None]:
    """os.environ as it was on entry, again on exit, for in-process work that sets variables of its own.

    A built-in model built in this process (a fresh cache) leaves torch's TORCHINDUCTOR_CACHE_DIR in
    os.environ; a trial started after it in the same test had a startup environment the suite's warm
    session had not seen, and a template of its own (an interpreter's imports, ~5 CPU s). conftest.py
    restores the environment after each test; this restores it inside one."""
    before = dict(os.environ)
    try:
        yield
    finally:
        if os.environ != before:
            os.environ.clear()
            os.environ.update(before)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ the CLI


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    """`grpo-ablate ARGS` as its own process: for tests where the process boundary is the point
    (trials, signals, exit on a dead storage, what a fresh interpreter imports)."""
    return subprocess.run([sys.executable, "-m", "grpo_ablate", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=cli_env(**env), timeout=timeout)


class CliResult(NamedTuple):
    """What a finished command left: unpacks as (code, out, err), reads like a CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def cli_inprocess(*args: str, cwd: Path | None = None, **env: str) -> CliResult:
    """`grpo-ablate ARGS` through `grpo_ablate.commands.cli.main(argv)` in this process: no interpreter start.

    For commands that start no trial (validate, plan, init, compare, and input that is refused
    before anything runs). It keeps what a child process would show: the exit code (argparse's
    SystemExit included), stdout and stderr, run from `cwd` (default the repository root) with
    `env` set and no terminal on stdin; warnings follow Python's default filters and are printed to stderr, as in a fresh
    process, rather than recorded by pytest, so "one line on stderr" still catches a stray one.
    """
    from grpo_ablate.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_env, old_stdin = os.getcwd(), {k: os.environ.get(k) for k in env}, sys.stdin

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001 - warnings' signature
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    try:
        os.chdir(cwd or ROOT)
        os.environ.update(env)
        sys.stdin = io.StringIO("")  # not a terminal, as for a child with captured output
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category in (("default", DeprecationWarning), ("ignore", DeprecationWarning),
                                     ("ignore", PendingDeprecationWarning), ("ignore", ImportWarning),
                                     ("ignore", ResourceWarning)):
                warnings.filterwarnings(action, category=category, module="__main__" if action == "default" else "")
            warnings.showwarning = show
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse: --help, --version, a usage error
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
    finally:
        sys.stdin = old_stdin
        os.chdir(old_cwd)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return CliResult(code, out.getvalue(), err.getvalue())


# ------------------------------------------------------------------ study files and trial specs


@dataclass(frozen=True)
class FinishedStudy:
    """A study that `grpo-ablate run` finished (conftest's `finished_study`), for tests that only read one."""

    name: str
    out: Path  # its output_dir: study.journal, trials/, report.html, summary.json
    study_args: tuple[str, ...]  # the study file and its --set overrides, without the output_dir
    run: subprocess.CompletedProcess  # what the run printed, and its exit code

    def args(self, out: Path | None = None) -> list[str]:
        """The study's arguments for a command (run, dashboard, report), writing into `out` (default its own)."""
        return [*self.study_args, "--set", f"study.output_dir={out or self.out}"]

    def load(self, out: Path | None = None):
        import optuna

        from grpo_ablate.storage.store import open_storage

        return optuna.load_study(study_name=self.name, storage=open_storage(str((out or self.out) / "study.journal")))


# The smallest valid study: the tiny built-in model on the addition task (refusal tests add to it).
MINIMAL_STUDY = """\
study:
  name: t
model: {name_or_path: builtin:tiny}
data: {task: addition}
search: {num_generations: [2, 4]}
budget: {max_steps: 5}
"""


def write_study(folder: Path, text: str, name: str = "study.yaml") -> Path:
    """`text` (dedented) as the study file `folder/name`."""
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


# A study's CPU trial's environment (no GPU, a thread count), with tests/ on the import path for
# `helpers_rewards:<name>`: trials given it share the suite's warm session and its template.
TRIAL_ENV = {"PYTHONPATH": str(TESTS), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def tiny_spec(folder: Path, *, steps: int = 3, num_prompts: int = 2000, rewards=(), hardware: dict | None = None,
              budget: dict | None = None, timeout_s: float | None = None, evaluation: dict | None = None,
              **trainer: Any):
    """A trial of the tiny built-in model on the addition task with the recommended CPU settings
    (TINY_CPU_TRAINER), changed by keyword; tests/ is on the trial's import path for
    `helpers_rewards:<name>`. Its environment is a study's CPU trial's (no GPU, a thread count),
    so these trials and the studies run in this process (fixtures_warm.study_here) share a warm session."""
    from grpo_ablate.core.schedule import parse_generations
    from grpo_ablate.study.trial_spec import spec_from_sections
    from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER

    if isinstance(trainer.get("num_generations"), str):  # a label, read here as the study-file loader reads it
        trainer["num_generations"] = parse_generations(trainer["num_generations"])
    spec = spec_from_sections(
        folder,
        model={"name_or_path": "builtin:tiny"},
        data={"task": "addition", "num_prompts": num_prompts},
        rewards=list(rewards),
        trainer={**TINY_CPU_TRAINER, **trainer},
        budget=budget or {"max_steps": steps},
        hardware=hardware or {"num_processes": 1},
        timeout_s=timeout_s,
        env=dict(TRIAL_ENV),
    )
    if evaluation is not None:
        from grpo_ablate.contract.spec import EvaluationSpec

        spec.evaluation = EvaluationSpec(**evaluation)
    return spec


# ------------------------------------------------------------------ a real, small file system


@contextlib.contextmanager
def tmpfs(folder: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A real tmpfs of `size` (e.g. "64k") mounted on `folder` for the block; needs root, else
    `unavailable` (a skip locally, a failure under CI). It must unmount at the end: a file the
    tool still holds open there (a warm session's log, say) fails the test, and is unmounted lazily."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"ro,size={size}" if read_only else f"size={size}"
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        unavailable("mounting a tmpfs needs root")
    passed = False
    try:
        yield folder
        passed = True
    finally:
        deadline = time.monotonic() + 20  # a process that is still ending lets go within seconds
        while subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                subprocess.run(["umount", "-l", str(folder)], capture_output=True)
                if passed:  # else the test's own failure is the one to show
                    raise AssertionError(f"{folder} was still in use 20 s after the block: a file was kept open there")
                break
            time.sleep(0.2)


@contextlib.contextmanager
def read_only_bind(folder: Path, at: Path) -> Iterator[Path]:
    """`folder` bind-mounted read-only at `at` for the block: a real read-only mount, which stops root too (chmod
    does not). Needs root (else `unavailable`: a skip locally, a failure under CI); unmounted at the end."""
    at.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(folder), str(at)], capture_output=True).returncode:
        unavailable("a read-only bind mount needs root")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(at)], capture_output=True).returncode:
            unavailable("this kernel refused to remount a bind mount read-only")
        yield at
    finally:
        deadline = time.monotonic() + 20
        while subprocess.run(["umount", str(at)], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                subprocess.run(["umount", "-l", str(at)], capture_output=True)
                break
            time.sleep(0.2)


def fill_disk(folder: Path) -> None:
    """Write `folder/filler` until the file system says it is full."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (65536, 4096, 512):  # big blocks first, then the last scraps
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)


class Hung(Exception):
    """A block that ran past its watchdog (a blocked open() of a FIFO, a read that never ends)."""


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Raise Hung in this thread when the block runs longer than `seconds`: the signal interrupts
    a blocked system call (an open() of a FIFO with no writer) and the handler's exception ends it."""
    import signal

    def fire(signum, frame):  # noqa: ANN001 - signal's signature
        raise Hung(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def fail_when_stale(study: Any, number: int, timeout: float = 120.0) -> None:
    """Fail trial `number` of an RDB study the moment its heartbeat is stale (Optuna's fail_stale_trials,
    asked every 0.2 s, also runs the storage's stale-trial callback): a wait on the event, where a sleep
    past the grace period had to guess a margin (and waited it out every run)."""
    import optuna

    deadline = time.monotonic() + timeout
    while True:
        optuna.storages.fail_stale_trials(study)
        if next(t for t in study.get_trials(deepcopy=False) if t.number == number).state != optuna.trial.TrialState.RUNNING:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"trial {number}'s heartbeat was not stale after {timeout:g} s")
        time.sleep(0.2)
