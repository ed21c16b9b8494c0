"""A trial's state in the Optuna study, owned by one module: every read and write of it comes here.

    from grpo_ablate.study import ledger
    ledger.queue(ostudy, study, cells)      # the package's one call of enqueue_trial
    ledger.outcome(frozen_trial)            # completed | oom | pruned | failed | interrupted | running

Several modules used to spell the attribute names, the params of a cell and the out-of-memory
rule each in their own way, and the copies gave different answers. This module holds:
- the names of the trial and study attributes, each spelled once;
- queueing a cell in its study's one params encoding (search/encoding.py: PLAN for grid and
  ablation studies, the adaptive samplers' DEFAULT_ENCODING otherwise). The seed is never a
  param: it rides in the CELL attr. The params queued are kept in QUEUED_PARAMS, so a requeue
  needs no Optuna internals;
- a trial's cell (`suggest_cell`): its arm through the encoding, its seed from the queued cell
  or, for an adaptive sampler's proposal, the first study seed the arm has not run or imported
  (`next_seed`: never a seed it ran, which would repeat a trial bit for bit);
- the outcome of a FrozenTrial (`outcome`): our OUTCOME attr when present, else what the state
  implies, out of memory being a violated constraint read through the public
  `FrozenTrial.constraints`; "finished" (counts toward n_trials) and "result" (a completed
  trial with values: what racing, warm starts and the console compare);
- telling a trial process's result (`tell`), and `requeue`.

Requeue, the one path for a trial that ended through no fault of its cell: it fails as
`interrupted` and its cell is queued again with RETRY_OF; faults are retried `max_retry` times
per cell, counted along the RETRY_OF chain, after which the trial fails with the reason. The
lifecycle's interrupted and faulted trials, the runner's dead local trials and, on RDB storages,
trials whose heartbeat went stale all end this way: `StaleTrialRequeue` is installed as the
storage's heartbeat_stale_trial_callback in place of Optuna's own retry. Optuna fails a stale
trial before calling back, and a failed trial takes no more attributes, so the outcome a lost
trial gets is written when it starts (ON_LOSS, decided from its chain's retries so far): both
paths end with the same outcome and the same count.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from grpo_ablate.vocab import ARM_ATTR, COPY_ATTR, HEADLINE_METRICS, PROBE_ROLE, RACING_ATTR, SPACE_ATTR, Cell, Outcome

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import Study
    from grpo_ablate.trainer.spec import TrialResult
    from grpo_ablate.vocab import Arm

__all__ = [
    # trial attributes
    "OUTCOME", "REASON", "CELL", "ROLE", "SEED", "ARM_KEY", "RETRY_OF", "RETRY_COUNTED", "HOST", "PID", "TRIAL_DIR",
    "QUEUED_PARAMS", "ON_LOSS", "COPY_OF", "PRUNED_AT", "ORCHESTRATOR_RSS", "OOM_CONSTRAINT", "RESUMED_FROM",
    # study attributes
    "CONFIG", "VERSIONS", "OBJECTIVES", "BASELINE", "HARDWARE", "EVALUATION", "SPACE", "RACING", "PLAN_READY",
    # reading
    "outcome_of", "outcome", "reason", "is_copy", "ran_here", "is_finished", "is_result", "seed_of", "cell_of",
    "owner", "counted_retries", "predecessor_dirs", "FINISHED",
    # writing
    "cell_params", "enqueue", "queue", "ask", "suggest_cell", "next_seed", "started", "set_trial_dir", "tell", "fail",
    "record_metrics", "objective_values", "requeue", "StaleTrialRequeue", "cancel_queued", "is_cancelled", "CANCELLED",
]

# ---------------------------------------------------------------- attribute names

# trial user attributes
OUTCOME = "outcome"  # an Outcome's value, written when the trial ends
REASON = "reason"  # why it did not complete (at most 2000 characters)
CELL = "cell"  # Cell.key: the arm and the seed; a queued cell and its retries carry it
ROLE = "role"  # why the trial exists: "baseline", "num_generations=4", "grid", a sampler's name
SEED = "seed"  # the training seed (Cell.as_attrs writes it with the arm's knobs)
ARM_KEY = ARM_ATTR  # Arm.key: groups the replicates (seeds) of one configuration
RETRY_OF = "retry_of"  # the number of the trial this one retries
RETRY_COUNTED = "retry_counted"  # False when the trial was requeued for a stop the user asked for
HOST = "host"  # the orchestrator that ran it, and its pid: a dead local orchestrator's trials are requeued
PID = "pid"
TRIAL_DIR = "trial_dir"  # the trial's folder (spec.json, metrics.jsonl, ...)
QUEUED_PARAMS = "queued_params"  # the params the cell was queued with
ON_LOSS = "on_heartbeat_loss"  # {"outcome", "reason"}: what the trial becomes if its heartbeat goes stale
COPY_OF = COPY_ATTR  # a warm start's copy of another study's trial ("<study>#<number>"): never ran here
PRUNED_AT = "pruned_at_completions"
CANCELLED = "cancelled"  # why a queued cell was removed before it ran (a settled arm's): never a result, never run
ORCHESTRATOR_RSS = "orchestrator_rss_mb"  # benchmarks/workers.py checks it stays flat
RESUMED_FROM = "resumed_from_step"  # a retry that resumed its predecessor's checkpoint: the step it resumed at
OOM_CONSTRAINT = "oom"  # the constraint: -1 fits in memory, +1 ran out (a COMPLETE trial the sampler learns from)

# study user attributes
CONFIG = "config"  # the resolved study file, password masked
VERSIONS = "versions"
OBJECTIVES = "objectives"
BASELINE = "baseline"  # the ablation's baseline arm, Arm.as_dict()
HARDWARE = "hardware"
EVALUATION = "evaluation"
SPACE = SPACE_ATTR
RACING = RACING_ATTR
PLAN_READY = "plan_ready"  # the creator queued the plan

FINISHED = frozenset({Outcome.COMPLETED, Outcome.OOM, Outcome.PRUNED, Outcome.FAILED})
_OUTCOMES = {o.value: o for o in Outcome}
_REASON_CHARS = 2000

# ---------------------------------------------------------------- reading a trial


def outcome_of(state: str, user_attrs: Mapping[str, Any], constraints: Mapping[str, float]) -> Outcome:
    """The one rule: how a trial in Optuna `state` (a TrialState name) ended.

    A running or queued trial is running. Otherwise our OUTCOME attr decides; without one, a
    failed trial that carries ON_LOSS was lost with its worker (the heartbeat path); else the
    state decides, and a COMPLETE trial with a violated constraint ran out of memory.
    """
    if state in ("RUNNING", "WAITING"):
        return Outcome.RUNNING
    attr = user_attrs.get(OUTCOME)
    if isinstance(attr, str) and attr in _OUTCOMES:
        return _OUTCOMES[attr]
    if state == "PRUNED":
        return Outcome.PRUNED
    if state == "FAIL":
        lost = user_attrs.get(ON_LOSS)
        if isinstance(lost, Mapping) and lost.get(OUTCOME) in _OUTCOMES:
            return _OUTCOMES[lost[OUTCOME]]
        return Outcome.FAILED
    violated = any(_positive(v) for v in constraints.values())
    return Outcome.OOM if violated else Outcome.COMPLETED


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def outcome(ft: "FrozenTrial") -> Outcome:
    return outcome_of(ft.state.name, ft.user_attrs, ft.constraints)


def reason(ft: "FrozenTrial") -> str | None:
    """Why the trial did not complete, when it says; a lost trial's reason was written when it started."""
    given = ft.user_attrs.get(REASON)
    if given not in (None, ""):
        return str(given)
    lost = ft.user_attrs.get(ON_LOSS)
    if ft.state.name == "FAIL" and OUTCOME not in ft.user_attrs and isinstance(lost, Mapping) and lost.get(REASON):
        return str(lost[REASON])
    return None


