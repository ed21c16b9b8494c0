"""The trial-record schema: what a trial leaves in its study, named and read in one place.

    from grpo_ablate.records import trial_record as record
    record.outcome(frozen_trial)          # completed | oom | pruned | failed | interrupted | running | queued
    record.trial_dir(frozen_trial)        # a typed fact, never the raw attribute
    record.study_attrs(optuna_study)      # StudyAttrs: what the study's creator wrote

A finished trial leaves two things: user attributes on its Optuna trial (and the study's own
attributes), named here, and files in its folder (TRIAL_DIR), named in vocab.py (METRICS_FILE,
GROUPS_FILE, ...) and read tolerantly by metrics.read_jsonl. Both the study, which writes the
attributes (study/ledger.py, the only writer), and the report, which reads them, import this
module: it sits below both, so neither reaches into the other.

Reading is pure: a FrozenTrial (or its state, attributes and constraints) in, a typed fact out; no
storage is opened and optuna is not imported. This module and the ledger are the only ones that
touch `user_attrs` or spell an attribute name; tests/test_record_boundary.py fails on any other
(tests included), so a renamed attribute is renamed here and nowhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.core.vocab import HEADLINE_METRICS, PREFIX_ROLE, Arm, Cell, Outcome, generations_data, generations_text

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial, Trial

    from grpo_ablate.core.space import FeasibleSpace

__all__ = [
    # trial attributes
    "OUTCOME", "REASON", "CELL", "ROLE", "SEED", "ARM_KEY", "RETRY_OF", "RETRY_COUNTED", "HOST", "PID", "OWNER_RUN", "TRIAL_DIR",
    "QUEUED_PARAMS", "ON_LOSS", "COPY_OF", "PRUNED_AT", "ORCHESTRATOR_RSS", "OOM_CONSTRAINT", "CANCELLED", "RESUMED_FROM",
    "BRANCHED_FROM", "SPEC_FINGERPRINT", "AWAITS_PREFIX", "TAKEN_BY", "REQUEUED_BY",
    # study attributes
    "CONFIG", "VERSIONS", "OBJECTIVES", "BASELINE", "HARDWARE", "EVALUATION", "SPACE", "RACING", "PLAN_READY",
    # roles
    "PROBE_ROLE", "WARM_ROLE",
    # Optuna param names (study/search/encoding.py draws arms through them)
    "G_RANK_PARAM", "LABEL_PARAM", "G_PARAM", "TEMPERATURE_PARAM", "batch_param",
    # reading
    "outcome_of", "outcome", "reason", "is_cancelled", "is_copy", "ran_here", "is_finished", "is_result", "seed_of",
    "arm_of", "cell_of", "owner", "owner_run", "counted_retries", "predecessor_dirs", "FINISHED", "REASON_CHARS",
    "trial_dir", "role_of", "cell_key", "copy_source", "retry_of", "resumed_from", "recorded_metrics", "queued_params",
    "orchestrator_rss_mb", "stored_attrs", "is_prefix", "branched_from", "spec_fingerprint", "awaits_prefix", "faulted_out",
    "arm_fields", "trial_arm",
    # the study's own attributes, typed
    "StudyAttrs", "study_attrs",
]

# ---------------------------------------------------------------- attribute names

# trial user attributes
OUTCOME = "outcome"  # an Outcome's value, written when the trial ends
REASON = "reason"  # why it did not complete (at most 2000 characters)
CELL = "cell"  # Cell.key: the arm and the seed; a queued cell and its retries carry it
ROLE = "role"  # why the trial exists: "baseline", "num_generations=4", "grid", a sampler's name
SEED = "seed"  # the training seed (Cell.as_attrs writes it with the arm's knobs)
ARM_KEY = "arm_key"  # Arm.key: groups the replicates (seeds) of one configuration
RETRY_OF = "retry_of"  # the number of the trial this one retries
RETRY_COUNTED = "retry_counted"  # False when the trial was requeued for a stop the user asked for
HOST = "host"  # the orchestrator that ran it, and its pid: a dead local orchestrator's trials are requeued
PID = "pid"
OWNER_RUN = "owner_run"  # the rest of its identity: {"pid_started": the pid's start time, "run_id": random per run}
TRIAL_DIR = "trial_dir"  # the trial's folder (spec.json, metrics.jsonl, ...)
QUEUED_PARAMS = "queued_params"  # the params the cell was queued with
ON_LOSS = "on_heartbeat_loss"  # {"outcome", "reason"}: what the trial becomes if its heartbeat goes stale
COPY_OF = "warm_start_copy_of"  # a warm start's copy of another study's trial ("<study>#<number>"): never ran here
PRUNED_AT = "pruned_at_completions"
CANCELLED = "cancelled"  # why a queued cell was removed before it ran (a settled arm's): never a result, never run
ORCHESTRATOR_RSS = "orchestrator_rss_mb"  # benchmarks/workers.py checks it stays flat
RESUMED_FROM = "resumed_from_step"  # a retry that resumed its predecessor's checkpoint: the step it resumed at
BRANCHED_FROM = "branched_from"  # a branch: {"trial": its seed's prefix trial, "step": the step it started from}
SPEC_FINGERPRINT = "spec_fingerprint"  # checkpoints.spec_fingerprint of the spec it ran: a prefix is matched by it
AWAITS_PREFIX = "awaits_prefix"  # a branch set aside (interrupted, not counted) while its seed's prefix is retrained
TAKEN_BY = "taken_by"  # a trial another run judged dead and took over: that run's words (study/liveness.py)
REQUEUED_BY = "requeued_by"  # the token of the requeue call that ended it: that call, tried again, knows it did
OOM_CONSTRAINT = "oom"  # the constraint: -1 fits in memory, +1 ran out (a COMPLETE trial the sampler learns from)

# study user attributes
CONFIG = "config"  # the resolved study file, password masked
VERSIONS = "versions"
OBJECTIVES = "objectives"
BASELINE = "baseline"  # the ablation's baseline arm, Arm.as_dict()
HARDWARE = "hardware"
EVALUATION = "evaluation"
SPACE = "space"  # the feasible (G, batch) labels the study was created with
RACING = "racing"  # {"round", "live", "leader", "decided", "dropped": [...]} (race_record.RaceState)
PLAN_READY = "plan_ready"  # the creator queued the plan

# roles
PROBE_ROLE = "probe"  # an out-of-memory pair recorded by earlier versions' probe: ran no trial
WARM_ROLE = "warm-start"  # a queued warm-start trial

# Optuna param names: how study/search/encoding.py's encodings store an arm's knobs on a trial
G_RANK_PARAM = "num_generations_rank"  # ORDINAL: G's rank among the feasible Gs (an int)
LABEL_PARAM = "generation"  # LABEL: a "GxB" label (vocab.pair_label)
G_PARAM = "num_generations"  # PLAN: G as its text (vocab.generations_text)
TEMPERATURE_PARAM = "temperature"


def batch_param(num_generations: int) -> str:
    """ORDINAL's conditional batch param: its name carries G, so each G has its own feasible list."""
    return f"generation_batch_size|G={num_generations}"


