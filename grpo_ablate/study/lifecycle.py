"""One trial's lifecycle, in one place: ask -> register -> start -> heartbeat -> stop -> classify -> tell -> requeue.

    grpo-ablate run studies/tiny-cpu.yaml      # every trial of a study goes through TrialLifecycle

The only module that knows both an Optuna trial and a trial process. Outcomes map to Optuna
states so that samplers learn the right thing:
- completed -> COMPLETE with the objective values and the constraint `oom` = -1 (feasible);
- oom -> COMPLETE with `oom` = +1 (violated): the sampler learns where memory ends, which a
  FAIL would not teach it; its values are the partial metrics, else 0;
- pruned -> PRUNED; failed -> FAIL with the reason;
- interrupted (the study was stopped, the trial was lost, or an infrastructure fault such as a
  full disk) -> FAIL, and the cell is queued again. Faults are retried `study.max_retry` times
  per cell (counted along the `retry_of` chain); after that the trial is failed with the reason.
"""

from __future__ import annotations

import errno
import math
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grpo_ablate.config import FloatRange
from grpo_ablate.plan import batch_is_searched
from grpo_ablate.study.artifacts import upload_trial_artifacts
from grpo_ablate.study.devices import claim_cpu_share
from grpo_ablate.study.trackers import tracker_settings
from grpo_ablate.trainer.launch import request_stop
from grpo_ablate.trainer.launchers import launcher_for
from grpo_ablate.vocab import (EVAL_FILE, HEADLINE_METRICS, TRIALS_DIR, Arm, Cell, Outcome, generations_text, parse_generations,
                               trial_dir_name)

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import Study
    from grpo_ablate.trainer.spec import TrialResult, TrialSpec

__all__ = ["suggest_params", "build_spec", "objective_values", "record_result", "requeue", "ask",
           "Running", "Registry", "Ended", "TrialLifecycle", "HOST"]

HOST = os.environ.get("GRPO_ABLATE_HOST") or socket.gethostname()  # override where containers share a name
# errnos that say the machine, not the cell, is at fault when they reach a trial's own files
_INFRA_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)


# ------------------------------------------------------------------ trial <-> cell <-> spec


def suggest_params(trial: "optuna.Trial", study: "Study") -> Cell:
    """Draw a trial's settings from the feasible space only: TRL never sees a pair it rejects.

    The arm goes through search/encoding.py (G ordinal, the batch conditional on G). The seed is
    never searched: a queued cell carries it (user attr "cell" or "seed", else the planned
    param "seed"); an adaptive sampler's trial takes its arm's next replicate seed.
    """
    from grpo_ablate.search.encoding import DEFAULT_ENCODING, replicate_seed, suggest_arm
    from grpo_ablate.vocab import ARM_ATTR

    planned = study.study.sampler in ("grid", "ablation")
    if planned:  # the queued params name the arm the way plan.cell_params wrote them
        arm = _planned_arm(trial, study)
    else:
        arm = suggest_arm(trial, study.space, study.temperatures(), study.fixed_temperature(), DEFAULT_ENCODING)
    seeds = list(study.study.seeds)
    seed = _queued_seed(trial)
    if seed is None and planned:
        seed = int(trial.suggest_categorical("seed", seeds))  # type: ignore[arg-type]
    if seed is None:
        seed = replicate_seed(seeds, _replicates(trial, arm.key))
    role = str(trial.user_attrs.get("role") or study.sampler_kind)
    cell = Cell(arm, seed, role)
    trial.set_user_attr(ARM_ATTR, arm.key)  # groups replicates for the sampler's users and the dashboard
    trial.set_user_attr("cell", cell.key)  # a requeued retry keeps its seed
    return cell


def _planned_arm(trial: "optuna.Trial", study: "Study") -> Arm:
    space = study.space
    if batch_is_searched(study):
        pair = space.by_label(str(trial.suggest_categorical("generation", [p.label for p in space.feasible])))
    else:
        g = trial.suggest_categorical("num_generations", [generations_text(x) for x in space.generations])
        found = space.pair(parse_generations(g))
        assert found is not None
        pair = found
    t = study.temperatures()
    if isinstance(t, FloatRange):
        temperature = trial.suggest_float("temperature", t.low, t.high, log=t.log)
    elif isinstance(t, list):
        temperature = float(trial.suggest_categorical("temperature", [float(x) for x in t]))  # type: ignore[arg-type]
    else:
        temperature = study.fixed_temperature()
    return Arm(pair.num_generations, pair.generation_batch_size, float(temperature))