def is_cancelled(ft: "FrozenTrial") -> bool:
    """A queued cell removed before it ran (`cancel_queued`): no result, not finished, never resumed."""
    return ft.user_attrs.get(CANCELLED) is not None


def is_copy(ft: "FrozenTrial") -> bool:
    """A warm start's copy of another study's trial: it teaches the sampler, it never ran here."""
    return ft.user_attrs.get(COPY_OF) is not None


def ran_here(ft: "FrozenTrial") -> bool:
    """Neither a warm start's copy nor an out-of-memory pair an earlier version's probe recorded."""
    return not is_copy(ft) and ft.user_attrs.get(ROLE) != PROBE_ROLE


def is_finished(ft: "FrozenTrial") -> bool:
    """Counts toward the study's n_trials: it ran here and ended for good (a requeued trial did not)."""
    return ran_here(ft) and outcome(ft) in FINISHED


def is_result(ft: "FrozenTrial") -> bool:
    """A completed trial with objective values: never an out-of-memory trial's placeholder zeros."""
    return outcome(ft) is Outcome.COMPLETED and bool(ft.values)


def seed_of(user_attrs: Mapping[str, Any]) -> int | None:
    """The seed a queued cell (or a requeued retry) carries, else the SEED attr."""
    cell = user_attrs.get(CELL)
    if isinstance(cell, str) and "|seed" in cell:
        try:
            return int(cell.rsplit("|seed", 1)[1])
        except ValueError:
            pass
    seed = user_attrs.get(SEED)
    return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None