FINISHED = frozenset({Outcome.COMPLETED, Outcome.OOM, Outcome.PRUNED, Outcome.FAILED})
_OUTCOMES = {o.value: o for o in Outcome}
REASON_CHARS = 2000  # a reason is cut to this many characters when written

# ---------------------------------------------------------------- reading a trial


def outcome_of(state: str, user_attrs: Mapping[str, Any], constraints: Mapping[str, float]) -> Outcome:
    """The one rule: how a trial in Optuna `state` (a TrialState name) ended.

    A queued trial is queued, a running one running (whether its run still lives is study/liveness.py's to
    judge). Otherwise our OUTCOME attr decides; without one, a failed trial that carries ON_LOSS was lost with
    its worker (the heartbeat path); else the state decides, and a COMPLETE trial with a violated constraint ran
    out of memory.
    """
    if state == "WAITING":
        return Outcome.QUEUED
    if state == "RUNNING":
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
    """An arm's result: a completed trial with objective values, never an out-of-memory trial's
    placeholder zeros, never a branching study's prefix (the shared start of its seed's arms)."""
    return outcome(ft) is Outcome.COMPLETED and bool(ft.values) and not is_prefix(ft)


def is_prefix(ft: "FrozenTrial | Trial") -> bool:
    """A branching study's prefix (budget.branch_from): the baseline trained once per seed to the branch step.

    It is no arm's result (`is_result`, `arm_of` leave it out: the report, the race and the verdict
    read arms through them), but it ran and spent compute: it is finished, counted and priced once
    per seed."""
    return ft.user_attrs.get(ROLE) == PREFIX_ROLE