def _queued_seed(trial: "optuna.Trial") -> int | None:
    """The seed a queued cell (or a requeued retry) carries in its user attrs, if any."""
    cell = trial.user_attrs.get("cell")
    if isinstance(cell, str) and "|seed" in cell:
        try:
            return int(cell.rsplit("|seed", 1)[1])
        except ValueError:
            pass
    seed = trial.user_attrs.get("seed")
    return int(seed) if isinstance(seed, int) else None


def _replicates(trial: "optuna.Trial", arm_key: str) -> int:
    """How many earlier trials ran (or run) this arm: the next replicate's index."""
    from optuna.trial import TrialState

    from grpo_ablate.vocab import ARM_ATTR

    n = 0
    for t in trial.study.get_trials(deepcopy=False):
        if t.number == trial.number or t.state == TrialState.WAITING:
            continue
        if t.user_attrs.get(ARM_ATTR) == arm_key and t.user_attrs.get("outcome") != Outcome.INTERRUPTED.value:
            n += 1
    return n


def build_spec(study: "Study", cell: Cell, trial_dir: Path, env: dict[str, str] | None = None) -> "TrialSpec":
    """A trial process's whole input: the study's sections with this cell's settings merged in."""
    from grpo_ablate.trainer.spec import TrialSpec

    trainer = dict(study.trainer)
    trainer["num_generations"] = generations_text(cell.arm.num_generations)  # a schedule's label: trainer/scheduled.py
    trainer["temperature"] = cell.arm.temperature
    trainer["seed"] = cell.seed
    if study.space.batch_searched:
        trainer["generation_batch_size"] = cell.arm.generation_batch_size
        trainer.pop("steps_per_generation", None)
    trainer.pop("max_steps", None)  # the budget owns it
    tracked, tracker_env = tracker_settings(study, cell)
    trainer.update(tracked)
    env = {**tracker_env, **(env or {})}
    hardware = study.hardware.model_dump()
    hardware["num_processes"] = study.world_size
    budget = study.budget.model_dump()
    if budget.get("max_steps") is None and isinstance(study.trainer.get("max_steps"), int):
        budget["max_steps"] = study.trainer["max_steps"]
    return TrialSpec(
        trial_dir=str(trial_dir),
        model=study.model.model_dump(),
        data=study.data.model_dump(),
        rewards=[r.model_dump() for r in study.rewards],
        trainer=trainer,
        budget=budget,
        hardware=hardware,
        params=cell.as_attrs(),
        evaluation=study.file.evaluation.model_dump() if study.file.evaluation is not None else None,
        timeout_s=study.study.trial_timeout,
        env=dict(env or {}),
    )


def trial_dir_of(study: "Study", number: int) -> Path:
    return (study.output_dir / TRIALS_DIR / trial_dir_name(number)).resolve()


def objective_values(study: "Study", metrics: dict[str, Any]) -> list[float] | None:
    vals = []
    for m in study.metric_names:
        v = metrics.get(m)
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return None
        vals.append(float(v))
    return vals


# ------------------------------------------------------------------ ask and tell


def ask(ostudy: "optuna.Study", planned: bool) -> "optuna.Trial | None":
    """The next trial: a queued cell, or (adaptive samplers) the sampler's proposal."""
    import optuna

    if not planned:
        return ostudy.ask()  # pops a queued retry first, else proposes
    # Private on purpose: Optuna has no public "pop a queued trial or give nothing". study.ask()
    # would create a fresh proposal when the queue is empty, and a planned study runs only its cells.
    trial_id = ostudy._pop_waiting_trial_id()
    return None if trial_id is None else optuna.Trial(ostudy, trial_id)


