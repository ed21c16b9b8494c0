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
  storage calls for a trial whose heartbeat went stale. Faults are retried `study.max_retry`
  times per cell (counted along the `retry_of` chain); after that the trial is failed with the reason.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grpo_ablate.study import ledger
from grpo_ablate.study.artifacts import upload_trial_artifacts
from grpo_ablate.study.devices import claim_cpu_share
from grpo_ablate.study.limits import resolve_timeout
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.trainer.checkpoints import carry_over, remove_checkpoints
from grpo_ablate.trainer.launchers import launcher_for, request_stop
from grpo_ablate.vocab import EVAL_FILE, LOG_FILE, TRIALS_DIR, Cell, Outcome, trial_dir_name
from grpo_ablate.metrics import EVAL_KEYS, read_jsonl, summarize, summarize_eval
from grpo_ablate.search.fidelity import ComputeClock, budget_completions, quantum

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study
    from grpo_ablate.trainer.spec import TrialResult

__all__ = ["Running", "Registry", "Ended", "TrialLifecycle", "HOST", "trial_dir_of"]

HOST = os.environ.get("GRPO_ABLATE_HOST") or socket.gethostname()  # override where containers share a name
# errnos that say the machine, not the cell, is at fault when they reach a trial's own files
_INFRA_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)