def cell_of(ft: "FrozenTrial") -> Cell | None:
    """The trial's cell from its attributes (arm knobs, seed, role); None before they were written."""
    return Cell.from_attrs(ft.user_attrs)


def owner(ft: "FrozenTrial") -> tuple[str | None, int | None]:
    """(host, pid) of the orchestrator that runs or ran the trial."""
    host, pid = ft.user_attrs.get(HOST), ft.user_attrs.get(PID)
    return (host if isinstance(host, str) else None, pid if isinstance(pid, int) else None)


def counted_retries(trials: Mapping[int, "FrozenTrial"], trial: "FrozenTrial") -> int:
    """How often this trial's cell was already requeued for a fault (a stopped study's requeues are free)."""
    n, seen = 0, set()
    parent = trial.user_attrs.get(RETRY_OF)
    while isinstance(parent, int) and parent in trials and parent not in seen:
        seen.add(parent)
        before = trials[parent]
        if before.user_attrs.get(RETRY_COUNTED, True):
            n += 1
        parent = before.user_attrs.get(RETRY_OF)
    return n


def predecessor_dirs(trials: Mapping[int, "FrozenTrial"], trial: "FrozenTrial") -> list[str]:
    """The folders of the attempts this trial retries, nearest first (along RETRY_OF): where its checkpoint may be."""
    out, seen = [], set()
    parent = trial.user_attrs.get(RETRY_OF)
    while isinstance(parent, int) and parent in trials and parent not in seen:
        seen.add(parent)
        before = trials[parent]
        folder = before.user_attrs.get(TRIAL_DIR)
        if isinstance(folder, str) and folder:
            out.append(folder)
        parent = before.user_attrs.get(RETRY_OF)
    return out


# ---------------------------------------------------------------- queueing


