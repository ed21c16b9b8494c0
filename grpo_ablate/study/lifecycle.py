"""One trial's lifecycle, in one place: ask -> register -> start -> heartbeat -> stop -> classify -> tell -> requeue.

    grpo-ablate run studies/tiny-cpu.yaml      # every trial of a study goes through TrialLifecycle

The only module that knows both an Optuna trial and a trial process. What is written to the
trial in the study goes through study/ledger.py, which maps outcomes to Optuna states:
- completed -> COMPLETE with the objective values and the constraint `oom` = -1 (feasible);
- oom -> COMPLETE with `oom` = +1 (violated): the sampler learns where memory ends, which a
  FAIL would not teach it; its values are the partial metrics, else 0;
- pruned -> PRUNED; failed -> FAIL with the reason;
- interrupted (the study was stopped, the trial was lost, or an infrastructure fault such as a
  full disk) -> FAIL, and the cell is queued again by the ledger's requeue, the same one an RDB
  storage calls for a trial whose heartbeat went stale. The trial process itself classifies a
  storage fault by type and errno (errors.machine_fault) and reports it as interrupted. Faults are retried `study.max_retry`
  times per cell (counted along the `retry_of` chain); after that the trial is failed with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import psutil

from grpo_ablate.study import ledger
from grpo_ablate.study.artifacts import upload_trial_artifacts
from grpo_ablate.launch.devices import claim_cpu_share
from grpo_ablate.study.limits import resolve_timeout
from grpo_ablate.study.owner import HOST, new_run
from grpo_ablate.study.trial_spec import plan_spec
from grpo_ablate.core.errors import database_fault, machine_fault
from grpo_ablate.storage.store import patiently
from grpo_ablate.plan.run_plan import StudyPlan
from grpo_ablate.study.prefixes import BranchSetAside, Prefixes
from grpo_ablate.study.setup import queue_ready_branches
from grpo_ablate.contract import checkpoints
from grpo_ablate.contract.checkpoints import carry_over, remove_checkpoints, spec_fingerprint
from grpo_ablate.contract.spec import StartFrom, TrialSpec
from grpo_ablate.launch import finish, launcher_for, reclaim_trial, request_stop
from grpo_ablate.launch.base import ReclaimPending
from grpo_ablate.launch.watch import mark_taken
from grpo_ablate.core.vocab import (EVAL_FILE, LEASE_ENV, LEASE_FILE, LOG_FILE, PREFIX_ROLE, RESULT_FILE, SPEC_FILE, STOP_FILE,
                               TAKEN_FILE, TRIALS_DIR, Cell, Outcome, trial_dir_name)
from grpo_ablate.contract.metrics import EVAL_KEYS, read_jsonl, summarize, summarize_eval
from grpo_ablate.study.search.fidelity import ComputeClock, quantum

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import StudyConfig
    from grpo_ablate.contract.result import TrialResult

__all__ = ["Running", "Registry", "Ended", "TrialLifecycle", "HOST", "StorageUnavailable", "trial_dir_of"]

REPORT_PAUSE_S = 30.0  # a pruner's report the storage refused: the next waits this long (each may block on a lock)
# a trial that ended with one of these left a result worth recording; a retry records it instead of training again
_RECORDABLE = (Outcome.COMPLETED.value, Outcome.PRUNED.value, Outcome.OOM.value)


class StorageUnavailable(Exception):
    """The study's storage failed while recording a finished trial: one paragraph says what is kept and what to do."""



def trial_dir_of(study: "StudyConfig", number: int) -> Path:
    return (study.output_dir / TRIALS_DIR / trial_dir_name(number)).resolve()


# ------------------------------------------------------------------ the running trials


@dataclass
class Running:
    """A registered trial: known to the stop path from the moment it is asked."""

    number: int
    trial_dir: Path
    cell: Cell | None = None
    max_steps: int | None = None
    step: int = 0
    reward: float | None = None
    train_seconds: float = 0.0
    started: float = 0.0

    def eta(self) -> str:
        if not self.max_steps or self.step <= 0 or self.train_seconds <= 0:
            return "?"
        return f"{self.train_seconds / self.step * (self.max_steps - self.step):.0f}s"