def spec_fingerprint(ft: "FrozenTrial | Trial") -> str | None:
    """The fingerprint of the spec the trial ran (checkpoints.spec_fingerprint); None when not recorded (older runs)."""
    value = ft.user_attrs.get(SPEC_FINGERPRINT)
    return value if isinstance(value, str) and value else None


def faulted_out(ft: "FrozenTrial") -> bool:
    """A trial failed because its cell's retries were all spent on faults of the machine (ledger.requeue wrote it
    FAILED with RETRY_COUNTED), not by its own fault: a later run may give the cell another attempt."""
    return outcome(ft) is Outcome.FAILED and ft.user_attrs.get(RETRY_COUNTED) is True


def awaits_prefix(ft: "FrozenTrial | Trial") -> bool:
    """A branch that was set aside while its seed's prefix is trained again: its cell is queued again once it is."""
    return ft.user_attrs.get(AWAITS_PREFIX) is not None  # the seed it waits for (0 included)


def branched_from(ft: "FrozenTrial | Trial") -> tuple[int, int] | None:
    """A branch's (prefix trial number, step it started from); None for a trial that started from the model."""
    raw = ft.user_attrs.get(BRANCHED_FROM)
    if not isinstance(raw, Mapping):
        return None
    number, step = raw.get("trial"), raw.get("step")
    if isinstance(number, int) and isinstance(step, int) and not isinstance(number, bool) and not isinstance(step, bool):
        return number, step
    return None


def seed_of(trial: "FrozenTrial | Trial | Mapping[str, Any]") -> int | None:
    """The seed a queued cell (or a requeued retry) carries, else the SEED attr (of a trial, or of its attrs)."""
    user_attrs: Mapping[str, Any] = trial if isinstance(trial, Mapping) else trial.user_attrs
    cell = user_attrs.get(CELL)
    if isinstance(cell, str) and "|seed" in cell:
        try:  # Cell.key: "<arm>|seed<n>", a prefix's "<arm>|seed<n>|prefix"
            return int(cell.rsplit("|seed", 1)[1].split("|", 1)[0])
        except ValueError:
            pass
    seed = user_attrs.get(SEED)
    return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None


def arm_of(ft: "FrozenTrial | Trial", params: Mapping[str, Any] | None = None) -> Arm | None:
    """The trial's arm from its attributes (Cell.as_attrs wrote its knobs); None before they were written,
    and None for a branching study's prefix, which is no arm's trial (`is_prefix`).

    `params`: knobs to fall back on (the report passes the arm fields of the trial's params, for a
    trial that failed before writing its attributes); an attribute wins over a param."""
    if is_prefix(ft):
        return None
    return Arm.from_mapping({**(params or {}), **ft.user_attrs})


def arm_fields(params: Mapping[str, Any], space: "FeasibleSpace | None" = None) -> dict[str, Any]:
    """The arm's knobs that a trial's params name (for a trial that failed before writing its
    attributes), in `Arm.as_dict`'s form. A categorical's text (a "GxB" label, a schedule's label)
    is looked up in `space`, the study's feasible space built by the loader, never parsed: without
    a space only what needs no text is read (a plain-int G, the temperature)."""
    out: dict[str, Any] = {}
    label = params.get(LABEL_PARAM)
    if isinstance(label, str) and space is not None:
        try:
            pair = space.by_label(label)
        except KeyError:
            pass
        else:
            out["num_generations"] = generations_data(pair.num_generations)
            out["generation_batch_size"] = pair.generation_batch_size
    g = params.get(G_PARAM)
    if isinstance(g, int) and not isinstance(g, bool):
        out.setdefault("num_generations", g)
    elif isinstance(g, str) and space is not None:
        by_text = {generations_text(x): x for x in space.generations}
        if g in by_text:
            out.setdefault("num_generations", generations_data(by_text[g]))
    if params.get(TEMPERATURE_PARAM) is not None:
        out["temperature"] = params[TEMPERATURE_PARAM]
    return out


