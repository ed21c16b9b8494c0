"""Cells that failed under an earlier version of the study file run again once the file changes.

    grpo-ablate run study.yaml     # a trainer key every trial refuses: each cell fails
    # fix the key in study.yaml, then the same command:
    grpo-ablate run study.yaml     # "queued again 2 cell(s) that failed under an earlier version of the study file"

A failed trial ends for good: it counts toward n_trials and its cell is not queued again, since a
cell that fails on its own configuration would fail on every retry. A failure the study file
caused (a trainer key TRL refuses, a reward that raises, a misnamed column) says nothing about
the cell once the file is fixed, though. So on a rerun each failed cell's attempts are compared
with what the cell would run today, by the fingerprint of its trial spec: the spec.json its
attempt left in its folder against `build_spec` for the same cell now, both without what differs
between attempts of one trial (folder, timeout, environment, checkpoint cadence:
contract/checkpoints.FINGERPRINT_IGNORED; a branch point's folder, keeping its step).

A cell is queued again when every attempt it has ended failed, none of them under today's
fingerprint, and it holds nothing else (a queued, running or cancelled attempt, a result). An
attempt that failed before its spec was written (its folder exists, without spec.json) counts as
another version when the spec builds today; one whose folder this host cannot see (another
host's disk) is left alone. A cell failed under today's fingerprint stays failed: a rerun of an
unchanged file retries nothing, and a cell is retried at most once per change of the file.

The retry names the attempt it follows (the ledger's RETRY_OF, as a requeue does), and a trial
another one retries no longer counts toward n_trials (`superseded`): the study runs the cell
again instead of stopping at its count. Planned studies retry only the cells today's plan still
holds; a raced study is left as it is (its rounds were decided on the trials it had). What is
not covered: a change inside a file the study names (a reward module's code, a dataset's rows)
leaves the fingerprint as it was; name the fixed function or file anew to retry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from grpo_ablate.plan.run_plan import StudyPlan
from grpo_ablate.study import ledger
from grpo_ablate.study.trial_spec import plan_spec
from grpo_ablate.contract.checkpoints import spec_fingerprint
from grpo_ablate.records.trial_record import faulted_out
from grpo_ablate.core.vocab import SPEC_FILE, TRIALS_DIR, Cell, Outcome

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig

__all__ = ["requeue_changed", "requeue_faulted", "superseded", "fingerprint_of", "cell_fingerprint", "note"]

# outcomes after which a cell has what it ran for: never retried for a changed file
_SETTLED = (Outcome.COMPLETED, Outcome.OOM, Outcome.PRUNED)
NO_SPEC = "no-spec"  # an attempt that failed before its spec.json was written


def fingerprint_of(spec: Mapping[str, Any]) -> str:
    """A trial spec's fingerprint (spec.json as a dict): checkpoints.spec_fingerprint, a branch point by its step only."""
    kept = dict(spec)
    start = kept.get("start_from")
    if isinstance(start, Mapping):  # the prefix trial's folder differs between studies and attempts; the step does not
        kept["start_from"] = {"step": start.get("step")}
    return spec_fingerprint(kept)


def cell_fingerprint(study: "StudyConfig", plan: StudyPlan, cell: Cell) -> str | None:
    """What the cell would run today, as a fingerprint; None when its spec cannot be built (nothing would run)."""
    try:
        spec = plan_spec(study, plan, cell, study.output_dir / TRIALS_DIR / "fingerprint", timeout=0.0)
        return fingerprint_of(json.loads(spec.to_json()))
    except Exception:  # noqa: BLE001 - a spec that cannot be built fails the trial the same way: no retry
        return None


