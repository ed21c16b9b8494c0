"""A trial's state in the Optuna study, owned by one module: every read and write of it comes here.

    from grpo_ablate.study import ledger
    ledger.queue(ostudy, study, cells)      # the package's one call of enqueue_trial
    ledger.outcome(frozen_trial)            # completed | oom | pruned | failed | interrupted | running

Several modules used to spell the attribute names, the params of a cell and the out-of-memory
rule each in their own way, and the copies gave different answers. The names of the trial and
study attributes, and every read of them (`outcome`, `seed_of`, ...: out of memory is a violated
constraint read through the public `FrozenTrial.constraints`), are the trial-record schema's
(trial_record.py, below both the study and the report); they are re-exported here, so the
study has one handle. This module holds every write:
- queueing a cell in its study's one params encoding (search/encoding.py: PLAN for grid and
  ablation studies, the adaptive samplers' DEFAULT_ENCODING otherwise). The seed is never a
  param: it rides in the CELL attr. The params queued are kept in QUEUED_PARAMS, so a requeue
  needs no Optuna internals;
- a trial's cell (`suggest_cell`): its arm through the encoding, its seed from the queued cell
  or, for an adaptive sampler's proposal, the first study seed the arm has not run or imported
  (`next_seed`: never a seed it ran, which would repeat a trial bit for bit);
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
import secrets
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from grpo_ablate.plan.branching import branches
from grpo_ablate.records.trial_record import (ARM_KEY, BASELINE, BRANCHED_FROM, CANCELLED, CELL, CONFIG, COPY_OF, EVALUATION, FINISHED, HARDWARE,
                                      HOST, OBJECTIVES, ON_LOSS, OOM_CONSTRAINT, ORCHESTRATOR_RSS, OUTCOME, OWNER_RUN, PID,
                                      PLAN_READY, PRUNED_AT, QUEUED_PARAMS, RACING, REASON, REASON_CHARS, RESUMED_FROM,
                                      RETRY_COUNTED, RETRY_OF, ROLE, SEED, SPACE, TRIAL_DIR, VERSIONS, StudyAttrs, arm_of,
                                      cell_key, cell_of, counted_retries, is_cancelled, is_copy, is_finished, is_result,
                                      is_prefix, outcome, outcome_of, owner, owner_run, predecessor_dirs, ran_here, reason,
                                      retry_of, seed_of, study_attrs, trial_dir, branched_from, AWAITS_PREFIX,
                                      SPEC_FINGERPRINT, REQUEUED_BY, TAKEN_BY, awaits_prefix, spec_fingerprint)
from grpo_ablate.launch.registry import reclaim_trial
from grpo_ablate.core.vocab import HEADLINE_METRICS, PREFIX_ROLE, Cell, Outcome
from grpo_ablate.study.search.encoding import DEFAULT_ENCODING, PLAN, encode_arm, suggest_arm

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig
    from grpo_ablate.contract.result import TrialResult
    from grpo_ablate.core.vocab import Arm

__all__ = [
    # trial attributes
    "OUTCOME", "REASON", "CELL", "ROLE", "SEED", "ARM_KEY", "RETRY_OF", "RETRY_COUNTED", "HOST", "PID", "OWNER_RUN", "TRIAL_DIR",
    "QUEUED_PARAMS", "ON_LOSS", "COPY_OF", "PRUNED_AT", "ORCHESTRATOR_RSS", "OOM_CONSTRAINT", "RESUMED_FROM", "BRANCHED_FROM",
    # study attributes
    "CONFIG", "VERSIONS", "OBJECTIVES", "BASELINE", "HARDWARE", "EVALUATION", "SPACE", "RACING", "PLAN_READY",
    # reading (trial_record's)
    "outcome_of", "outcome", "reason", "is_copy", "ran_here", "is_finished", "is_result", "seed_of", "arm_of", "cell_of",
    "owner", "owner_run", "counted_retries", "predecessor_dirs", "FINISHED", "cell_key", "trial_dir", "retry_of",
    "StudyAttrs", "study_attrs", "is_prefix", "branched_from",
    # branching
    "completed_prefixes", "record_branched_from", "record_spec_fingerprint", "spec_fingerprint", "awaits_prefix",
    "retrain_prefix", "requeue_token", "set_aside", "AWAITS_PREFIX", "SPEC_FINGERPRINT", "TAKEN_BY",
    "retries_due",
    # writing
    "describe", "mark_plan_ready", "plan_ready", "set_race", "record_orchestrator_rss", "record_pruned_at", "record_resumed_from",
    "cell_params", "enqueue", "queue", "add_copies", "ask", "suggest_cell", "next_seed", "started", "set_trial_dir", "tell", "fail",
    "record_metrics", "objective_values", "requeue", "retry_cell", "StaleTrialRequeue", "cancel_queued", "is_cancelled", "CANCELLED",
]

_OUTCOMES = {o.value: o for o in Outcome}

# ---------------------------------------------------------------- queueing


def cell_params(study: "StudyConfig", arm: "Arm") -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(params, distributions) that make `suggest_cell` draw this arm in this study; None: not encodable."""

    return encode_arm(arm, study.space, study.temperatures(), PLAN if study.is_planned else DEFAULT_ENCODING)