def record_result(ostudy: "optuna.Study", trial: "optuna.Trial", study: "Study", result: "TrialResult") -> str:
    """Tell a finished trial process (completed, oom, pruned, failed) to the study; the outcome's name."""
    from optuna.trial import TrialState

    outcome = result.outcome.value
    metrics = result.metrics or {}
    record_metrics(trial, metrics)
    trial.set_user_attr("outcome", outcome)
    if result.reason:
        trial.set_user_attr("reason", str(result.reason)[:2000])
    values = objective_values(study, metrics)
    if outcome == Outcome.COMPLETED.value:
        if values is None:
            missing = [m for m in study.metric_names if metrics.get(m) is None]
            trial.set_user_attr("outcome", Outcome.FAILED.value)
            trial.set_user_attr("reason", f"the trial finished but {missing} could not be computed (too few logged steps?)")
            ostudy.tell(trial, state=TrialState.FAIL)
            return Outcome.FAILED.value
        trial.set_constraint("oom", -1.0)
        ostudy.tell(trial, values)
    elif outcome == Outcome.OOM.value:
        trial.set_constraint("oom", 1.0)
        ostudy.tell(trial, values or [0.0] * len(study.metric_names))
    elif outcome == Outcome.PRUNED.value:
        ostudy.tell(trial, state=TrialState.PRUNED)
    else:
        ostudy.tell(trial, state=TrialState.FAIL)
    return outcome


def record_metrics(trial: "optuna.Trial", metrics: dict[str, Any]) -> None:
    """The headline metrics as user attributes (partial ones too: the report and dashboard read them)."""
    for key in HEADLINE_METRICS:
        if key in metrics:
            trial.set_user_attr(key, _json_safe(metrics[key]))


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def counted_retries(trials: dict[int, "FrozenTrial"], trial: "FrozenTrial") -> int:
    """How often this trial's cell was already requeued for a fault (a stopped study's requeues are free)."""
    n, seen = 0, set()
    parent = trial.user_attrs.get("retry_of")
    while isinstance(parent, int) and parent in trials and parent not in seen:
        seen.add(parent)
        before = trials[parent]
        if before.user_attrs.get("retry_counted", True):
            n += 1
        parent = before.user_attrs.get("retry_of")
    return n