def cell_params(study: "Study", arm: "Arm") -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(params, distributions) that make `suggest_cell` draw this arm in this study; None: not encodable."""
    from grpo_ablate.search.encoding import DEFAULT_ENCODING, PLAN, encode_arm

    return encode_arm(arm, study.space, study.temperatures(), PLAN if study.is_planned else DEFAULT_ENCODING)


def enqueue(ostudy: "optuna.Study", params: Mapping[str, Any], attrs: Mapping[str, Any]) -> None:
    """The package's one call of enqueue_trial: the params are kept beside the cell for a requeue.

    `queue` is the way to queue a study's cells; this is the primitive under it and the retries.
    (A trial an earlier version queued has no QUEUED_PARAMS: one that faults before its params
    are drawn is retried without them.)"""
    ostudy.enqueue_trial(dict(params), user_attrs={**attrs, QUEUED_PARAMS: dict(params)})


def queue(ostudy: "optuna.Study", study: "Study", cells: Iterable[Cell]) -> int:
    """Queue the cells the study does not hold yet (run, running, queued or imported); how many were queued.

    Cells are matched on CELL, so two seeds of one arm (the same params) are both queued, and a
    cell a warm start imported is never run again.
    """
    have = {t.user_attrs.get(CELL) for t in ostudy.get_trials(deepcopy=False)}
    n = 0
    for c in cells:
        encoded = cell_params(study, c.arm)
        if c.key in have or encoded is None:
            continue
        enqueue(ostudy, encoded[0], {ROLE: c.role, CELL: c.key})
        have.add(c.key)
        n += 1
    return n


def ask(ostudy: "optuna.Study", planned: bool) -> "optuna.Trial | None":
    """The next trial: a queued cell, or (adaptive samplers) the sampler's proposal."""
    import optuna

    if not planned:
        return ostudy.ask()  # pops a queued cell first, else proposes
    # Private on purpose: Optuna has no public "pop a queued trial or give nothing". study.ask()
    # would create a fresh proposal when the queue is empty, and a planned study runs only its cells.
    trial_id = ostudy._pop_waiting_trial_id()
    return None if trial_id is None else optuna.Trial(ostudy, trial_id)


def suggest_cell(trial: "optuna.Trial", study: "Study") -> Cell:
    """Draw the trial's cell and write it to the trial; only feasible pairs can be drawn.

    The arm goes through the study's encoding (queued params are replayed, an adaptive sampler
    proposes). The seed is never searched: a queued cell carries it; an adaptive proposal takes
    `next_seed`.
    """
    from grpo_ablate.search.encoding import DEFAULT_ENCODING, PLAN, suggest_arm

    encoding = PLAN if study.is_planned else DEFAULT_ENCODING
    arm = suggest_arm(trial, study.space, study.temperatures(), study.fixed_temperature(), encoding)
    seed = seed_of(trial.user_attrs)
    if seed is None:
        seed = next_seed(trial.study.get_trials(deepcopy=False), trial.number, arm.key, study.study.seeds)
    cell = Cell(arm, seed, str(trial.user_attrs.get(ROLE) or study.sampler_kind))
    for k, v in {**cell.as_attrs(), ARM_KEY: arm.key, CELL: cell.key}.items():
        trial.set_user_attr(k, v)
    return cell


def next_seed(trials: Sequence["FrozenTrial"], number: int, arm_key: str, seeds: Sequence[int]) -> int:
    """An adaptive proposal's seed: the first study seed this arm has not run, is not running and
    did not import. Once every listed seed has, a seed past all of them: the same arm on a seed it
    already ran would repeat that trial bit for bit and teach nothing."""
    from optuna.trial import TrialState

    used = {s for t in trials if t.number != number and t.state != TrialState.WAITING
            and t.user_attrs.get(ARM_KEY) == arm_key and outcome(t) is not Outcome.INTERRUPTED
            and (s := seed_of(t.user_attrs)) is not None}
    fresh = [int(s) for s in seeds if s not in used]
    return fresh[0] if fresh else max([*seeds, *used]) + 1


# ---------------------------------------------------------------- a running trial


def started(trial: "optuna.Trial", host: str, pid: int, *, heartbeat: bool, max_retry: int) -> None:
    """Who runs the trial; with heartbeats, also the outcome it gets should its heartbeat go stale."""
    trial.set_user_attr(HOST, host)
    trial.set_user_attr(PID, pid)
    if heartbeat:
        trials = {t.number: t for t in trial.study.get_trials(deepcopy=False)}
        lost, _ = _lost(trials, trials[trial.number], f"its heartbeat went stale: the orchestrator (pid {pid} on "
                        f"{host}) or its host died, or lost the database", max_retry, counted=True)
        trial.set_user_attr(ON_LOSS, lost)


def set_trial_dir(trial: "optuna.Trial", path: Any) -> None:
    trial.set_user_attr(TRIAL_DIR, str(path))