def enqueue(ostudy: "optuna.Study", params: Mapping[str, Any], attrs: Mapping[str, Any]) -> None:
    """The package's one call of enqueue_trial: the params are kept beside the cell for a requeue.

    `queue` is the way to queue a study's cells; this is the primitive under it and the retries.
    (A trial an earlier version queued has no QUEUED_PARAMS: one that faults before its params
    are drawn is retried without them.)"""
    ostudy.enqueue_trial(dict(params), user_attrs={**attrs, QUEUED_PARAMS: dict(params)})


def queue(ostudy: "optuna.Study", study: "StudyConfig", cells: Iterable[Cell],
          fingerprints: Mapping[int, str] | None = None) -> int:
    """Queue the cells the study does not hold yet (run, running, queued or imported); how many were queued.

    Cells are matched on CELL, so two seeds of one arm (the same params) are both queued, and a
    cell a warm start imported is never run again. In a branching study (budget.branch_from) a
    seed's branches wait for its prefix: a cell other than a prefix is queued only once its
    seed's prefix has completed (`completed_prefixes`, matched to today's prefix spec by
    `fingerprints` when given); the lifecycle queues them then, and a resumed run queues those a
    crash left behind. A branch set aside while its prefix was trained again (`set_aside`) does not
    hold its cell: it is queued again here, as a retry of the attempt set aside.
    """
    trials = ostudy.get_trials(deepcopy=False)
    aside = {key: t.number for t in trials if awaits_prefix(t) and (key := cell_key(t)) is not None}
    have = {t.user_attrs.get(CELL) for t in trials if not awaits_prefix(t)}
    ready = completed_prefixes(trials, fingerprints) if branches(study) else None
    n = 0
    for c in cells:
        encoded = cell_params(study, c.arm)
        if c.key in have or encoded is None:
            continue
        if ready is not None and c.role != PREFIX_ROLE and c.seed not in ready:
            continue
        attrs: dict[str, Any] = {ROLE: c.role, CELL: c.key}
        if c.key in aside:
            attrs[RETRY_OF] = max(t.number for t in trials if awaits_prefix(t) and cell_key(t) == c.key)
        enqueue(ostudy, encoded[0], attrs)
        have.add(c.key)
        n += 1
    return n


def completed_prefixes(trials: Sequence["FrozenTrial"], fingerprints: Mapping[int, str] | None = None
                       ) -> dict[int, "FrozenTrial"]:
    """Each seed's completed prefix trial (the last one, should a seed have two), by seed. With `fingerprints` (seed ->
    today's prefix spec fingerprint), a prefix that recorded another fingerprint (it ran under an earlier study file)
    is not its seed's; one that recorded none (an older run) is judged by its checkpoint's manifest when used."""
    out: dict[int, "FrozenTrial"] = {}
    for t in trials:
        if is_prefix(t) and outcome(t) is Outcome.COMPLETED and (seed := seed_of(t)) is not None:
            recorded, today = spec_fingerprint(t), (fingerprints or {}).get(seed)
            if recorded is None or today is None or recorded == today:
                out[seed] = t
    return out


def retrain_prefix(ostudy: "optuna.Study", study: "StudyConfig", cell: Cell) -> bool:
    """Queue the prefix `cell` again (its seed's checkpoint is missing, damaged or of an earlier study file), as a
    retry of its last attempt; False when an attempt of it is already queued or running."""
    from optuna.trial import TrialState  # lazy: Optuna only when the study is written; every command imports the ledger

    attempts = [t for t in ostudy.get_trials(deepcopy=False) if cell_key(t) == cell.key]
    if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in attempts):
        return False
    encoded = cell_params(study, cell.arm)
    if encoded is None:
        return False
    attrs: dict[str, Any] = {ROLE: PREFIX_ROLE, CELL: cell.key}
    if attempts:
        attrs[RETRY_OF] = max(t.number for t in attempts)
    enqueue(ostudy, encoded[0], attrs)
    return True