def trial_arm(ft: "FrozenTrial", space: "FeasibleSpace | None" = None) -> Arm | None:
    """The arm a trial ran: its attributes (`arm_of`), else, for a trial that failed before it wrote
    them, the knobs its params name (`arm_fields`; a categorical's text looked up in `space` when one is given).

    The one fallback for a trial without attributes: the report's records and `smoke`'s outcomes read arms here."""
    return arm_of(ft, arm_fields(ft.params, space))


def cell_of(ft: "FrozenTrial | Trial") -> Cell | None:
    """The trial's cell from its attributes (arm knobs, seed, role); None before they were written."""
    return Cell.from_attrs(ft.user_attrs)


def trial_dir(ft: "FrozenTrial | Trial") -> str | None:
    """The trial's folder (spec.json, metrics.jsonl, ...); None before it was given one."""
    folder = ft.user_attrs.get(TRIAL_DIR)
    return folder if isinstance(folder, str) and folder else None


def role_of(ft: "FrozenTrial") -> str:
    """Why the trial ran ("baseline", "num_generations=4", a sampler's name); "" when unknown.
    Studies written before ROLE existed kept it as "arm"."""
    return str(ft.user_attrs.get(ROLE, ft.user_attrs.get("arm", "")) or "")


def cell_key(ft: "FrozenTrial | Trial") -> str | None:
    """Cell.key of the trial (its arm and seed), which a queued cell and its retries carry; None without one."""
    key = ft.user_attrs.get(CELL)
    return key if isinstance(key, str) and key else None


def copy_source(ft: "FrozenTrial") -> str | None:
    """The "<study>#<number>" a warm start's copy came from; None for a trial that ran here."""
    source = ft.user_attrs.get(COPY_OF)
    return None if source is None else str(source)


def retry_of(ft: "FrozenTrial | Trial") -> int | None:
    """The number of the trial this one retries; None for a first attempt."""
    parent = ft.user_attrs.get(RETRY_OF)
    return parent if isinstance(parent, int) and not isinstance(parent, bool) else None


def resumed_from(ft: "FrozenTrial") -> int | None:
    """The optimizer step a retry resumed its predecessor's checkpoint at; None when it started fresh."""
    step = ft.user_attrs.get(RESUMED_FROM)
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def recorded_metrics(ft: "FrozenTrial", names: Sequence[str] = HEADLINE_METRICS) -> dict[str, Any]:
    """The metrics the ledger recorded on the trial (ledger.record_metrics), by name: a missing one is None."""
    return {name: ft.user_attrs.get(name) for name in names}


def queued_params(ft: "FrozenTrial") -> dict[str, Any] | None:
    """The params the trial's cell was queued with (ledger.enqueue); None for a trial no one queued."""
    params = ft.user_attrs.get(QUEUED_PARAMS)
    return dict(params) if isinstance(params, Mapping) else None


def orchestrator_rss_mb(ft: "FrozenTrial") -> float | None:
    """The orchestrator's resident memory (MB) when the trial ended; None when not recorded."""
    rss = ft.user_attrs.get(ORCHESTRATOR_RSS)
    return float(rss) if isinstance(rss, (int, float)) and not isinstance(rss, bool) else None


def stored_attrs(source: Any) -> dict[str, Any]:
    """Everything stored on a trial or study, unread: for audits that no value (a password) is stored
    anywhere, never for a fact (use the typed readers above, so a rename is made here)."""
    return dict(getattr(source, "user_attrs", None) or {})