def _lost(trials: Mapping[int, "FrozenTrial"], me: "FrozenTrial", why: str, max_retry: int, *, counted: bool
          ) -> tuple[dict[str, str], bool]:
    """({OUTCOME, REASON}, retry?) for a trial that ended through no fault of its cell."""
    retries = counted_retries(trials, me)
    if counted and retries >= max_retry:
        why = f"retried {retries} time(s) (study.max_retry={max_retry}); the last attempt: {why}"
        return {OUTCOME: Outcome.FAILED.value, REASON: why[:_REASON_CHARS]}, False
    return {OUTCOME: Outcome.INTERRUPTED.value, REASON: why[:_REASON_CHARS]}, True


def objective_values(study: "Study", metrics: Mapping[str, Any]) -> list[float] | None:
    """The study's objective values from a trial's metrics; None when one is missing or not finite."""
    vals = []
    for m in study.metric_names:
        v = metrics.get(m)
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return None
        vals.append(float(v))
    return vals


def record_metrics(trial: "optuna.Trial", metrics: Mapping[str, Any]) -> None:
    """The headline metrics as user attributes (partial ones too: the report and dashboard read them)."""
    for key in HEADLINE_METRICS:
        if key in metrics:
            v = metrics[key]
            trial.set_user_attr(key, None if isinstance(v, float) and not math.isfinite(v) else v)


def tell(ostudy: "optuna.Study", trial: "optuna.Trial", study: "Study", result: "TrialResult") -> Outcome:
    """Tell a finished trial process (completed, oom, pruned, failed) to the study; the outcome recorded.

    Outcomes map to Optuna states so that samplers learn the right thing: completed -> COMPLETE
    with the constraint `oom` = -1; oom -> COMPLETE with `oom` = +1 (the sampler learns where
    memory ends, which a FAIL would not teach it; its values are the partial metrics, else 0);
    pruned -> PRUNED; failed -> FAIL with the reason.
    """
    from optuna.trial import TrialState

    metrics = result.metrics or {}
    record_metrics(trial, metrics)
    told = result.outcome
    trial.set_user_attr(OUTCOME, told.value)
    if result.reason:
        trial.set_user_attr(REASON, str(result.reason)[:_REASON_CHARS])
    values = objective_values(study, metrics)
    if told is Outcome.COMPLETED:
        if values is None:
            missing = [m for m in study.metric_names if metrics.get(m) is None]
            return fail(ostudy, trial, f"the trial finished but {missing} could not be computed (too few logged steps?)")
        trial.set_constraint(OOM_CONSTRAINT, -1.0)
        ostudy.tell(trial, values)
    elif told is Outcome.OOM:
        trial.set_constraint(OOM_CONSTRAINT, 1.0)
        ostudy.tell(trial, values or [0.0] * len(study.metric_names))
    elif told is Outcome.PRUNED:
        ostudy.tell(trial, state=TrialState.PRUNED)
    else:
        told = Outcome.FAILED
        trial.set_user_attr(OUTCOME, told.value)
        ostudy.tell(trial, state=TrialState.FAIL)
    return told


def fail(ostudy: "optuna.Study", trial: "optuna.Trial", why: str) -> Outcome:
    """The trial failed through its own fault: counted, not retried."""
    from optuna.trial import TrialState

    trial.set_user_attr(OUTCOME, Outcome.FAILED.value)
    trial.set_user_attr(REASON, why[:_REASON_CHARS])
    ostudy.tell(trial, state=TrialState.FAIL)
    return Outcome.FAILED


# ---------------------------------------------------------------- requeue


def _retry(ostudy: "optuna.Study", me: "FrozenTrial") -> None:
    """Queue the trial's cell again, in the params it ran (or was queued) with."""
    attrs: dict[str, Any] = {ROLE: me.user_attrs.get(ROLE, ""), RETRY_OF: me.number}
    if me.user_attrs.get(CELL):
        attrs[CELL] = me.user_attrs[CELL]
    # a trial that faulted before its params were suggested still has the params it was queued with
    enqueue(ostudy, dict(me.params) or dict(me.user_attrs.get(QUEUED_PARAMS) or {}), attrs)