def ask(ostudy: "optuna.Study", planned: bool) -> "optuna.Trial | None":
    """The next trial: a queued cell, or (adaptive samplers) the sampler's proposal."""
    import optuna  # lazy: Optuna only when the study is written; every command imports the ledger

    if not planned:
        return ostudy.ask()  # pops a queued cell first, else proposes
    # Private on purpose: Optuna has no public "pop a queued trial or give nothing". study.ask()
    # would create a fresh proposal when the queue is empty, and a planned study runs only its cells.
    trial_id = ostudy._pop_waiting_trial_id()
    return None if trial_id is None else optuna.Trial(ostudy, trial_id)


def suggest_cell(trial: "optuna.Trial", study: "StudyConfig") -> Cell:
    """Draw the trial's cell and write it to the trial; only feasible pairs can be drawn.

    The arm goes through the study's encoding (queued params are replayed, an adaptive sampler
    proposes). The seed is never searched: a queued cell carries it; an adaptive proposal takes
    `next_seed`.
    """

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
    from optuna.trial import TrialState  # lazy: Optuna only when the study is written; every command imports the ledger

    used = {s for t in trials if t.number != number and t.state != TrialState.WAITING
            and t.user_attrs.get(ARM_KEY) == arm_key and outcome(t) is not Outcome.INTERRUPTED
            and (s := seed_of(t.user_attrs)) is not None}
    fresh = [int(s) for s in seeds if s not in used]
    return fresh[0] if fresh else max([*seeds, *used]) + 1


def add_copies(ostudy: "optuna.Study", study: "StudyConfig", source: str,
               results: Sequence[tuple["FrozenTrial", Cell]]) -> int:
    """Give the sampler another study's results (a warm start): each becomes a COMPLETE trial of
    this study with COPY_OF "<source>#<number>", in this study's encoding of its cell. A copy
    never ran here: it is no result of this study and does not count toward n_trials
    (trial_record.ran_here), and `queue` never runs its cell. How many were added (a result
    whose arm this study cannot encode is left out)."""
    import optuna  # lazy: Optuna only when the study is written; every command imports the ledger

    copies = []
    for t, cell in results:
        encoded = cell_params(study, cell.arm)
        if encoded is None or not t.values:
            continue
        attrs = {**{k: v for k, v in t.user_attrs.items() if k not in (TRIAL_DIR, HOST, PID)},
                 **cell.as_attrs(), ARM_KEY: cell.arm.key, CELL: cell.key, COPY_OF: f"{source}#{t.number}"}
        copies.append(optuna.trial.create_trial(params=encoded[0], distributions=encoded[1], values=list(t.values),
                                                user_attrs=attrs))
    ostudy.add_trials(copies)
    return len(copies)


# ---------------------------------------------------------------- the study's own attributes


def describe(ostudy: "optuna.Study", attrs: Mapping[str, Any]) -> None:
    """What a new study is (CONFIG, VERSIONS, OBJECTIVES, BASELINE, HARDWARE, SPACE, EVALUATION),
    written once by its creator (study/setup.py decides the values); read back by the report."""
    for name, value in attrs.items():
        ostudy.set_user_attr(name, value)


def mark_plan_ready(ostudy: "optuna.Study") -> None:
    """The creator queued the plan: other hosts stop waiting for it (`plan_ready`)."""
    ostudy.set_user_attr(PLAN_READY, True)


def plan_ready(ostudy: "optuna.Study") -> bool:
    return bool(ostudy.user_attrs.get(PLAN_READY))


def set_race(ostudy: "optuna.Study", state: Mapping[str, Any]) -> None:
    """A racing study's state after each round (race_record.RaceState.as_dict(), decided by study/racing.py)."""
    ostudy.set_user_attr(RACING, dict(state))


# ---------------------------------------------------------------- a running trial


def started(trial: "optuna.Trial", host: str, pid: int, *, heartbeat: bool, max_retry: int,
            run: Mapping[str, str] | None = None) -> None:
    """Who runs the trial (host, pid and `run`: the pid's start time and the run's id, study/owner.py); with
    heartbeats, also the outcome it gets should its heartbeat go stale."""
    trial.set_user_attr(HOST, host)
    trial.set_user_attr(PID, pid)
    if run is not None:
        trial.set_user_attr(OWNER_RUN, dict(run))
    if heartbeat:
        trials = {t.number: t for t in trial.study.get_trials(deepcopy=False)}
        lost, _ = _lost(trials, trials[trial.number], f"its heartbeat went stale: the orchestrator (pid {pid} on "
                        f"{host}) or its host died, or lost the database", max_retry, counted=True)
        trial.set_user_attr(ON_LOSS, lost)


