"""Which launcher runs a trial: the one registry of launchers, and the one place that chooses.

`hardware.launcher` names a launcher of `LAUNCHERS` (or `auto`); GRPO_ABLATE_LAUNCHER in the
environment overrides it for every trial (`process` to opt out of warm sessions, `warm` to opt
in). `launcher_name(spec)` is the choice; a study's worker threads (`launcher_for`), the probe
and `run-one` (`LauncherPool`) all take it from there. A new place to run trials is one
`Launcher` subclass and one line here:

    LAUNCHERS = {"process": ProcessLauncher, "warm": WarmSession, "slurm": SlurmLauncher}

(and its name in config/schema.py's `hardware.launcher` choices, which tests/test_launch_registry.py
keeps equal to this table).

    python -m grpo_ablate.trainer.launchers runs/x/trials/00000/spec.json    # re-run one trial from its spec
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from typing import Any

from grpo_ablate.config.schema import LAUNCHER_ENV  # a launcher's name: overrides hardware.launcher for every trial
from grpo_ablate.trainer.spec import TrialResult, TrialSpec

from .base import Launcher
from .process import ProcessLauncher
from .warm import WarmSession, shares_a_session

__all__ = ["LAUNCHERS", "LAUNCHER_ENV", "LauncherPool", "launcher_for", "launcher_name", "run_trial"]

LAUNCHERS: dict[str, type[Launcher]] = {
    "process": ProcessLauncher,  # a fresh process tree per trial (python, torchrun or accelerate: hardware.command)
    "warm": WarmSession,  # consecutive single-process trials in one long-lived process
}


def launcher_name(spec: TrialSpec, *, probe: bool = False) -> str:
    """The registry name of the launcher that runs `spec`: the only place a launcher is chosen.

    GRPO_ABLATE_LAUNCHER, else hardware.launcher, else (auto) a warm session for single-process
    CPU trials and a process of its own for the rest; a probe's points (`probe`, one or two
    steps each) take a warm session on GPUs too. A trial that cannot share a session (several
    processes, vLLM: shares_a_session) never runs in one, whatever was asked.
    """
    choice = os.environ.get(LAUNCHER_ENV, "").strip().lower() or str(spec.hardware.get("launcher") or "auto")
    if choice not in LAUNCHERS and choice != "auto":
        raise ValueError(f"the launcher must be auto or one of {sorted(LAUNCHERS)}, got {choice!r} "
                         f"(from {LAUNCHER_ENV if os.environ.get(LAUNCHER_ENV, '').strip() else 'hardware.launcher'})")
    if choice == "auto":
        cpu = spec.env.get("CUDA_VISIBLE_DEVICES") == "" or bool(spec.trainer.get("use_cpu"))
        choice = "warm" if cpu or probe else "process"
    if choice == "warm" and not shares_a_session(spec):
        return "process"
    return choice


class LauncherPool:
    """The launchers one thread uses, one instance per registry name, kept between trials and closed together.

        with LauncherPool() as pool:
            result = pool.for_spec(spec).run(spec)

    `probe=True` takes each launcher's `for_probe` instance. Use a pool from one thread only:
    a warm session's parent-death signal follows the thread that started it.
    """

    def __init__(self, *, probe: bool = False) -> None:
        self.probe = probe
        self._launchers: dict[str, Launcher] = {}

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


def launcher_for(spec: TrialSpec) -> Launcher:
    """The launcher a study's worker thread runs `spec` with; each thread keeps its own pool, all closed at exit."""
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = LauncherPool()
        _pools.add(pool)
    return pool.for_spec(spec)


def run_trial(spec: TrialSpec, **options: Any) -> TrialResult:
    """Run one trial to its end with the launcher chosen for it, and classify it (`options`: Launcher.run's)."""
    with LauncherPool() as pool:
        return pool.for_spec(spec).run(spec, **options)


@atexit.register
def _close_pools() -> None:
    for pool in list(_pools):
        pool.close()
