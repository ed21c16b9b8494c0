"""Which launcher runs a trial: the one registry of launchers, and the one place that chooses.

`hardware.launcher` names a launcher of `LAUNCHERS` (or `auto`); GRPO_ABLATE_LAUNCHER in the
environment overrides it for every trial (`process` to opt out of warm sessions, `warm` to opt
in). `launcher_name(spec)` is the choice; a study's worker threads (`launcher_for`), the probe
and `run-one` (`LauncherPool`) all take it from there; a process that runs studies one after
another can lend them pools (`lend_launchers`), so they share warm sessions. A new place to run
trials is one `Launcher` subclass and one line here:

    LAUNCHERS = {"warm": WarmSession, "process": ProcessLauncher, "slurm": SlurmLauncher}

(slurm.py was added so: its file and its line here). This table is the one list of names:
config/schema.py takes `hardware.launcher` as any string, since config sits below launch;
`launcher_problems` checks it, and GRPO_ABLATE_LAUNCHER, where each command loads the study
(commands/common.py's load_study), and `launcher_choices` gives `explain`, `schema` and the
key table (docs/study-file.md) the allowed values.
A launcher declares what it is (base.Capabilities), whether `auto` may take it
(chosen_by_auto) and the command lines it would run (describe, for `plan --commands`).


    python -m grpo_ablate.launch runs/x/trials/00000/spec.json    # re-run one trial from its spec
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from grpo_ablate.config.schema import LAUNCHER_ENV  # a launcher's name: overrides hardware.launcher for every trial
from grpo_ablate.core.errors import Problem
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import TrialSpec

from .base import Launcher, ReclaimPending
from .process import ProcessLauncher
from .slurm import SlurmLauncher
from .warm import WarmSession, shares_a_session

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["AUTO", "LAUNCHERS", "LAUNCHER_ENV", "LauncherPool", "ReclaimPending", "describe_launch", "launcher_choices",
           "launcher_for", "launcher_name", "launcher_problems", "lend_launchers", "reclaim_trial", "release_thread_launchers",
           "run_trial"]

# In the order `auto` asks them (Capabilities.auto, then chosen_by_auto): the first that takes the trial runs it.
LAUNCHERS: dict[str, type[Launcher]] = {
    "warm": WarmSession,  # each single-process trial in a fresh fork of a pre-imported template
    "process": ProcessLauncher,  # a fresh process tree per trial (python, torchrun or accelerate: hardware.command)
    "slurm": SlurmLauncher,  # each trial a SLURM batch job submitted from this host
}

AUTO = "auto"  # not a launcher: the registry's choice per trial (launcher_name)


def launcher_choices() -> list[str]:
    """What `hardware.launcher` and GRPO_ABLATE_LAUNCHER may name: `auto`, then the registry's launchers in auto's order.

    Read from `LAUNCHERS` at each call, so a launcher registered there is a valid name with no other edit."""
    return [AUTO, *LAUNCHERS]


def launcher_problems(study: StudyConfig | None, env: Mapping[str, str] = os.environ) -> list[Problem]:
    """A name the registry does not hold, in the study's `hardware.launcher` or in GRPO_ABLATE_LAUNCHER, as Problems.

    Checked where each command loads the study (so validate, plan and run refuse it before anything
    starts, exit 2 with the key path), not at the first trial's launch. `study` None: the study did
    not load (its own problems are being reported), so only the environment is checked.
    """
    choices = launcher_choices()
    problems = []
    if study is not None and study.hardware.launcher not in choices:
        problems.append(Problem(path="hardware.launcher", message=(
            f"{study.hardware.launcher!r} names no launcher: use one of {choices} (launch/registry.py's LAUNCHERS)")))
    value = str(env.get(LAUNCHER_ENV, "")).strip().lower()
    if value and value not in choices:
        problems.append(Problem(path=LAUNCHER_ENV, message=(
            f"{LAUNCHER_ENV}={value!r} names no launcher: use one of {choices} or unset it")))
    return problems


def describe_launch(spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
    """The command lines the launcher chosen for `spec` would run (`plan --commands`), by role; nothing starts."""
    return LAUNCHERS[launcher_name(spec)].describe(spec, spec_path)


def reclaim_trial(trial_dir: str | os.PathLike[str] | None) -> list[str]:
    """Before a dead run's trial is queued again: every launcher ends what it left of it (Launcher.reclaim).

    Every launcher is asked, not the one the trial's spec names: GRPO_ABLATE_LAUNCHER may have
    chosen another, and a launcher acts only on marks of its own in the folder. Returns what was
    done, in words. Raises ReclaimPending when something may still run (the caller leaves the trial
    for a later look, never starts a second run of it beside the first); no other error escapes."""
    if not trial_dir:
        return []
    done = []
    for name, kind in LAUNCHERS.items():
        try:
            words = kind.reclaim(trial_dir)
        except ReclaimPending:
            raise
        except Exception as exc:  # noqa: BLE001 - the requeue goes on; say why this one could not
            words = f"{name}: could not reclaim {trial_dir}: {type(exc).__name__}: {exc}"
        if words:
            done.append(words)
    return done


def launcher_name(spec: TrialSpec, *, probe: bool = False) -> str:
    """The registry name of the launcher that runs `spec`: the only place a launcher is chosen.

    GRPO_ABLATE_LAUNCHER, else hardware.launcher, else (auto) the first launcher of `LAUNCHERS`
    that declares it may be chosen (Capabilities.auto) and takes the trial (chosen_by_auto): a
    warm session for single-process CPU trials and a probe's points, a process of its own for the
    rest; a remote launcher is never auto's choice. A trial that cannot share a session (several
    processes, vLLM: shares_a_session) never runs in one, whatever was asked.
    """
    choice = (os.environ.get(LAUNCHER_ENV, "").strip().lower()
              or str(spec.hardware.launcher or AUTO).strip().lower())
    if choice not in launcher_choices():
        raise ValueError(f"the launcher must be one of {launcher_choices()}, got {choice!r} "
                         f"(from {LAUNCHER_ENV if os.environ.get(LAUNCHER_ENV, '').strip() else 'hardware.launcher'})")
    if choice == AUTO:
        choice = next(name for name, kind in LAUNCHERS.items()
                      if kind.capabilities.auto and kind.chosen_by_auto(spec, probe=probe))
    if choice == "warm" and not shares_a_session(spec):
        return "process"
    return choice


class LauncherPool:
    """The launchers one thread uses, one instance per registry name, kept between trials and closed together.

        with LauncherPool() as pool:
            result = pool.for_spec(spec).run(spec)

    `probe=True` takes each launcher's `for_probe` instance. Use a pool from one thread at a time:
    a warm session runs one trial at a time.
    """

    def __init__(self, *, probe: bool = False, launchers: dict[str, Launcher] | None = None) -> None:
        self.probe = probe
        self._launchers: dict[str, Launcher] = dict(launchers or {})  # by registry name; made on first use otherwise

    def for_spec(self, spec: TrialSpec) -> Launcher:
        name = launcher_name(spec, probe=self.probe)
        if name not in self._launchers:
            kind = LAUNCHERS[name]
            self._launchers[name] = kind.for_probe() if self.probe else kind()
        return self._launchers[name]

    @property
    def processes_started(self) -> int:
        return sum(launcher.processes_started for launcher in self._launchers.values())

    def close(self) -> None:
        for launcher in self._launchers.values():
            launcher.close()

    def __enter__(self) -> "LauncherPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_local = threading.local()
_pools: "weakref.WeakSet[LauncherPool]" = weakref.WeakSet()
_loan_lock = threading.Lock()
_loans: dict[int, "_Loan"] = {}  # by id(pool)


@dataclass
class _Loan:
    """A pool lent to this process's trials, and the thread holding it now (None: free)."""

    pool: LauncherPool
    holder: threading.Thread | None = None