def set_trial_dir(trial: "optuna.Trial", path: Any) -> None:
    trial.set_user_attr(TRIAL_DIR, str(path))


def record_orchestrator_rss(trial: "optuna.Trial", megabytes: float) -> None:
    """The orchestrator's resident memory when the trial ended (benchmarks/workers.py checks it stays flat)."""
    trial.set_user_attr(ORCHESTRATOR_RSS, megabytes)


def record_resumed_from(trial: "optuna.Trial", step: int) -> None:
    """A retry that resumed its predecessor's checkpoint: the optimizer step it resumed at."""
    trial.set_user_attr(RESUMED_FROM, step)


def record_spec_fingerprint(trial: "optuna.Trial", fingerprint: str) -> None:
    """The fingerprint of the spec the trial runs: a prefix is matched to today's study file by it."""
    trial.set_user_attr(SPEC_FINGERPRINT, fingerprint)


def record_branched_from(trial: "optuna.Trial", prefix: int, step: int) -> None:
    """A branch's prefix trial and the step it starts from: who depends on whom."""
    trial.set_user_attr(BRANCHED_FROM, {"trial": int(prefix), "step": int(step)})


def record_pruned_at(trial: "optuna.Trial", completions: int) -> None:
    """The checkpoint (in generated completions) at which the pruner stopped the trial."""
    trial.set_user_attr(PRUNED_AT, completions)


def _lost(trials: Mapping[int, "FrozenTrial"], me: "FrozenTrial", why: str, max_retry: int, *, counted: bool
          ) -> tuple[dict[str, str], bool]:
    """({OUTCOME, REASON}, retry?) for a trial that ended through no fault of its cell."""
    retries = counted_retries(trials, me)
    if counted and retries >= max_retry:
        why = f"retried {retries} time(s) (study.max_retry={max_retry}); the last attempt: {why}"
        return {OUTCOME: Outcome.FAILED.value, REASON: why[:REASON_CHARS]}, False
    return {OUTCOME: Outcome.INTERRUPTED.value, REASON: why[:REASON_CHARS]}, True


def objective_values(study: "StudyConfig", metrics: Mapping[str, Any]) -> list[float] | None:
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


def tell(ostudy: "optuna.Study", trial: "optuna.Trial", study: "StudyConfig", result: "TrialResult") -> Outcome:
    """Tell a finished trial process (completed, oom, pruned, failed) to the study; the outcome recorded.

    Outcomes map to Optuna states so that samplers learn the right thing: completed -> COMPLETE
    with the constraint `oom` = -1; oom -> COMPLETE with `oom` = +1 (the sampler learns where
    memory ends, which a FAIL would not teach it; its values are the partial metrics, else 0);
    pruned -> PRUNED; failed -> FAIL with the reason.
    """
    from optuna.trial import TrialState  # lazy: Optuna only when the study is written; every command imports the ledger

    metrics = result.metrics or {}
    record_metrics(trial, metrics)
    told = result.outcome
    trial.set_user_attr(OUTCOME, told.value)
    if result.reason:
        trial.set_user_attr(REASON, str(result.reason)[:REASON_CHARS])
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
    from optuna.trial import TrialState  # lazy: Optuna only when the study is written; every command imports the ledger

    trial.set_user_attr(OUTCOME, Outcome.FAILED.value)
    trial.set_user_attr(REASON, why[:REASON_CHARS])
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


def retry_cell(ostudy: "optuna.Study", me: "FrozenTrial") -> None:
    """Queue a trial's cell again after it failed for good, naming it (RETRY_OF), in the params it ran with:
    study/retry.py's cells that failed under an earlier version of the study file."""
    _retry(ostudy, me)


