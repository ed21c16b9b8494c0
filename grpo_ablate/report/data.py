"""`ReportData`: everything the report shows, assembled from a study's storage and trial folders.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
print(collect(load_study('studies/tiny-cpu.yaml')).recommendation)"

No plotting and no HTML: the numbers here are what tests assert on and what summary.json
carries. A branched study's prefix trials (role "prefix": the baseline trained to the branch step
once per seed) are no arm's trials: they are left out of the arms, the verdict and every per-arm
compute and reward-per-hour figure (each arm's figures count its branch's own steps from the branch
step on), and shown once as `shared_prefix` ("shared prefix: X GPU-h over N seeds, counted once"). Each step lives in its own module (records, arms, findings, groups, objectives,
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

from grpo_ablate.report.arms import (ArmSummary, Best, Delta, baseline_deltas, best_per_objective, reward_range,
                                    study_baseline, summarize_arms)
from grpo_ablate.report.evaluation import (EVAL_METRICS, TARGET_KEYS, censored_stat, study_has_evaluation, study_target,
                                           summarize_eval, to_target)
from grpo_ablate.report.findings import Finding, find_warnings
from grpo_ablate.report.groups import prompt_variance, success_rate, success_rates_by_arm
from grpo_ablate.report.importance import param_importances
from grpo_ablate.report.objectives import pareto_front, study_objectives
from grpo_ablate.report.records import (TrialRecord, diagnostics, groups_rows, load_trials, masked, read_trial_files,
                                        record_from_trial, steps_rows, trial_columns)
from grpo_ablate.report.verdict import Guarantee, Verdict, decide
from grpo_ablate.records import trial_record as record
from grpo_ablate.plan.branching import BranchError, branch_step
from grpo_ablate.core.cost import lr_schedule_of
from grpo_ablate.records.gpu_hours import budget_of, duration_text, gpu_hours_text, spent_seconds
from grpo_ablate.storage.store import mask_url
from grpo_ablate.plan.price import planned_price, spent_price, tunes_a_run
from grpo_ablate.plan.design import resolution_line
from grpo_ablate.report.screen import screen_view
from grpo_ablate.stats.selection import CONFIDENCE
from grpo_ablate.records.race_record import calls_level, race_guarantee
from grpo_ablate.core.vocab import (DIAGNOSTIC_METRICS, HEADLINE_METRICS, PREFIX_ROLE, Arm, Metric,
                               Outcome, finite, metric)
from grpo_ablate.files.advise_file import load_advice
from grpo_ablate.files.owned import Owner

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig
    from grpo_ablate.files.owned import Owner

__all__ = ["ReportData", "build_report_data", "collect", "read_advice", "report_metrics", "eval_samples",
           "EVAL_PROMPTS_SHOWN", "shared_prefix", "missing_seeds"]


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
    recommendation: str  # the answer's words (verdict.words)
    config: dict[str, Any]  # the study file as stored, passwords masked
    versions: dict[str, Any]
    hardware: str | None
    storage_url: str | None = None  # masked
    verdict: Verdict | None = None
    has_eval: bool = False
    target: float | None = None  # the held-out reward the "... to target" figures count to
    target_words: str = ""
    targets: dict[int, dict[str, Any]] = field(default_factory=dict)  # trial -> to_target's result
    # per arm: the same first held-out prompts at the start and at the end (eval.jsonl `samples`)
    eval_samples: list[dict[str, Any]] = field(default_factory=list)
    evals: pd.DataFrame = field(default_factory=pd.DataFrame)  # every evaluation point, knobs on each row
    racing: dict[str, Any] | None = None  # the study's racing state (race_record.RaceState.as_dict), when it raced
    advice: dict[str, Any] | None = None  # advise.json, when `grpo-ablate advise` ran for this study
    gpu_budget: dict[str, Any] | None = None  # study.budget_gpu_hours: spent and left (gpu_hours.Budget.as_dict)
    price: str | None = None  # what the trials spent as a multiple of the full run's GPU-hours (plan/price.py)
    lr_schedule: str | None = None  # "prefix" (of the recipe's full run) or "compressed" (into each trial)
    branched_at: int | None = None  # the step the arms branched at from one shared prefix per seed (budget.branch_from)
    shared_prefix: dict[str, Any] | None = None  # the prefixes' compute, counted once (`shared_prefix`)
    screen: dict[str, Any] | None = None  # the screen before any training (report/screen.py), when it ran
    resolution: str | None = None  # what the study's design resolves at its price (plan/design.py)
    generated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.outcome for r in self.records)
        return {o.value: int(c.get(o.value, 0)) for o in Outcome}


def report_metrics(objectives: Sequence[tuple[str, str]], has_eval: bool = True) -> dict[str, Metric]:
    """The objectives, the registry's headline metrics, then its diagnostics; the study's direction wins.

    A study without held-out evaluation leaves the evaluation metrics out (unless it optimises one).
    """
    names = [m for m, _ in objectives]
    names += [m for m in (*HEADLINE_METRICS, *DIAGNOSTIC_METRICS) if m not in names
              and (has_eval or m not in EVAL_METRICS)]
    out = {m: metric(m) for m in names}
    for m, d in objectives:
        out[m] = dataclasses.replace(out[m], direction=d)
    return out


def build_report_data(
    study_name: str,
    study: record.StudyAttrs,
    frozen: Sequence["FrozenTrial"],
    fallback_objectives: Sequence[tuple[str, str]] = (("reward_per_hour", "maximize"),),
    fallback_config: Mapping[str, Any] | None = None,
    storage_url: str | None = None,
    advice: Mapping[str, Any] | None = None,
    branched_at: int | None = None,
) -> ReportData:
    """Extract everything from a study's attributes and trials (and the trial folders they point to).

    `branched_at`: the step the arms branched at (collect reads it from the study: branching.branch_step); else
    budget.branch_from when the config gives it as a step count."""
    objectives = study_objectives(study, fallback_objectives)
    all_metrics = report_metrics(objectives)
    records: list[TrialRecord] = []
    step_rows: list[dict[str, Any]] = []
    group_rows: list[dict[str, Any]] = []
    eval_rows: dict[int, list[dict[str, Any]]] = {}
    tokens: dict[int, float] = {}
    bad_lines = 0
    copies = [ft for ft in frozen if record.is_copy(ft)]
    prefixes = [ft for ft in frozen if record.role_of(ft) == PREFIX_ROLE and record.ran_here(ft)]
    for ft in sorted(frozen, key=lambda t: t.number):
        if record.is_copy(ft) or record.is_cancelled(ft):  # a warm start's copy, a settled arm's cancelled cell: never ran here
            continue
        if record.role_of(ft) == PREFIX_ROLE:  # a seed's shared prefix: no arm's trial (shown once, shared_prefix)
            continue
        tdir = record.trial_dir(ft)
        files = read_trial_files(Path(tdir) if tdir else None)
        bad_lines += files.bad_lines
        r = record_from_trial(ft, list(all_metrics), diagnostics(files))
        # the lifecycle copies these into the user attrs; a trial's files fill any gap (older or crashed trials)
        for k, v in summarize_eval(files.evals).items():
            if r.metrics.get(k) is None and v is not None:
                r.metrics[k] = v
        records.append(r)
        rows = steps_rows(r, files.steps)
        step_rows += rows
        group_rows += groups_rows(r, files.groups)
        if files.evals:
            eval_rows[r.number] = files.evals
        spent = [x for x in (finite(files.evals[-1].get("generated_tokens")) if files.evals else None,
                             finite(rows[-1].get("generated_tokens")) if rows else None) if x]
        if spent:
            tokens[r.number] = spent[0]
    steps = pd.DataFrame(step_rows)
    groups = pd.DataFrame(group_rows)
    has_eval = study_has_evaluation(study, [r.metrics for r in records])
    metrics = report_metrics(objectives, has_eval)

    baseline = study_baseline(study.baseline, records)
    config = study.config or dict(fallback_config or {})
    rewards_range = reward_range(config)
    arms = summarize_arms(records, list(metrics), baseline, rewards_range)
    target, target_words, targets = None, "", {}
    if has_eval:
        base_done = [r for r in records if r.config == baseline and r.outcome == Outcome.COMPLETED.value]
        target, target_words = study_target(
            study.evaluation,
            [v for r in base_done if (v := finite(r.metrics.get("eval_start_reward"))) is not None],
            [v for r in base_done if (v := finite(r.metrics.get("eval_gain"))) is not None])
        if target is not None:
            targets = {n: to_target(rows_, target) for n, rows_ in eval_rows.items()}
            arms = [_with_targets(a, records, targets) for a in arms]
    best = best_per_objective(arms, objectives)
    # a group-sequential race that stopped early looked last at a strict level: every call is held to it
    level = calls_level(study.racing)
    p, unit = success_rate(records, groups, steps)
    by_arm = success_rates_by_arm(records, groups, steps)
    study_cfg = config.get("study") or {}
    raced = study.racing
    min_effect = study_cfg.get("min_effect") if isinstance(study_cfg, Mapping) else None
    # a study that ran the anytime race looked after every round with no plan: its calls rest on the
    # confidence sequences its rounds used; a group-sequential race ends at its last look's level (`level`)
    anytime = isinstance(raced, Mapping) and bool(raced.get("path")) and raced.get("design", "anytime") == "anytime"
    if branched_at is None:
        given = (config.get("budget") or {}).get("branch_from")
        branched_at = given if isinstance(given, int) and not isinstance(given, bool) else None
    racing_cfg = study_cfg.get("racing") if isinstance(study_cfg, Mapping) else None
    confidence = racing_cfg.get("confidence") if isinstance(racing_cfg, Mapping) else None
    gpus = (config.get("hardware") or {}).get("gpus") if isinstance(config.get("hardware"), Mapping) else None
    verdict = decide(arms, records, objectives, metrics, has_eval, tokens, by_arm, advice,
                     min_effect=float(min_effect) if isinstance(min_effect, (int, float)) else None,
                     sequential=anytime, branched_at=branched_at, level=level,
                     confidence=float(confidence) if isinstance(confidence, (int, float)) else CONFIDENCE,
                     gpus=int(gpus) if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 else None,
                     race=_race_guarantee(raced, {a.config.key: a.name for a in arms}), reward_range=rewards_range)
    # the effects table: the answer's calls on its metric, the page's one family on the others
    deltas = baseline_deltas(arms, metrics, level, verdict.metric if not anytime else None,
                             {a.name: (a.call, a.p_adjusted) for a in verdict.arms} if not anytime else None,
                             verdict.table_p if verdict.arms and not anytime else None)
    extra = [Finding("timing_noise", verdict.timing.words)] if verdict.timing and verdict.timing.exceeds else []
    if copies:
        extra.append(imported_note(copies))
    warnings = find_warnings(records, arms, bad_lines, by_arm, verdict.recommended, extra,
                             learned_nothing=verdict.kind == "cannot_rank")

    feasible_done = [r for r in records if r.outcome == Outcome.COMPLETED.value and r.values is not None]
    pareto = pareto_front([(r.number, r.values) for r in feasible_done if r.values is not None],
                          [d for _, d in objectives]) if len(objectives) > 1 else set()
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
        recommendation=verdict.words,
        config=masked(config),
        versions=dict(study.versions),
        hardware=study.hardware,
        storage_url=mask_url(storage_url) if storage_url else None,
        verdict=verdict,
        has_eval=has_eval,
        target=target,
        target_words=target_words,
        targets=targets,
        eval_samples=eval_samples(arms, records, eval_rows),
        evals=pd.DataFrame([{**trial_columns(r), **{k: v for k, v in row.items() if k not in ("per_prompt", "samples")}}
                            for r in records if r.number in eval_rows for row in eval_rows[r.number]]),
        racing=study.racing,
        advice=dict(advice) if advice is not None else None,
        gpu_budget=_gpu_budget(config, frozen),
        lr_schedule=_lr_schedule(config),
        branched_at=branched_at,
        shared_prefix=shared_prefix(prefixes, int((config.get("hardware") or {}).get("gpus") or 0), branched_at),
    )


def shared_prefix(prefixes: Sequence["FrozenTrial"], gpus: int, step: int | None) -> dict[str, Any] | None:
    """The branched study's prefixes, counted once: their seeds, what their attempts held (wall time x `gpus`, as
    the budget counts it) and one line saying so; None when the study ran none and names no branch step."""
    if not prefixes and step is None:
        return None
    seconds = spent_seconds(prefixes)
    seeds = sorted({s for ft in prefixes if (s := record.seed_of(ft)) is not None})
    missing = missing_seeds(prefixes)
    hours = seconds * gpus / 3600.0 if gpus else None
    cost = gpu_hours_text(hours) if hours is not None else f"{duration_text(seconds)} of wall time"
    at = f" to step {step}" if step else ""
    words = (f"shared prefix: {cost} over {len(seeds)} seed{'' if len(seeds) == 1 else 's'}, counted once (the "
             f"baseline trained{at} once per seed, every arm branching from it; each arm's compute and reward per hour "
             f"count only its own steps{f' from step {step} on' if step else ''})")
    return {"branch_step": step, "prefixes": len(prefixes), "seeds": seeds, "wall_seconds": round(seconds, 3),
            "gpu_hours": round(hours, 4) if hours is not None else None, "words": words, "missing_seeds": missing}


def missing_seeds(prefixes: Sequence["FrozenTrial"]) -> list[dict[str, Any]]:
    """The seeds whose prefix ended without completing and is not being trained again: none of their arms ran, so
    the answer rests on the other seeds. Each with its last prefix trial and why (the answer says so)."""
    by_seed: dict[int, list["FrozenTrial"]] = {}
    for ft in prefixes:
        if (seed := record.seed_of(ft)) is not None:
            by_seed.setdefault(seed, []).append(ft)
    out = []
    for seed, attempts in sorted(by_seed.items()):
        outcomes = [record.outcome(ft) for ft in attempts]
        if Outcome.COMPLETED in outcomes or Outcome.RUNNING in outcomes or Outcome.QUEUED in outcomes:
            continue
        last = max(attempts, key=lambda ft: ft.number)
        out.append({"seed": seed, "trial": last.number, "outcome": record.outcome(last).value,
                    "reason": (record.reason(last) or "no reason recorded")[:300]})
    return out


def _lr_schedule(config: Mapping[str, Any]) -> str | None:
    """Which learning-rate schedule the trials ran: the page says it, as plan does (issue 28)."""
    budget = config.get("budget")
    return lr_schedule_of(budget) if isinstance(budget, dict) else None


def _gpu_budget(config: Mapping[str, Any], frozen: Sequence["FrozenTrial"]) -> dict[str, Any] | None:
    """The GPU-hour budget's spent and left, when the study set one (every attempt's wall time x its GPUs)."""
    study, hardware = config.get("study") or {}, config.get("hardware") or {}
    total, gpus = study.get("budget_gpu_hours"), hardware.get("gpus")
    budget = budget_of(float(total), int(gpus or 0), frozen, None) if isinstance(total, (int, float)) else None
    return None if budget is None else {**budget.as_dict(), "words": budget.words()}


def imported_note(copies: Sequence["FrozenTrial"]) -> Finding:
    """Why a warm start's imported results are not evidence on this page (study/warm.py)."""
    sources = sorted({(record.copy_source(ft) or "").partition("#")[0] for ft in copies})
    return Finding("imported", (
        f"{len(copies)} result(s) imported by --warm-start from {', '.join(repr(s) for s in sources)} are not counted "
        "here: they guided this study's sampler, but ran in another study, so this page compares only the trials "
        "this study ran, on its own seeds. Their own report has them."), severity="info")


