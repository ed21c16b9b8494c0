"""One liveness rule on every storage: a running trial is taken over only when its run is known to be dead.

    grpo-ablate run study.yaml      # on any storage: a trial another run still runs is waited for, never run twice

A trial in the study is RUNNING from the moment a run asks for it until that run records its end. Another run
(the same command again on this host, or a run on another host sharing PostgreSQL) must tell a run that died from
one that is only slow to answer (paused by a laptop's suspend, a VM's pause, a SLURM suspend; cut off from the
database for a while), because taking over a live trial trains its steps twice and throws one result away.
The rule (`Liveness.dead`):
- a trial of this host is dead only when its run is: the pid gone, or now another process (another start time),
  or this very process in an earlier run (another run id) (study/owner.py `dead_owner`). A paused process is
  alive: however long the pause, the trial is waited for;
- a trial of another host is dead only when its heartbeat (RDB storages: the orchestrator renews it,
  study/lifecycle.py) is past the grace period *and* its lease (a file the trial process itself renews in its
  folder, trainer/lease.py) has not changed for a whole grace period of this run's own clock (no clocks are
  compared across hosts). A trial whose folder this host cannot see is judged by the heartbeat alone;
- a journal storage has no heartbeat: its trials are one host's, judged by the first rule.
A trial judged dead is marked taken in its folder (launch/watch.mark_taken: its process, should it wake, stops at
once and saves nothing), what its launcher left is ended (registry.reclaim_trial: a SLURM job is cancelled and
waited for; when that cannot be confirmed the trial is left for the next look), and it is queued again
(ledger.requeue): the retry resumes its last checkpoint, or records its result when it had finished.
A run that wakes to find its trial taken stops training it at once (the lifecycle's heartbeat sees the trial's
state, and the trial process the TAKEN file) and does not record it: the result it may hold stays in its folder,
where the retry finds it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection

from grpo_ablate.launch import reclaim_trial
from grpo_ablate.launch.registry import ReclaimPending
from grpo_ablate.launch.watch import mark_taken
from grpo_ablate.study import ledger
from grpo_ablate.study.owner import RunIdentity, dead_owner
from grpo_ablate.core.vocab import LEASE_FILE

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

__all__ = ["Liveness", "heartbeat_stale"]


def heartbeat_stale(ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage") -> set[int]:
    """The numbers of the study's RUNNING trials whose heartbeat is older than the storage's grace period (the
    database's own clock); empty for a storage without heartbeats. Optuna keeps the test private
    (RDBStorage._get_stale_trial_ids, used by its own fail_stale_trials): this is its one caller here."""
    # lazy: Optuna only while a study runs; every command imports study/
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return set()
    study_id = storage.get_study_id_from_name(ostudy.study_name)
    ids = storage._get_stale_trial_ids(study_id)  # type: ignore[attr-defined]  # noqa: SLF001
    return {storage.get_trial(i).number for i in ids}


class Liveness:
    """The rule, for one run: its identity, the grace period, and what it saw of other hosts' leases."""

    def __init__(self, current: RunIdentity, grace_s: float) -> None:
        self.current = current
        self.grace_s = float(grace_s)
        self._leases: dict[int, tuple[str | None, float]] = {}  # trial -> (lease text, when this run first saw it)

    def _lease_still(self, number: int, trial_dir: str | None) -> float:
        """Seconds (of this run's clock) for which the trial's lease has not changed; 0 the first time it is seen."""
        try:
            text: str | None = (Path(trial_dir) / LEASE_FILE).read_text() if trial_dir else None
        except OSError:
            text = None
        now = time.monotonic()
        seen = self._leases.get(number)
        if seen is None or seen[0] != text:
            self._leases[number] = (text, now)
            return 0.0
        return now - seen[1]

    def dead(self, ft: "FrozenTrial", *, heartbeat_stale: bool) -> str | None:
        """Why the run that owns the RUNNING trial `ft` is dead; None when it is, or may be, alive (the rule above)."""
        host, pid = ledger.owner(ft)
        if host is None or pid is None:
            return None  # asked, not started: its run writes its owner first thing
        if host == self.current.host:
            return dead_owner(host, pid, ledger.owner_run(ft), self.current)
        if not heartbeat_stale:
            self._leases.pop(ft.number, None)
            return None
        still = self._lease_still(ft.number, ledger.trial_dir(ft))
        if still < self.grace_s:
            return None
        return (f"its heartbeat went stale and its trial's lease stood still for {still:.0f} s (grace "
                f"{self.grace_s:.0f} s): the orchestrator (pid {pid} on {host}) or its host died, or lost the database "
                f"and its trial process stopped; taken over by run {self.current.run_id} on {self.current.host}")

    def reap(self, ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage", *, own: Collection[int],
             max_retry: int, say: Callable[[str], None]) -> int:
        """Queue again every RUNNING trial whose run is dead, after marking it taken and ending what its launcher
        left; `own`: this run's trials (alive by definition). How many were queued again."""
        from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

        stale = heartbeat_stale(ostudy, storage)
        n = 0
        for ft in ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if ft.number in own:
                continue
            why = self.dead(ft, heartbeat_stale=ft.number in stale)
            if why is None:
                continue
            folder = ledger.trial_dir(ft)
            if folder:
                mark_taken(folder, why)
            try:
                for words in reclaim_trial(folder):  # its remote job, if any, ends first
                    say(words)
            except ReclaimPending as e:  # a job that may still run: never a second beside it; looked at again later
                say(f"trial {ft.number} is not taken over yet: {e}")
                continue
            if ledger.requeue(ostudy, storage, ft.number, why, max_retry=max_retry, counted=True) is not None:
                say(f"[trial {ft.number}] taken over: {why}")
                n += 1
        return n