def requeue(ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage", number: int, why: str, *,
            max_retry: int, counted: bool, token: str | None = None) -> Outcome | None:
    """Fail a trial that did not finish through no fault of its cell, and queue the cell again.

    `counted`: a fault (not a stop the user asked for), which uses up one of the cell's
    `max_retry` retries; once they are spent the trial is failed with the reason instead.
    Returns the outcome recorded (interrupted or failed), or None when the trial was already
    finished (another process, or another call, got there first).
    `token`: the same for every try of one logical call (`requeue_token()`, made before
    storage.patiently's retries): a try that finds the trial finished by an earlier try of
    this very call, cut short by an outage after the state was written, still queues the
    retry and returns the outcome. Without it, every call is its own.
    """
    # lazy: Optuna only when the study is written; every command imports the ledger
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    trials = {t.number: t for t in ostudy.get_trials(deepcopy=False)}
    me = trials[number]
    lost, retry = _lost(trials, me, why, max_retry, counted=counted)
    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(ostudy.study_name), number)
    token = token or requeue_token()
    try:  # attributes first: a finished trial takes no more, so a second reaper stops here
        storage.set_trial_user_attr(trial_id, REQUEUED_BY, token)
        storage.set_trial_user_attr(trial_id, OUTCOME, lost[OUTCOME])
        storage.set_trial_user_attr(trial_id, REASON, lost[REASON])
        storage.set_trial_user_attr(trial_id, RETRY_COUNTED, counted)
        storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    except UpdateFinishedTrialError:
        # finished by another process, or by this very call tried before (storage.patiently after an outage cut
        # it short after its state was written): only in that case does the retry below still belong to it
        if storage.get_trial(trial_id).user_attrs.get(REQUEUED_BY) != token:
            return None
    if retry and not any(retry_of(t) == number for t in ostudy.get_trials(deepcopy=False)):
        _retry(ostudy, me)
    return _OUTCOMES[lost[OUTCOME]]


def retries_due(trials: Sequence["FrozenTrial"]) -> set[int]:
    """The trials `requeue` has ended whose retry is not in the study yet.

    `requeue` writes twice: the trial's end first (so a second reaper stops there), its retry after. Between the
    two, another run sees the trial ended, no retry queued and nothing running, and would end with the retry still
    to come (queued a moment later, by then left to the run that queues it alone). A run that finds one here
    waits for it, as for any other host's running trial.
    """
    from optuna.trial import TrialState  # lazy: Optuna only when the study is read; every command imports the ledger

    retried = {retry_of(t) for t in trials}
    return {t.number for t in trials
            if t.state == TrialState.FAIL and t.user_attrs.get(REQUEUED_BY) is not None
            and t.user_attrs.get(OUTCOME) == Outcome.INTERRUPTED.value and t.number not in retried}


def requeue_token() -> str:
    """A token naming one logical `requeue` call across its tries."""
    return secrets.token_hex(8)


def set_aside(ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage", number: int, seed: int, why: str
              ) -> Outcome | None:
    """A branch that cannot start because its seed's prefix is being trained again: it ends interrupted, its retry
    not counted (no fault of its cell) and not queued now; `queue` queues its cell again once the prefix completed.
    None when the trial was already finished (another process got there first)."""
    # lazy: Optuna only when the study is written; every command imports the ledger
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(ostudy.study_name), number)
    try:
        storage.set_trial_user_attr(trial_id, OUTCOME, Outcome.INTERRUPTED.value)
        storage.set_trial_user_attr(trial_id, REASON, why[:REASON_CHARS])
        storage.set_trial_user_attr(trial_id, RETRY_COUNTED, False)
        storage.set_trial_user_attr(trial_id, AWAITS_PREFIX, int(seed))
        storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    except UpdateFinishedTrialError:
        return None
    return Outcome.INTERRUPTED


def cancel_queued(ostudy: "optuna.Study", arm_keys: Iterable[str], why: str) -> int:
    """Remove the queued (WAITING) cells of these arms: each fails as interrupted with CANCELLED set.

    Interrupted is no result and does not count toward n_trials (FINISHED); nothing queues a
    cancelled cell again (only `requeue` retries, and it is never called on one), and a rerun's
    `queue` skips cells already in the study, so a stopped study does not resume them. A cell a
    worker claims between the read and the write is left to run (its state is no longer WAITING).
    Returns how many were cancelled.
    """
    # lazy: Optuna only when the study is written; every command imports the ledger
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
        if key not in keys or is_prefix(t):  # a prefix is every arm's start on its seed, no arm's own
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, t.number)
        if storage.get_trial(trial_id).state != TrialState.WAITING:
            continue
        try:
            storage.set_trial_user_attr(trial_id, CANCELLED, why[:REASON_CHARS])
            storage.set_trial_user_attr(trial_id, OUTCOME, Outcome.INTERRUPTED.value)
            storage.set_trial_user_attr(trial_id, REASON, f"cancelled: {why}"[:REASON_CHARS])
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
        reclaim_trial(trial.user_attrs.get(TRIAL_DIR))  # a job its dead run left running ends before the cell is queued again
        if retry:
            _retry(ostudy, trial)