class Registry:
    """The trials this process runs, and the stop request, under one lock.

    A trial is registered under the lock right after it is asked, before any other storage
    round trip, and a stop is requested under the same lock: so every trial either is in the
    snapshot the stop writes to, or sees the stop when it registers.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[int, Running] = {}
        # every trial this process asked, kept once it ends: a trial whose start never reached the storage (its
        # owner unrecorded, as when the disk filled) is still this run's, and not running once the run is over
        self.taken: set[int] = set()
        self.stop = threading.Event()
        self.stop_reason: str | None = None  # "interrupted" once the study was asked to stop

    def register(self, number: int, trial_dir: Path) -> Running:
        """Call with the lock held."""
        run = Running(number, trial_dir, started=time.monotonic())
        self.running[number] = run
        self.taken.add(number)
        try:
            trial_dir.mkdir(parents=True, exist_ok=True)  # a local folder, no storage round trip
        except OSError:
            pass  # preparing the trial meets the same error and requeues it
        if self.stop_reason is not None:
            _stop(trial_dir, self.stop_reason)
        return run

    def request_stop(self, reason: str) -> list[Path]:
        """Stop every running trial after its current step; the stop reaches trials registered later too."""
        with self.lock:
            self.stop_reason = self.stop_reason or reason
            self.stop.set()
            dirs = [r.trial_dir for r in self.running.values()]
            for d in dirs:
                _stop(d, reason)
        return dirs

    def unregister(self, number: int) -> None:
        with self.lock:
            self.running.pop(number, None)

    def snapshot(self) -> list[Running]:
        with self.lock:
            return list(self.running.values())


def _stop(trial_dir: Path, reason: str) -> None:
    try:
        trial_dir.mkdir(parents=True, exist_ok=True)
        request_stop(trial_dir, reason)  # the one STOP writer; the first reason written wins
    except OSError:
        pass  # the folder cannot be written: run_trial fails on it and the trial is requeued


@dataclass
class Ended:
    """What the runner counts and prints of a finished trial."""

    number: int
    outcome: str
    reason: str = ""
    values: list[float] | None = None
    fault: bool = False  # an infrastructure fault: counts toward max_consecutive_failures

    def __post_init__(self) -> None:
        # every trial that did not complete says why: where the reason was lost, where to look
        if not self.reason.strip() and self.outcome != Outcome.COMPLETED.value:
            self.reason = (f"{self.outcome} with no reason recorded; see its log, "
                           f"{TRIALS_DIR}/{trial_dir_name(self.number)}/{LOG_FILE}")


class TrialLifecycle:
    def __init__(self, study: "StudyConfig", ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage",
                 artifacts: "optuna.artifacts.FileSystemArtifactStore", registry: Registry, *, workers: int,
                 heartbeat: bool, say: Callable[[str], None], plan: StudyPlan) -> None:
        self.study = study
        self.plan = plan
        self.ostudy = ostudy
        self.storage = storage
        self.artifacts = artifacts
        self.registry = registry
        self.workers = workers
        self.heartbeat = heartbeat
        self.say = say
        # seconds before a trial is stopped: study.trial_timeout, resolved by the runner (study/limits.py)
        self.trial_timeout_s, _ = resolve_timeout(study.study.trial_timeout, None)
        self.run_identity = new_run()  # recorded with every trial this run starts (study/owner.py)
        # how long a storage outage is waited out before the run stops with what it kept (storage.patiently): the
        # heartbeat's grace, after which other runs may judge this one's trials dead (study/liveness.py)
        self.storage_wait_s = float(study.study.grace_period or 3 * study.study.heartbeat_interval)
        self.prefixes = Prefixes(study, plan, plan.cells) if plan.branch_step is not None else None

    # ---- ask -> register

    def ask_and_register(self) -> "optuna.Trial | None":
        """Call with the registry's lock held: the trial is registered before any further round trip."""
        trial = ledger.ask(self.ostudy, self.study.is_planned)
        if trial is None:
            return None
        self.registry.register(trial.number, trial_dir_of(self.study, trial.number))
        return trial

    # ---- start -> heartbeat -> stop -> classify -> tell -> requeue

    def run(self, trial: "optuna.Trial", env: dict[str, str]) -> Ended:
        run = self.registry.running[trial.number]
        share = None
        beat = threading.Event()
        try:
            self._patiently(lambda: ledger.started(trial, HOST, os.getpid(), heartbeat=self.heartbeat,
                                                   max_retry=self.study.study.max_retry, run=self.run_identity.record()),
                            "starting the trial")
            try:
                cell = ledger.suggest_cell(trial, self.study)
                ledger.set_trial_dir(trial, run.trial_dir)
                run.trial_dir.mkdir(parents=True, exist_ok=True)
                if env.get("CUDA_VISIBLE_DEVICES") == "":
                    share = claim_cpu_share(self.workers, self.study.world_size)
                    env = {**env, **share.env()}
                start_from = self._branch_point(trial, cell)
                env = {**env, LEASE_ENV: str(self.study.study.heartbeat_interval)}  # trainer/lease.py renews at this pace
                spec = plan_spec(self.study, self.plan, cell, run.trial_dir, env, timeout=self.trial_timeout_s,
                                 start_from=start_from)
                ledger.record_spec_fingerprint(trial, spec_fingerprint(json.loads(spec.to_json())))
                finished = self._finished_predecessor(trial, spec)
                if finished is not None and cell.role == PREFIX_ROLE:  # its sealed last step is its branches' start
                    carry_over(finished, run.trial_dir, move=_inside(finished, (self.study.output_dir / TRIALS_DIR).resolve()))
                self._reclaim_predecessors(trial)  # never a second run of a trial beside a first that may live on
                resumed = None if finished is not None else self._resume_predecessor(trial, run.trial_dir)
            except ReclaimPending as e:  # queued again, free: the next attempt asks again
                why, token = f"not started: {e}", ledger.requeue_token()
                outcome = self._patiently(lambda: ledger.requeue(self.ostudy, self.storage, trial.number, why,
                                                                 max_retry=self.study.study.max_retry, counted=False,
                                                                 token=token),
                                          "queueing the trial again")
                return Ended(trial.number, (outcome or Outcome.INTERRUPTED).value, why)
            except BranchSetAside as e:  # its prefix is trained again first: queued again once it is (study/prefixes.py)
                aside = str(e)
                outcome = self._patiently(lambda: ledger.set_aside(self.ostudy, self.storage, trial.number, cell.seed,
                                                                   aside), "setting the branch aside")
                self.say(f"[trial {trial.number}] set aside: {aside}")
                return Ended(trial.number, (outcome or Outcome.INTERRUPTED).value, aside)
            except OSError as e:
                return self._fault(trial, "preparing the trial", e)
            except Exception as e:  # noqa: BLE001 - a trial that cannot be set up fails, the study goes on
                return self._failed(trial, f"could not prepare the trial: {type(e).__name__}: {e}")
            run.cell, run.max_steps = cell, spec.max_steps
            self.say(f"[trial {trial.number}] start {cell.role}: {cell.arm.label}, seed {cell.seed}"
                     + (f", {share.threads} thread(s)" if share else "")
                     + (f", resuming trial {resumed[0]}'s checkpoint at step {resumed[1]}" if resumed else "")
                     + (f", branching from step {start_from.step} of {Path(start_from.checkpoint).parent.parent.name}"
                        if start_from is not None and not resumed else "")
                     + (f", steps 1-{spec.max_steps}: the shared prefix of seed {cell.seed}'s arms"
                        if cell.role == PREFIX_ROLE else "")
                     + f" -> {run.trial_dir}")
            if self.heartbeat:
                self._start_heartbeat(trial.number, beat, run.trial_dir)
            try:
                if finished is not None:
                    result = _adopt(spec, finished)
                    self.say(f"[trial {trial.number}] recorded from {finished}: that attempt finished it, and the storage "
                             "never heard (not trained again)")
                else:
                    result = launcher_for(spec).run(spec, on_progress=self._progress(trial, run))
            except OSError as e:
                return self._fault(trial, "running the trial (the orchestrator's own files)", e)
            except Exception as e:  # noqa: BLE001 - run_trial never raises for the trial's own failure: a bug
                return self._failed(trial, f"the orchestrator failed running the trial: {type(e).__name__}: {e}")
            try:  # from here on the result is on disk, and stays there until the storage has recorded it
                taken = self._patiently(lambda: self._taken(trial.number), "reading the trial's state")
                if taken is not None:  # another run judged this one dead (a pause) and runs the cell: it records this
                    beat.set()
                    self.say(f"[trial {trial.number}] {result.outcome.value} here, but {taken}: not recorded here; its "
                             f"files stay in {run.trial_dir}, where that run finds a finished result")
                    return Ended(trial.number, Outcome.INTERRUPTED.value, taken)
                self._patiently(lambda: upload_trial_artifacts(self.artifacts, trial, run.trial_dir), "recording the trial")
                self._patiently(lambda: ledger.record_orchestrator_rss(trial, _rss_mb()), "recording the trial")
                token = ledger.requeue_token()  # one for every try of the recording below (ledger.requeue)
                if cell.role == PREFIX_ROLE:
                    ended = self._patiently(lambda: self._tell_prefix(trial, cell, spec, result, token), "recording the trial")
                else:
                    ended = self._patiently(lambda: self._tell(trial, result, token), "recording the trial")
            except Exception as e:
                fault = machine_fault(e)
                if fault is None:
                    raise
                raise StorageUnavailable(
                    f"trial {trial.number} {result.outcome.value}, but the study's storage could not record it ({fault}). "
                    f"Its result.json and last checkpoint are kept in {run.trial_dir}; once the storage is back, run the "
                    "same `grpo-ablate run` again: it records this trial from its files instead of training it again."
                ) from None
            # a prefix's last checkpoint is the study's shared state: its branches (and their retries) start there
            if ended.outcome != Outcome.INTERRUPTED.value and not self.study.study.keep_checkpoints \
                    and not (cell.role == PREFIX_ROLE and ended.outcome == Outcome.COMPLETED.value):
                remove_checkpoints(run.trial_dir)  # ended for good and recorded: no retry will resume them
                if finished is not None and _inside(finished, (self.study.output_dir / TRIALS_DIR).resolve()):
                    remove_checkpoints(finished)
            return ended
        finally:
            beat.set()
            if share is not None:
                share.release()
            self.registry.unregister(trial.number)

    def _patiently(self, call: Callable[[], Any], what: str) -> Any:
        """A storage call that waits out an outage of up to the grace period (storage.patiently), saying so once."""
        return patiently(call, seconds=self.storage_wait_s, what=what, say=self.say)

    def _taken(self, number: int) -> str | None:
        """Why this run's trial is no longer its own (another run judged it dead and queued it again); else None."""
        from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

        study_id = self.storage.get_study_id_from_name(self.ostudy.study_name)
        ft = self.storage.get_trial(self.storage.get_trial_id_from_study_id_trial_number(study_id, number))
        if ft.state == TrialState.RUNNING:
            return None
        return f"taken over by another run ({ledger.reason(ft) or ft.state.name})"

    def _reclaim_predecessors(self, trial: "optuna.Trial") -> None:
        """A retry: end whatever a launcher left of the attempts it follows (a SLURM job whose end was never seen),
        waiting for it, before anything of theirs is carried over or run again. ReclaimPending when that cannot be
        confirmed now (the cluster's controller does not answer)."""
        for folder in self._predecessor_folders(trial):
            for words in reclaim_trial(folder):
                self.say(f"[trial {trial.number}] {words}")

    def _branch_point(self, trial: "optuna.Trial", cell: Cell) -> StartFrom | None:
        """A branching study's branch: its seed's prefix's sealed checkpoint at the branch step, verified as a resume
        is against today's prefix spec (study/prefixes.py), recorded on the trial (who depends on whom); None for a
        prefix or a study that does not branch. BranchSetAside when there is none to trust: the prefix is queued
        again (unless it already is) and the branch waits for it."""
        step = self.plan.branch_step
        if step is None or cell.role == PREFIX_ROLE or self.prefixes is None:
            return None
        found = self.prefixes.branch_point(self.ostudy, cell.seed, step)
        if isinstance(found, str):
            queued = self.prefixes.retrain(self.ostudy, cell.seed)
            raise BranchSetAside(f"{found}; " + ("its prefix is queued to train again" if queued else
                                                 "its prefix is already queued or training again")
                                 + ", and this branch runs once it has completed")
        prefix, point = found
        ledger.record_branched_from(trial, prefix.number, step)
        return point

    def _tell_prefix(self, trial: "optuna.Trial", cell: Cell, spec: Any, result: "TrialResult", token: str) -> Ended:
        """A prefix's end. Completed only with its sealed, verified checkpoint at the branch step (else it failed:
        no branch could start); then, under the registry's lock (no worker sees an empty queue with nothing
        running in between), its seed's branches are queued."""
        if result.outcome is Outcome.COMPLETED:
            found = next((c for c in checkpoints.sealed_checkpoints(spec.path) if c.step == spec.max_steps), None)
            why = "no sealed checkpoint at its last step" if found is None else \
                checkpoints.verify(found, checkpoints.spec_fingerprint(json.loads(spec.to_json())))
            if why is not None:
                result = dataclasses.replace(result, outcome=Outcome.FAILED,
                                             reason=f"the prefix finished, but its branches cannot start from it: {why}")
        with self.registry.lock:
            ended = self._tell(trial, result, token)
            if ended.outcome == Outcome.COMPLETED.value:
                n = queue_ready_branches(self.ostudy, self.study, self.plan)
                self.say(f"[trial {trial.number}] seed {cell.seed}'s prefix is sealed at step {spec.max_steps}: "
                         f"queued {n} branch(es)")
        return ended

    def _predecessor_folders(self, trial: "optuna.Trial") -> list[Path]:
        """The folders of the attempts this retry follows, nearest first; this study's own copy of one where the
        journal names another copy of the run folder."""
        if ledger.retry_of(trial) is None:
            return []
        trials = {t.number: t for t in self.ostudy.get_trials(deepcopy=False)}
        me = trials.get(trial.number)
        if me is None:
            return []
        mine = (self.study.output_dir / TRIALS_DIR).resolve()
        out = []
        for folder in ledger.predecessor_dirs(trials, me):
            source = Path(folder)
            if not _inside(source, mine) and (mine / source.name).is_dir():
                source = mine / source.name
            out.append(source)
        return out

    def _finished_predecessor(self, trial: "optuna.Trial", spec: Any) -> Path | None:
        """An earlier attempt that finished this very trial (same spec fingerprint) but whose end the storage never
        recorded (it was down): its folder, whose result a retry records instead of training again."""
        fingerprint = spec_fingerprint(json.loads(spec.to_json()))
        for folder in self._predecessor_folders(trial):
            try:
                result = json.loads((folder / RESULT_FILE).read_text())
                before = json.loads((folder / SPEC_FILE).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(result, dict) and result.get("outcome") in _RECORDABLE and isinstance(before, dict) \
                    and spec_fingerprint(before) == fingerprint and self._prefix_whole(folder, spec, fingerprint):
                return folder
        return None

    @staticmethod
    def _prefix_whole(folder: Path, spec: TrialSpec, fingerprint: str) -> bool:
        """A finished prefix is its branches' start: it is recorded from its files only with its last checkpoint whole
        (one that fails was found by a branch, and the prefix is being trained again for it). True for other roles."""
        if spec.checkpoint is None or not spec.checkpoint.final:
            return True
        last = next((c for c in checkpoints.sealed_checkpoints(folder) if c.step == spec.max_steps), None)
        return last is not None and checkpoints.verify(last, fingerprint) is None

    def _resume_predecessor(self, trial: "optuna.Trial", trial_dir: Path) -> tuple[int, int] | None:
        """A retry (requeued, pre-empted, its heartbeat lost): move the nearest predecessor's last complete
        checkpoint into this trial's folder, where the trial process resumes it; (its trial number, step)."""
        if self.study.study.checkpoint_steps is None or ledger.retry_of(trial) is None:
            return None
        trials = {t.number: t for t in self.ostudy.get_trials(deepcopy=False)}
        me = trials.get(trial.number)
        if me is None:
            return None
        mine = (self.study.output_dir / TRIALS_DIR).resolve()
        for folder in ledger.predecessor_dirs(trials, me):
            source = Path(folder)
            if not _inside(source, mine) and (mine / source.name).is_dir():
                source = mine / source.name  # the journal names another copy of this run folder: use this study's own
            # moved only within this study's own folders, copied from anywhere else (never emptied there);
            # a folder on a host this one cannot see has none: the retry starts over
            moved = carry_over(source, trial_dir, move=_inside(source, mine))
            if moved is not None:
                ledger.record_resumed_from(trial, moved.step)
                number = next((n for n, t in trials.items() if ledger.trial_dir(t) == folder), -1)
                return number, moved.step
        return None

    def _progress(self, trial: "optuna.Trial", run: Running) -> Callable[[dict[str, Any]], None]:
        """Report to the pruner at shared checkpoints of generated compute, not at optimizer steps.

        The step Optuna sees is generated completions, so a G=16 trial is judged against a G=2
        trial that has generated as many. A held-out objective (eval_*) is reported at the
        evaluation points, which every arm shares (trainer/evaluation.py places them at equal
        completions); a training objective at the checkpoints of search/fidelity.py.
        """

        rows: list[dict[str, Any]] = []
        prune = self.study.study.pruner != "none" and len(self.study.directions) == 1 \
            and not (run.cell is not None and run.cell.role == PREFIX_ROLE)  # a prefix is no arm's result: never pruned
        metric = self.study.metric_names[0]
        held_out = metric in EVAL_KEYS
        largest = max((p.generation_batch_size for p in self.study.space.feasible), default=1)
        clock = ComputeClock(quantum(largest, self.plan.completions))
        reported: set[int] = set()
        asked = False
        quiet_until = 0.0  # after a report the storage refused: reports wait this long (the trial trains on meanwhile)

        def checkpoints() -> list[tuple[int, float]]:
            """(completions, objective so far) at each checkpoint not yet reported."""
            if held_out:
                evals = read_jsonl(run.trial_dir / EVAL_FILE)[0]
                out = []
                for i, e in enumerate(evals):
                    at = int(e.get("completions") or 0)
                    if at > 0 and at not in reported:
                        value = summarize_eval(evals[: i + 1]).get(metric)
                        if value is not None:
                            out.append((at, float(value)))
                return out
            crossed = clock.advance(rows[-1])
            value = summarize(rows).get(metric) if crossed else None
            return [(c, float(value)) for c in crossed] if value is not None else []

        def on_progress(row: dict[str, Any]) -> None:
            nonlocal asked, quiet_until
            rows.append(row)
            run.step = int(row.get("step", run.step))
            run.train_seconds = float(row.get("train_seconds", run.train_seconds) or 0.0)
            if row.get("reward") is not None:
                run.reward = float(row["reward"])
            if not prune or asked or time.monotonic() < quiet_until:
                return
            points = checkpoints()
            try:
                for at, value in points:
                    trial.report(value, at)
                    reported.add(at)
                if points and trial.should_prune():
                    asked = True
                    ledger.record_pruned_at(trial, points[-1][0])
                    _stop(run.trial_dir, Outcome.PRUNED.value)
            except Exception as e:  # the storage away: the trial trains on; its pruning waits for the storage
                if database_fault(e) is None:
                    raise
                quiet_until = time.monotonic() + REPORT_PAUSE_S

        return on_progress

    def _start_heartbeat(self, number: int, stop: threading.Event, trial_dir: Path) -> None:
        """Renew the trial's heartbeat every heartbeat_interval; should the storage say the trial is no longer
        RUNNING (taken over by another run), mark it taken in its folder so its process stops at once."""
        storage = self.storage
        trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(self.ostudy.study_name), number)
        interval = self.study.study.heartbeat_interval

        def beat() -> None:
            from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

            while not stop.is_set():
                try:
                    storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]  # RDBStorage only
                    now = storage.get_trial(trial_id)
                    if now.state != TrialState.RUNNING and not stop.is_set():
                        # another run judged this one dead while it was paused or cut off: its trial stops at once
                        mark_taken(trial_dir, f"taken over by another run ({ledger.reason(now) or now.state.name})")
                        return
                except Exception:  # noqa: BLE001 - a missed beat is retried; the grace period covers it
                    pass
                stop.wait(interval)

        threading.Thread(target=beat, name=f"heartbeat-{number}", daemon=True).start()

    def _tell(self, trial: "optuna.Trial", result: "TrialResult", token: str) -> Ended:
        """Record a trial's end; an interrupted one is queued again (`token`: ledger.requeue's, one per recording)."""
        reason = result.reason or ""
        if result.outcome is Outcome.INTERRUPTED:
            ledger.record_metrics(trial, result.metrics or {})
            counted = self.registry.stop_reason is None  # lost or killed, not stopped by the user
            outcome = ledger.requeue(self.ostudy, self.storage, trial.number, reason or "interrupted",
                                     max_retry=self.study.study.max_retry, counted=counted, token=token)
            return Ended(trial.number, (outcome or Outcome.INTERRUPTED).value, reason, fault=counted)
        told = ledger.tell(self.ostudy, trial, self.study, result)
        values = ledger.objective_values(self.study, result.metrics or {}) if told is not Outcome.FAILED else None
        return Ended(trial.number, told.value, reason, values)

    def _fault(self, trial: "optuna.Trial", stage: str, exc: BaseException | None, detail: str = "") -> Ended:
        """An infrastructure fault: the cell is not to blame, so it is queued again (within max_retry)."""
        what = f"{type(exc).__name__}: {exc}" if exc is not None else detail
        reason, token = f"infrastructure fault while {stage}: {what}", ledger.requeue_token()
        outcome = self._patiently(lambda: ledger.requeue(self.ostudy, self.storage, trial.number, reason,
                                                         max_retry=self.study.study.max_retry, counted=True,
                                                         token=token),
                                  "queueing the trial again")
        return Ended(trial.number, (outcome or Outcome.INTERRUPTED).value, reason, fault=True)

    def _failed(self, trial: "optuna.Trial", reason: str) -> Ended:
        return Ended(trial.number, self._patiently(lambda: ledger.fail(self.ostudy, trial, reason), "recording the trial").value,
                     reason)


def _adopt(spec: Any, source: Path) -> "TrialResult":
    """A finished attempt's files copied into this trial's folder (never moved: the source stays whole until the
    storage recorded this one), and its result read as the launcher reads a trial that just ended."""
    target = spec.path
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():  # its own marks (taken over, its lease, a stop) are that attempt's, not this one's
        if entry.is_file() and entry.name not in (SPEC_FILE, TAKEN_FILE, LEASE_FILE, STOP_FILE):
            shutil.copy2(entry, target / entry.name)
    spec.save()
    return finish(spec, 0, timed_out=False, stop_reason=None, log_path=target / LOG_FILE)


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder)
    except OSError:
        return False


def _rss_mb() -> float:
    return round(psutil.Process().memory_info().rss / 2**20, 1)