@contextmanager
def lend_launchers(*pools: LauncherPool) -> Iterator[None]:
    """While this lasts, trials run in this process (a study's worker thread, run_trial: run-one) use the lent pools' launchers.

    For a process that runs studies one after another (a driver script, a notebook, the test
    suite): their trials share the pools' warm sessions, started once, instead of each study
    starting its own. A thread holds one pool at a time (a study's worker thread until it ends,
    run_trial for its trial), so lend as many as a study has workers; a thread that finds none
    free gets launchers of its own, as without a loan. The pools stay the lender's to close.
    """
    with _loan_lock:
        if _loans:
            raise RuntimeError("launchers are already lent in this process")
        _loans.update({id(pool): _Loan(pool) for pool in pools})
    try:
        yield
    finally:
        with _loan_lock:
            _loans.clear()


def _borrow() -> LauncherPool | None:
    """A lent pool for this thread: the one it holds, else a free one (its holder gone or done), else None."""
    me = threading.current_thread()
    with _loan_lock:
        for loan in _loans.values():
            if loan.holder is me:
                return loan.pool
        for loan in _loans.values():
            if loan.holder is None or not loan.holder.is_alive():
                loan.holder = me
                return loan.pool
    return None


def _give_back(pool: LauncherPool) -> bool:
    """True if `pool` is a lent one (now free again for the next thread); False for a pool of one's own."""
    with _loan_lock:
        loan = _loans.get(id(pool))
        if loan is not None and loan.pool is pool:
            loan.holder = None
            return True
    return False


def launcher_for(spec: TrialSpec) -> Launcher:
    """The launcher a study's worker thread runs `spec` with: a lent pool's (lend_launchers), or the
    thread's own pool, kept for the thread's next trials and closed at exit."""
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _borrow()
        if pool is None:
            pool = LauncherPool()
            _pools.add(pool)
        _local.pool = pool
    return pool.for_spec(spec)


def release_thread_launchers() -> None:
    """A study's worker thread is done: close its own pool's launchers (its warm session ends), or
    give a lent pool back for the next study's thread."""
    pool = getattr(_local, "pool", None)
    _local.pool = None
    if pool is not None and not _give_back(pool):
        pool.close()
        _pools.discard(pool)


def run_trial(spec: TrialSpec, **options: Any) -> TrialResult:
    """Run one trial to its end with the launcher chosen for it, and classify it (`options`: Launcher.run's).

    With launchers lent to this process (lend_launchers) and free, the trial runs in theirs."""
    lent = _borrow()
    if lent is not None:
        try:
            return lent.for_spec(spec).run(spec, **options)
        finally:
            _give_back(lent)
    with LauncherPool() as pool:
        return pool.for_spec(spec).run(spec, **options)


@atexit.register
def _close_pools() -> None:
    for pool in list(_pools):
        pool.close()