def _attempt_fingerprint(study: "StudyConfig", trial: "FrozenTrial") -> str | None:
    """The fingerprint of the spec an attempt ran; NO_SPEC when its folder has none; None when unknown here."""
    recorded = ledger.trial_dir(trial)
    if recorded is None:
        return NO_SPEC  # failed before it was given a folder
    folder = Path(recorded)
    if not folder.is_dir() and (own := study.output_dir / TRIALS_DIR / folder.name).is_dir():
        folder = own  # a copied run folder: the journal names the original's absolute path
    if not folder.is_dir():
        return None  # another host's folder, or removed: nothing to compare
    try:
        spec = json.loads((folder / SPEC_FILE).read_text())
    except FileNotFoundError:
        return NO_SPEC
    except (OSError, ValueError):
        return None
    return fingerprint_of(spec) if isinstance(spec, dict) else None


def superseded(trials: Iterable["FrozenTrial"]) -> set[int]:
    """The numbers of the trials another trial retries: none of them ended the cell, so none counts toward n_trials.

    Requeued (interrupted) attempts never counted; this adds the failed attempts `requeue_changed` queued again.
    """
    return {n for t in trials if ledger.ran_here(t) and (n := ledger.retry_of(t)) is not None}


def note(count: int) -> str:
    """The line a run prints when it queued `count` cells again."""
    return f"queued again {count} cell(s) that failed under an earlier version of the study file"


def _open_cells(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan) -> Iterator[tuple[str, list["FrozenTrial"]]]:
    """(cell key, the attempts this study ran of it) for each cell of the plan that nothing runs or waits for, not
    cancelled and not settled: the cells a rerun may queue again (requeue_changed's and requeue_faulted's)."""
    from optuna.trial import TrialState  # lazy: optuna loads on a study's first use, not with every command

    by_cell: dict[str, list["FrozenTrial"]] = {}
    for t in ostudy.get_trials(deepcopy=False):
        if ledger.ran_here(t) and (key := ledger.cell_key(t)) is not None:
            by_cell.setdefault(key, []).append(t)
    planned = {c.key for c in plan.cells} if study.is_planned else None
    for key, attempts in by_cell.items():
        if planned is not None and key not in planned:
            continue
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) or ledger.is_cancelled(t)
               or ledger.outcome(t) in _SETTLED for t in attempts):
            continue
        yield key, attempts


def requeue_changed(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan) -> str | None:
    """Queue again each cell of the run's plan that failed only under earlier versions of the study file (module
    docstring). Returns the line to print (`note`), None when nothing was queued.
    """
    if study.study.racing is not None:
        return None
    queued = 0
    for key, attempts in _open_cells(ostudy, study, plan):
        failed = [t for t in attempts if ledger.outcome(t) is Outcome.FAILED]
        cell = next((c for t in reversed(failed) if (c := ledger.cell_of(t)) is not None), None)
        if cell is None or cell.key != key or ledger.cell_params(study, cell.arm) is None:
            continue
        today = cell_fingerprint(study, plan, cell)
        if today is None:
            continue
        before = [_attempt_fingerprint(study, t) for t in failed]
        if None in before or today in before:
            continue  # failed under today's file (or cannot tell): it stays failed
        ledger.retry_cell(ostudy, max(failed, key=lambda t: t.number))
        queued += 1
    return note(queued) if queued else None


def requeue_faulted(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan) -> str | None:
    """Queue again, once per run, each cell whose last attempt failed only because its retries were all spent on
    faults of the machine (a full disk, a lost node: study.max_retry interrupted attempts, then failed): the fault
    says nothing of the cell, and a rerun after it was fixed (space freed) trains it. Each such rerun gives the cell
    one attempt (its retries stay spent). The line to print, None when nothing was queued.
    """
    queued: list[str] = []
    for _, attempts in _open_cells(ostudy, study, plan):
        last = max(attempts, key=lambda t: t.number)
        if faulted_out(last):
            ledger.retry_cell(ostudy, last)
            queued.append(ledger.reason(last) or "")
    if not queued:
        return None
    return (f"queued again {len(queued)} cell(s) whose retries were all spent on faults of the machine (the last: "
            f"{queued[-1][:200]}): each gets one attempt in this run")