def trial_dir_of(study: "Study", number: int) -> Path:
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
        self.stop = threading.Event()
        self.stop_reason: str | None = None  # "interrupted" once the study was asked to stop

    def register(self, number: int, trial_dir: Path) -> Running:
        """Call with the lock held."""
        run = Running(number, trial_dir, started=time.monotonic())
        self.running[number] = run
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
    def __init__(self, study: "Study", ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage",
                 artifacts: "optuna.artifacts.FileSystemArtifactStore", registry: Registry, *, workers: int,
                 heartbeat: bool, say: Callable[[str], None]) -> None:
        self.study = study
        self.ostudy = ostudy
        self.storage = storage
        self.artifacts = artifacts
        self.registry = registry
        self.workers = workers
        self.heartbeat = heartbeat
        self.say = say
        # seconds before a trial is stopped: study.trial_timeout, resolved by the runner (study/limits.py)
        self.trial_timeout_s, _ = resolve_timeout(study.study.trial_timeout, None)

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
            ledger.started(trial, HOST, os.getpid(), heartbeat=self.heartbeat, max_retry=self.study.study.max_retry)
            try:
                cell = ledger.suggest_cell(trial, self.study)
                ledger.set_trial_dir(trial, run.trial_dir)
                run.trial_dir.mkdir(parents=True, exist_ok=True)
                if env.get("CUDA_VISIBLE_DEVICES") == "":
                    share = claim_cpu_share(self.workers, self.study.world_size)
                    env = {**env, **share.env()}
                resumed = self._resume_predecessor(trial, run.trial_dir)
                spec = build_spec(self.study, cell, run.trial_dir, env, timeout=self.trial_timeout_s)
            except OSError as e:
                return self._fault(trial, "preparing the trial", e)
            except Exception as e:  # noqa: BLE001 - a trial that cannot be set up fails, the study goes on
                return self._failed(trial, f"could not prepare the trial: {type(e).__name__}: {e}")
            run.cell, run.max_steps = cell, spec.budget.get("max_steps")
            self.say(f"[trial {trial.number}] start {cell.role}: {cell.arm.label}, seed {cell.seed}"
                     + (f", {share.threads} thread(s)" if share else "")
                     + (f", resuming trial {resumed[0]}'s checkpoint at step {resumed[1]}" if resumed else "")
                     + f" -> {run.trial_dir}")
            if self.heartbeat:
                self._start_heartbeat(trial.number, beat)
            try:
                result = launcher_for(spec).run(spec, on_progress=self._progress(trial, run))
                upload_trial_artifacts(self.artifacts, trial, run.trial_dir)
            except OSError as e:
                return self._fault(trial, "running the trial (the orchestrator's own files)", e)
            except Exception as e:  # noqa: BLE001 - run_trial never raises for the trial's own failure: a bug
                return self._failed(trial, f"the orchestrator failed running the trial: {type(e).__name__}: {e}")
            ledger.record_orchestrator_rss(trial, _rss_mb())
            ended = self._tell(trial, result)
            if ended.outcome != Outcome.INTERRUPTED.value and not self.study.study.keep_checkpoints:
                remove_checkpoints(run.trial_dir)  # ended for good: no retry will resume them
            return ended
        finally:
            beat.set()
            if share is not None:
                share.release()
            self.registry.unregister(trial.number)

    def _resume_predecessor(self, trial: "optuna.Trial", trial_dir: Path) -> tuple[int, int] | None:
        """A retry (requeued, pre-empted, its heartbeat lost): move the nearest predecessor's last complete
        checkpoint into this trial's folder, where the trial process resumes it; (its trial number, step)."""
        if self.study.study.checkpoint_steps is None or ledger.retry_of(trial) is None:
            return None
        trials = {t.number: t for t in self.ostudy.get_trials(deepcopy=False)}
        me = trials.get(trial.number)
        if me is None:
            return None
        for folder in ledger.predecessor_dirs(trials, me):
            moved = carry_over(folder, trial_dir)  # a folder on a host this one cannot see has none: starts over
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
        prune = self.study.study.pruner != "none" and len(self.study.directions) == 1
        metric = self.study.metric_names[0]
        held_out = metric in EVAL_KEYS
        largest = max((p.generation_batch_size for p in self.study.space.feasible), default=1)
        clock = ComputeClock(quantum(largest, budget_completions(self.study)))
        reported: set[int] = set()
        asked = False

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
            nonlocal asked
            rows.append(row)
            run.step = int(row.get("step", run.step))
            run.train_seconds = float(row.get("train_seconds", run.train_seconds) or 0.0)
            if row.get("reward") is not None:
                run.reward = float(row["reward"])
            if not prune or asked:
                return
            points = checkpoints()
            for at, value in points:
                trial.report(value, at)
                reported.add(at)
            if points and trial.should_prune():
                asked = True
                ledger.record_pruned_at(trial, points[-1][0])
                _stop(run.trial_dir, Outcome.PRUNED.value)

        return on_progress

    def _start_heartbeat(self, number: int, stop: threading.Event) -> None:
        storage = self.storage
        trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(self.ostudy.study_name), number)
        interval = self.study.study.heartbeat_interval

        def beat() -> None:
            while not stop.is_set():
                try:
                    storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]  # RDBStorage only
                except Exception:  # noqa: BLE001 - a missed beat is retried; the grace period covers it
                    pass
                stop.wait(interval)

        threading.Thread(target=beat, name=f"heartbeat-{number}", daemon=True).start()

    def _tell(self, trial: "optuna.Trial", result: "TrialResult") -> Ended:
        reason = result.reason or ""
        if result.outcome is Outcome.INTERRUPTED:
            ledger.record_metrics(trial, result.metrics or {})
            counted = self.registry.stop_reason is None  # lost or killed, not stopped by the user
            outcome = ledger.requeue(self.ostudy, self.storage, trial.number, reason or "interrupted",
                                     max_retry=self.study.study.max_retry, counted=counted)
            return Ended(trial.number, (outcome or Outcome.INTERRUPTED).value, reason, fault=counted)
        if result.outcome is Outcome.FAILED and _disk_fault(result):
            return self._fault(trial, "running the trial (its files)", None, reason)
        told = ledger.tell(self.ostudy, trial, self.study, result)
        values = ledger.objective_values(self.study, result.metrics or {}) if told is not Outcome.FAILED else None
        return Ended(trial.number, told.value, reason, values)

    def _fault(self, trial: "optuna.Trial", stage: str, exc: BaseException | None, detail: str = "") -> Ended:
        """An infrastructure fault: the cell is not to blame, so it is queued again (within max_retry)."""
        what = f"{type(exc).__name__}: {exc}" if exc is not None else detail
        reason = f"infrastructure fault while {stage}: {what}"
        outcome = ledger.requeue(self.ostudy, self.storage, trial.number, reason,
                                 max_retry=self.study.study.max_retry, counted=True)
        return Ended(trial.number, (outcome or Outcome.INTERRUPTED).value, reason, fault=True)

    def _failed(self, trial: "optuna.Trial", reason: str) -> Ended:
        return Ended(trial.number, ledger.fail(self.ostudy, trial, reason).value, reason)


def _disk_fault(result: "TrialResult") -> bool:
    """A trial process that died of a full or broken disk: the machine's fault, not the cell's."""
    text = f"{result.exception_message or ''} {result.reason or ''}"
    return any(f"[Errno {code}]" in text for code in _INFRA_ERRNOS)


def _rss_mb() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)