def _with_targets(a: ArmSummary, records: Sequence[TrialRecord], targets: Mapping[int, Mapping[str, Any]]) -> ArmSummary:
    """The arm with its censored target figures over its completed seeds."""
    mine = [targets[r.number] for r in records
            if r.config == a.config and r.outcome == Outcome.COMPLETED.value and r.number in targets]
    return dataclasses.replace(a, targets={m: censored_stat((t.get(m), bool(t.get("target_reached"))) for t in mine)
                                           for m in TARGET_KEYS})


EVAL_PROMPTS_SHOWN = 3  # how many held-out prompts each arm shows side by side


def eval_samples(arms: Sequence[ArmSummary], records: Sequence[TrialRecord],
                 eval_rows: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Per arm, its first completed seed's first held-out prompts at the first and the last point.

    Every trial scores the same prompts in the same order, so the rows line up across arms.
    """
    out = []
    for a in arms:
        rs = sorted((r for r in records if r.config == a.config and r.outcome == Outcome.COMPLETED.value
                     and len(eval_rows.get(r.number, ())) >= 1), key=lambda r: (r.seed is None, r.seed, r.number))
        if not rs:
            continue
        r = rs[0]
        rows = eval_rows[r.number]
        first, last = rows[0], rows[-1]

        def by_index(row: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
            samples = row.get("samples") or []
            return {int(x.get("prompt_index", i)): x for i, x in enumerate(samples) if isinstance(x, Mapping)}

        start, end = by_index(first), by_index(last)
        prompts = []
        for idx in sorted(set(start) | set(end))[:EVAL_PROMPTS_SHOWN]:
            s0, s1 = start.get(idx, {}), end.get(idx, {})
            prompts.append({
                "index": idx,
                "prompt": str(s1.get("prompt", s0.get("prompt", ""))),
                "start": _completions(s0),
                "end": _completions(s1),
            })
        if prompts:
            out.append({"arm": a.title, "config": a.config, "seed": r.seed, "trial": r.number,
                        "start_step": first.get("step"), "end_step": last.get("step"),
                        "start_completions": first.get("completions"), "end_completions": last.get("completions"),
                        "prompts": prompts})
    return out


def _completions(sample: Mapping[str, Any]) -> list[dict[str, Any]]:
    comps = sample.get("completions") or []
    out = []
    for c in comps:
        if isinstance(c, Mapping):
            length = finite(c.get("length"))
            out.append({"text": str(c.get("text", "")), "reward": finite(c.get("reward")),
                        "length": int(length) if length is not None and length.is_integer() else length})
    return out


def collect(study: "StudyConfig", read_from: str | None = None) -> ReportData:
    """Everything the report needs for a loaded study file; `read_from`: the storage URL to read the
    trials from instead of the study's own (a private copy: report.snapshot), still shown as the study's."""
    attrs, frozen = load_trials(read_from or study.storage_url, study.study.name)

    try:
        step = branch_step(study)
    except BranchError:  # a point this study cannot place: plan says why; the page shows no branch step
        step = None
    data = build_report_data(study.study.name, attrs, frozen, list(zip(study.metric_names, study.directions)),
                             study.to_dict(), study.storage_url, read_advice(study.output_dir, Owner.of(study)),
                             branched_at=step)
    # in units of the run it tunes, as plan and run say it; nothing when it tunes no particular run
    data.price = spent_price(study, frozen).words() if tunes_a_run(study) else None
    data.screen = screen_view(study.output_dir, Owner.of(study))
    data.resolution = resolution_line(study, planned_price(study).multiple) if tunes_a_run(study) else None
    return data


def read_advice(output_dir: Path, owner: "Owner") -> dict[str, Any] | None:
    """The study's advise.json when it holds a prediction (advise's, before any trial); else None."""

    raw = load_advice(output_dir, owner)
    return raw if raw is not None and isinstance(raw.get("predictions"), list) else None


def _race_guarantee(race: Mapping[str, Any] | None, names: Mapping[str, str]) -> Guarantee | None:
    """An elimination race that stopped: its guarantee (race_record.race_guarantee) as the verdict's record, the arms
    it kept by the names the page uses (`names`: arm key -> name)."""
    g = race_guarantee(race)
    if g is None:
        return None
    return Guarantee(float(g["probability"]), "elimination", int(g["arms"]), int(g["seeds"]), True,
                     tuple(names.get(a, a) for a in g.get("equivalent") or ()),
                     tuple(names.get(a, a) for a in g.get("kept") or ()))
