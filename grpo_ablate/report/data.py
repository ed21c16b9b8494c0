"""`ReportData`: everything the report shows, assembled from a study's storage and trial folders.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
print(collect(load_study('studies/tiny-cpu.yaml')).recommendation)"

No plotting and no HTML: the numbers here are what tests assert on and what summary.json
carries. Each step lives in its own module (records, arms, findings, groups, objectives,
importance, text); this one runs them in order.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from grpo_ablate.report.arms import ArmSummary, Best, Delta, baseline_deltas, best_per_objective, study_baseline, summarize_arms
from grpo_ablate.report.findings import Finding, find_warnings
from grpo_ablate.report.groups import prompt_variance, success_rate
from grpo_ablate.report.importance import param_importances
from grpo_ablate.report.objectives import pareto_front, study_objectives
from grpo_ablate.report.records import (TrialRecord, diagnostics, groups_rows, load_trials, masked, read_trial_files,
                                        record_from_trial, steps_rows)
from grpo_ablate.report.text import recommendation
from grpo_ablate.storage import mask_url
from grpo_ablate.vocab import DIAGNOSTIC_METRICS, HEADLINE_METRICS, Arm, Metric, Outcome, metric

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import Study

__all__ = ["ReportData", "build_report_data", "collect", "report_metrics"]


@dataclass
class ReportData:
    """All the report shows; built by `collect` (storage) or `build_report_data` (tests)."""

    study_name: str
    objectives: list[tuple[str, str]]
    metrics: dict[str, Metric]  # what the report shows, in order; objectives carry the study's direction
    records: list[TrialRecord]
    arms: list[ArmSummary]
    baseline: Arm | None
    best: dict[str, Best | None]
    deltas: dict[str, dict[str, Delta]]
    warnings: list[Finding]
    steps: pd.DataFrame
    groups: pd.DataFrame
    prompts: pd.DataFrame
    success_p: float | None
    success_p_unit: bool
    pareto: set[int]
    importances: dict[str, dict[str, float]]
    importance_note: str | None
    recommendation: str
    config: dict[str, Any]  # the study file as stored, passwords masked
    versions: dict[str, Any]
    hardware: str | None
    storage_url: str | None = None  # masked
    generated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.outcome for r in self.records)
        return {o.value: int(c.get(o.value, 0)) for o in Outcome}


def report_metrics(objectives: Sequence[tuple[str, str]]) -> dict[str, Metric]:
    """The objectives, the registry's headline metrics, then its diagnostics; the study's direction wins."""
    names = [m for m, _ in objectives]
    names += [m for m in (*HEADLINE_METRICS, *DIAGNOSTIC_METRICS) if m not in names]
    out = {m: metric(m) for m in names}
    for m, d in objectives:
        out[m] = dataclasses.replace(out[m], direction=d)
    return out


def build_report_data(
    study_name: str,
    study_user_attrs: Mapping[str, Any],
    frozen: Sequence["FrozenTrial"],
    fallback_objectives: Sequence[tuple[str, str]] = (("reward_per_hour", "maximize"),),
    fallback_config: Mapping[str, Any] | None = None,
    storage_url: str | None = None,
) -> ReportData:
    """Extract everything from a study's attrs and trials (and the trial folders they point to)."""
    objectives = study_objectives(study_user_attrs, fallback_objectives)
    metrics = report_metrics(objectives)
    records: list[TrialRecord] = []
    step_rows: list[dict[str, Any]] = []
    group_rows: list[dict[str, Any]] = []
    bad_lines = 0
    for ft in sorted(frozen, key=lambda t: t.number):
        tdir = ft.user_attrs.get("trial_dir")
        files = read_trial_files(Path(tdir) if tdir else None)
        bad_lines += files.bad_lines
        r = record_from_trial(ft, list(metrics), diagnostics(files))
        records.append(r)
        step_rows += steps_rows(r, files.steps)
        group_rows += groups_rows(r, files.groups)
    steps = pd.DataFrame(step_rows)
    groups = pd.DataFrame(group_rows)

    baseline = study_baseline(study_user_attrs.get("baseline"), records)
    arms = summarize_arms(records, list(metrics), baseline)
    best = best_per_objective(arms, objectives)
    deltas = baseline_deltas(arms, metrics)
    p, unit = success_rate(records, groups, steps)
    warnings = find_warnings(records, arms, bad_lines, p if unit else None)

    feasible_done = [r for r in records if r.outcome == Outcome.COMPLETED.value and r.values is not None]
    pareto = pareto_front([(r.number, r.values) for r in feasible_done], [d for _, d in objectives]) \
        if len(objectives) > 1 else set()  # type: ignore[misc]
    importances, note = param_importances(frozen, {r.number for r in feasible_done}, objectives)

    return ReportData(
        study_name=study_name,
        objectives=objectives,
        metrics=metrics,
        records=records,
        arms=arms,
        baseline=baseline,
        best=best,
        deltas=deltas,
        warnings=warnings,
        steps=steps,
        groups=groups,
        prompts=prompt_variance(groups),
        success_p=p,
        success_p_unit=unit,
        pareto=pareto,
        importances=importances,
        importance_note=note,
        recommendation=recommendation(best, deltas, arms, objectives, metrics),
        config=masked(dict(study_user_attrs.get("config") or fallback_config or {})),
        versions=dict(study_user_attrs.get("versions") or {}),
        hardware=study_user_attrs.get("hardware"),
        storage_url=mask_url(storage_url) if storage_url else None,
    )


def collect(study: "Study") -> ReportData:
    """Everything the report needs for a loaded study file."""
    attrs, frozen = load_trials(study.storage_url, study.study.name)
    return build_report_data(study.study.name, attrs, frozen, list(zip(study.metric_names, study.directions)),
                             study.to_dict(), study.storage_url)