def requeue(ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage", number: int, why: str, *,
            max_retry: int, counted: bool) -> Outcome | None:
    """Fail a trial that did not finish through no fault of its cell, and queue the cell again.

    `counted`: a fault (not a stop the user asked for), which uses up one of the cell's
    `max_retry` retries; once they are spent the trial is failed with the reason instead.
    Returns the outcome recorded (interrupted or failed), or None when the trial was already
    finished (another process got there first).
    """
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    trials = {t.number: t for t in ostudy.get_trials(deepcopy=False)}
    me = trials[number]
    lost, retry = _lost(trials, me, why, max_retry, counted=counted)
    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(ostudy.study_name), number)
    try:  # attributes first: a finished trial takes no more, so a second reaper stops here
        storage.set_trial_user_attr(trial_id, OUTCOME, lost[OUTCOME])
        storage.set_trial_user_attr(trial_id, REASON, lost[REASON])
        storage.set_trial_user_attr(trial_id, RETRY_COUNTED, counted)
        storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    except UpdateFinishedTrialError:
        return None
    if retry:
        _retry(ostudy, me)
    return _OUTCOMES[lost[OUTCOME]]


def cancel_queued(ostudy: "optuna.Study", arm_keys: Iterable[str], why: str) -> int:
    """Remove the queued (WAITING) cells of these arms: each fails as interrupted with CANCELLED set.

    Interrupted is no result and does not count toward n_trials (FINISHED); nothing queues a
    cancelled cell again (only `requeue` retries, and it is never called on one), and a rerun's
    `queue` skips cells already in the study, so a stopped study does not resume them. A cell a
    worker claims between the read and the write is left to run (its state is no longer WAITING).
    Returns how many were cancelled.
    """
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    keys = set(arm_keys)
    if not keys:
        return 0
    storage = ostudy._storage  # noqa: SLF001  the study's own storage: Optuna has no public write by trial id
    study_id = storage.get_study_id_from_name(ostudy.study_name)
    n = 0
    for t in ostudy.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        cell = cell_of(t)
        key = cell.arm.key if cell is not None else t.user_attrs.get(ARM_KEY)
        if key is None and isinstance(t.user_attrs.get(CELL), str):
            key = t.user_attrs[CELL].rsplit("|seed", 1)[0]
        if key not in keys:
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, t.number)
        if storage.get_trial(trial_id).state != TrialState.WAITING:
            continue
        try:
            storage.set_trial_user_attr(trial_id, CANCELLED, why[:_REASON_CHARS])
            storage.set_trial_user_attr(trial_id, OUTCOME, Outcome.INTERRUPTED.value)
            storage.set_trial_user_attr(trial_id, REASON, f"cancelled: {why}"[:_REASON_CHARS])
            storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
        except UpdateFinishedTrialError:
            continue
        n += 1
    return n


class StaleTrialRequeue:
    """The requeue as an RDB storage's heartbeat_stale_trial_callback (Optuna's signature).

    `optuna.storages.fail_stale_trials` (the runner calls it before each ask) fails a trial
    whose heartbeat went stale, then calls this with the failed trial. Its outcome was written
    when it started (ON_LOSS), from the same count `requeue` uses; this queues the cell again
    when that outcome is interrupted. Optuna's own RetryHeartbeatStaleTrialCallback would
    record no outcome and keep a retry count of its own.
    """

    def __init__(self, max_retry: int) -> None:
        self.max_retry = max_retry

    def __call__(self, ostudy: "optuna.Study", trial: "FrozenTrial") -> None:
        if OUTCOME in trial.user_attrs:  # its own process told or requeued it first
            return
        lost = trial.user_attrs.get(ON_LOSS)
        if isinstance(lost, Mapping):
            retry = lost.get(OUTCOME) == Outcome.INTERRUPTED.value
        else:  # it died before it started (or ran under an earlier version): decide now
            trials = {t.number: t for t in ostudy.get_trials(deepcopy=False)}
            retry = counted_retries(trials, trial) < self.max_retry
        if retry:
            _retry(ostudy, trial)