def owner(ft: "FrozenTrial") -> tuple[str | None, int | None]:
    """(host, pid) of the orchestrator that runs or ran the trial."""
    host, pid = ft.user_attrs.get(HOST), ft.user_attrs.get(PID)
    return (host if isinstance(host, str) else None, pid if isinstance(pid, int) else None)


def owner_run(ft: "FrozenTrial") -> dict[str, str]:
    """The orchestrator's identity beyond (host, pid): its pid's start time and its run id (empty when not recorded)."""
    raw = ft.user_attrs.get(OWNER_RUN)
    return {k: v for k, v in raw.items() if isinstance(v, str)} if isinstance(raw, dict) else {}


def counted_retries(trials: Mapping[int, "FrozenTrial"], trial: "FrozenTrial") -> int:
    """How often this trial's cell was already requeued for a fault (a stopped study's requeues are free, and so is
    a failed attempt queued again for a changed study file, study/retry.py, and a completed prefix trained again
    because its checkpoint can no longer be trusted, study/prefixes.py)."""
    n, seen = 0, set()
    parent = trial.user_attrs.get(RETRY_OF)
    while isinstance(parent, int) and parent in trials and parent not in seen:
        seen.add(parent)
        before = trials[parent]
        if before.user_attrs.get(RETRY_COUNTED, True) and outcome(before) is Outcome.INTERRUPTED:
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


# ---------------------------------------------------------------- the study's own attributes


@dataclass(frozen=True)
class StudyAttrs:
    """What a study's creator wrote on it (study/setup.py through ledger.describe), and the racing state.

    Read tolerantly: a study written by an earlier version, or by hand, lacks some; each is then
    empty (None, {} or ()) rather than an error.
    """

    config: dict[str, Any] | None = None  # the resolved study file, password masked
    versions: dict[str, Any] = field(default_factory=dict)  # library versions
    objectives: tuple[tuple[str, str | None], ...] = ()  # (metric, direction or None: the metric's own)
    baseline: dict[str, Any] | None = None  # the ablation's baseline arm, Arm.as_dict()
    hardware: str | None = None  # the hardware arithmetic in words (BatchShape.describe)
    evaluation: dict[str, Any] | None = None  # the evaluation section
    space: tuple[str, ...] | None = None  # the feasible pairs' labels the study was created with
    racing: dict[str, Any] | None = None  # race_record.RaceState.as_dict(), written by study/racing.py's rounds
    plan_ready: bool = False  # the creator queued the plan

    def as_attrs(self) -> dict[str, Any]:
        """The attributes its creator writes (ledger.describe): the set ones of config .. space."""
        out: dict[str, Any] = {CONFIG: self.config, VERSIONS: dict(self.versions), HARDWARE: self.hardware,
                               OBJECTIVES: [{"metric": m, "direction": d} for m, d in self.objectives],
                               BASELINE: self.baseline, EVALUATION: self.evaluation,
                               SPACE: list(self.space) if self.space is not None else None}
        return {k: v for k, v in out.items() if v is not None}


def study_attrs(source: Any) -> StudyAttrs:
    """A study's attributes, typed: `source` is an optuna StudyConfig, a FrozenStudy or a StudySummary."""
    attrs: Mapping[str, Any] = getattr(source, "user_attrs", None) or {}

    def mapping(name: str) -> dict[str, Any] | None:
        value = attrs.get(name)
        return dict(value) if isinstance(value, Mapping) else None

    objectives = tuple((str(o["metric"]), str(o["direction"]) if o.get("direction") else None)
                       for o in attrs.get(OBJECTIVES) or [] if isinstance(o, Mapping) and o.get("metric"))
    space = attrs.get(SPACE)
    hardware = attrs.get(HARDWARE)
    return StudyAttrs(config=mapping(CONFIG), versions=mapping(VERSIONS) or {}, objectives=objectives,
                      baseline=mapping(BASELINE), hardware=str(hardware) if hardware is not None else None,
                      evaluation=mapping(EVALUATION),
                      space=tuple(str(x) for x in space) if isinstance(space, list) else None,
                      racing=mapping(RACING), plan_ready=bool(attrs.get(PLAN_READY)))