def requeue(ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage", number: int, reason: str, *,
            max_retry: int, counted: bool) -> str | None:
    """Fail a trial that did not finish through no fault of its cell, and queue the cell again.

    The one requeue of the package: the lifecycle's interrupted and faulted trials and the trials
    of a dead orchestrator all come here. `counted`: a fault (not a stop the user asked for),
    which uses up one of the cell's `max_retry` retries; once they are spent the trial is failed
    with the reason instead. Returns the outcome recorded ("interrupted" or "failed"), or None
    when the trial was already finished (another process got there first).
    """
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    trials = {t.number: t for t in ostudy.get_trials(deepcopy=False)}
    me = trials[number]
    retries = counted_retries(trials, me)
    give_up = counted and retries >= max_retry
    outcome = Outcome.FAILED if give_up else Outcome.INTERRUPTED
    if give_up:
        reason = f"retried {retries} time(s) (study.max_retry={max_retry}); the last attempt: {reason}"
    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(ostudy.study_name), number)
    try:  # attributes first: a finished trial takes no more, so a second reaper stops here
        storage.set_trial_user_attr(trial_id, "outcome", outcome.value)
        storage.set_trial_user_attr(trial_id, "reason", reason[:2000])
        storage.set_trial_user_attr(trial_id, "retry_counted", counted)
        storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    except UpdateFinishedTrialError:
        return None
    if not give_up:
        attrs: dict[str, Any] = {"role": me.user_attrs.get("role", ""), "retry_of": number}
        if me.user_attrs.get("cell"):
            attrs["cell"] = me.user_attrs["cell"]
        # A trial faulted before its params were suggested still has its queued cell's params.
        params = dict(me.params) or dict(me.system_attrs.get("fixed_params") or {})
        ostudy.enqueue_trial(params, user_attrs=attrs)
    return outcome.value


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
        self.planned = study.study.sampler in ("grid", "ablation")

    # ---- ask -> register

    def ask_and_register(self) -> "optuna.Trial | None":
        """Call with the registry's lock held: the trial is registered before any further round trip."""
        trial = ask(self.ostudy, self.planned)
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
            trial.set_user_attr("host", HOST)
            trial.set_user_attr("pid", os.getpid())
            try:
                cell = suggest_params(trial, self.study)
                for k, v in cell.as_attrs().items():
                    trial.set_user_attr(k, v)
                trial.set_user_attr("trial_dir", str(run.trial_dir))
                run.trial_dir.mkdir(parents=True, exist_ok=True)
                if env.get("CUDA_VISIBLE_DEVICES") == "":
                    share = claim_cpu_share(self.workers, self.study.world_size)
                    env = {**env, **share.env()}
                spec = build_spec(self.study, cell, run.trial_dir, env)
            except OSError as e:
                return self._fault(trial, "preparing the trial", e)
            except Exception as e:  # noqa: BLE001 - a trial that cannot be set up fails, the study goes on
                return self._failed(trial, f"could not prepare the trial: {type(e).__name__}: {e}")
            run.cell, run.max_steps = cell, spec.budget.get("max_steps")
            self.say(f"[trial {trial.number}] start {cell.role}: {cell.arm.label}, seed {cell.seed}"
                     + (f", {share.threads} thread(s)" if share else "") + f" -> {run.trial_dir}")
            if self.heartbeat:
                self._start_heartbeat(trial.number, beat)
            try:
                result = launcher_for(spec).run(spec, on_progress=self._progress(trial, run))
                upload_trial_artifacts(self.artifacts, trial, run.trial_dir)
            except OSError as e:
                return self._fault(trial, "running the trial (the orchestrator's own files)", e)
            except Exception as e:  # noqa: BLE001 - run_trial never raises for the trial's own failure: a bug
                return self._failed(trial, f"the orchestrator failed running the trial: {type(e).__name__}: {e}")
            trial.set_user_attr("orchestrator_rss_mb", _rss_mb())  # benchmarks/workers.py checks it stays flat
            return self._tell(trial, result)
        finally:
            beat.set()
            if share is not None:
                share.release()
            self.registry.unregister(trial.number)

    def _progress(self, trial: "optuna.Trial", run: Running) -> Callable[[dict[str, Any]], None]:
        """Report to the pruner at shared checkpoints of generated compute, not at optimizer steps.

        The step Optuna sees is generated completions, so a G=16 trial is judged against a G=2
        trial that has generated as many. A held-out objective (eval_*) is reported at the
        evaluation points, which every arm shares (trainer/evaluation.py places them at equal
        completions); a training objective at the checkpoints of search/fidelity.py.
        """
        from grpo_ablate.metrics import EVAL_KEYS, read_jsonl, summarize, summarize_eval
        from grpo_ablate.search.fidelity import ComputeClock, budget_completions, quantum

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
                trial.set_user_attr("pruned_at_completions", points[-1][0])
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
            record_metrics(trial, result.metrics or {})
            counted = self.registry.stop_reason is None  # lost or killed, not stopped by the user
            outcome = requeue(self.ostudy, self.storage, trial.number, reason or "interrupted",
                              max_retry=self.study.study.max_retry, counted=counted)
            return Ended(trial.number, outcome or Outcome.INTERRUPTED.value, reason, fault=counted)
        if result.outcome is Outcome.FAILED and _disk_fault(result):
            return self._fault(trial, "running the trial (its files)", None, reason)
        outcome = record_result(self.ostudy, trial, self.study, result)
        values = objective_values(self.study, result.metrics or {}) if outcome != Outcome.FAILED.value else None
        return Ended(trial.number, outcome, reason, values)

    def _fault(self, trial: "optuna.Trial", stage: str, exc: BaseException | None, detail: str = "") -> Ended:
        """An infrastructure fault: the cell is not to blame, so it is queued again (within max_retry)."""
        what = f"{type(exc).__name__}: {exc}" if exc is not None else detail
        reason = f"infrastructure fault while {stage}: {what}"
        outcome = requeue(self.ostudy, self.storage, trial.number, reason, max_retry=self.study.study.max_retry,
                          counted=True)
        return Ended(trial.number, outcome or Outcome.INTERRUPTED.value, reason, fault=True)

    def _failed(self, trial: "optuna.Trial", reason: str) -> Ended:
        from optuna.trial import TrialState

        trial.set_user_attr("outcome", Outcome.FAILED.value)
        trial.set_user_attr("reason", reason[:2000])
        self.ostudy.tell(trial, state=TrialState.FAIL)
        return Ended(trial.number, Outcome.FAILED.value, reason)


def _disk_fault(result: "TrialResult") -> bool:
    """A trial process that died of a full or broken disk: the machine's fault, not the cell's."""
    text = f"{result.exception_message or ''} {result.reason or ''}"
    return any(f"[Errno {code}]" in text for code in _INFRA_ERRNOS)


def _rss_mb() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)
