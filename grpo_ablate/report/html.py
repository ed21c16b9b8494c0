"""The report page: `ReportData` + figures -> one self-contained HTML string.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
from grpo_ablate.report.html import render_html; print(render_html(collect(load_study('studies/tiny-cpu.yaml')))[:200])"

One Jinja2 template (template.html.j2) with autoescape on for everything: prompts,
completions, failure reasons and study-file values are model or user text, so they are only
ever inserted as escaped text; nothing is marked safe. The page also carries a
Content-Security-Policy that allows no script and no network at all (images are data: URIs,
styles inline), so even a missed escape could not run code or phone home.
"""

from __future__ import annotations

import re

from typing import Any, Mapping, Sequence

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

from grpo_ablate.report.arms import ArmSummary
from grpo_ablate.report.data import ReportData
from grpo_ablate.report.figure import Figure
from grpo_ablate.report.plots import all_figures
from grpo_ablate.report.summary import EXPORTS
from grpo_ablate.report.evaluation import TARGET_KEYS, CensoredStat
from grpo_ablate.report.groups import RANKING_RULE
from grpo_ablate.report.text import clip, fmt, fmt_stat, fmt_stat_short
from grpo_ablate.core.vocab import TARGET_METRICS, Outcome
from grpo_ablate.core.vocab import metric as registry_metric
from grpo_ablate.report.verdict import arm_call
from grpo_ablate.stats.calls import calls as holm_calls
from grpo_ablate.stats.min_effect import default_min_effect
from grpo_ablate.records.race_record import calls_level, design_words

__all__ = ["render_html", "view_model", "target_cell", "delta_cell", "held_out_used", "TABLE_ORDER", "EVAL_TABLE_ORDER"]

# The tables' columns after the study's objectives, most decision-relevant first. The deltas
# table leaves out the diagnostics (the registry's non-headline metrics): they explain, not decide.
TABLE_ORDER = ("reward_per_hour", "final_reward", "reward_per_million_tokens", "stability_variance",
               "samples_per_second", "peak_memory_mb", "frac_reward_zero_std", "distinct_frac")
# With held-out evaluation the held-out metrics lead; training reward stays for reference.
EVAL_TABLE_ORDER = ("eval_final_reward", "eval_gain", "eval_auc", "eval_gain_per_million_tokens", "eval_gain_per_hour",
                    "reward_per_million_tokens", "final_reward", "reward_per_hour", "samples_per_second",
                    "peak_memory_mb", "frac_reward_zero_std", "distinct_frac")
TOP_PROMPTS = 10
COMPLETION_CHARS = 600


# Explicit direction embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069).
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("grpo_ablate", "report"),
        autoescape=True,  # every {{ }} is escaped; there is no `|safe` in the template
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = fmt
    env.filters["stat"] = fmt_stat
    env.filters["stat_short"] = fmt_stat_short
    return env


def _value(v: Any) -> str:
    """Study-file values as a person writes them: '2, 4, 8', 'mode=none, port=8000'."""
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items() if x is not None)
    if isinstance(v, list):
        if all(isinstance(x, dict) for x in v):
            return "; ".join(_value(x) for x in v)
        return ", ".join(_value(x) for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def setup_sections(config: Mapping[str, Any], hardware: str | None, versions: Mapping[str, Any],
                   extra: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The resolved study file as (section, [(key, value)]) with unset keys left out."""
    titles = [("study", "Study"), ("model", "Model"), ("data", "Data"), ("rewards", "Rewards"),
              ("search", "Search space"), ("budget", "Budget per trial"), ("hardware", "Hardware"),
              ("trainer", "Trainer (GRPOConfig keywords)"), ("compare", "Compare")]
    out: list[tuple[str, list[tuple[str, str]]]] = []
    for key, title in titles:
        sec = config.get(key)
        rows: list[tuple[str, str]] = []
        if key == "hardware" and hardware:
            rows.append(("batch shape", str(hardware)))
        if isinstance(sec, Mapping):
            for k, v in sec.items():
                if v is None or v == {} or v == []:
                    continue
                rows.append((str(k), _value(v)))
        elif isinstance(sec, list) and sec:
            for item in sec:
                if isinstance(item, Mapping):
                    rows.append((str(item.get("name", "?")), f"weight {_value(item.get('weight', 1.0))}"))
                else:
                    rows.append((str(item), "weight 1"))
        if key == "study":
            rows += [(k, _value(v)) for k, v in extra.items()]
        if rows:
            out.append((title, rows))
    if versions:
        out.append(("Library versions", [(str(k), _value(v)) for k, v in versions.items()]))
    return out


def _arm_columns(data: ReportData) -> list[str]:
    cols = [m for m, _ in data.objectives]
    if data.verdict is not None and data.verdict.metric and data.verdict.metric not in cols:
        cols.insert(0, data.verdict.metric)
    order = EVAL_TABLE_ORDER if data.has_eval else TABLE_ORDER
    measured = {m for a in data.arms for m, s in a.metrics.items() if s.mean is not None}
    return cols + [m for m in order if m not in cols and m in data.metrics and (m in measured or not data.arms)]


def target_cell(t: CensoredStat | None) -> str:
    """'3/3 reached, median 1,200'; '1/3 reached, median ≥ 4,000 (lower bound)'; 'not reached (0/2; budget 6,400)'."""
    if t is None or t.n == 0:
        return "–"
    if t.reached == 0:
        budget = max(v for v, _ in t.values)
        return f"not reached (0/{t.n}; budget {fmt(budget)})"
    if t.median_is_bound:
        return f"{t.reached}/{t.n} reached, median ≥ {fmt(t.median)} (lower bound)"
    return f"{t.reached}/{t.n} reached, median {fmt(t.median)}"


def _verdict_facts(data: ReportData) -> list[str]:
    """The statistics behind the answer, one short line each: the answer's details (report/wording.py,
    said once) and what only the page adds (the race's design, the held-out prompts used)."""
    v = data.verdict
    if v is None or v.metric is None:
        return []
    out = list(v.details)
    race = data.racing
    if race and race.get("path"):
        out.append("The study raced: " + ("a group-sequential race (Haybittle-Peto error spending over its planned "
                                          "looks; its last look is the fixed-sample test)"
                                          if race.get("design") == "group_sequential" else
                                          "an anytime race (confidence sequences valid at every look)") + ".")
    used = held_out_used(data)
    if used:
        out.append(used)
    return out


def held_out_used(data: ReportData) -> str | None:
    """How many held-out prompts every trial scored, against how many the study asked for.

    The trial side drops prompts that overlap the training set (or runs out of data), so the
    number used can be smaller than requested; the page says so, not only the trials' log.txt.
    """
    if not data.has_eval or data.evals.empty or "num_prompts" not in data.evals:
        return None
    used = sorted({int(n) for n in pd.to_numeric(data.evals["num_prompts"], errors="coerce").dropna()})
    if not used:
        return None
    evaluation = data.config.get("evaluation") if isinstance(data.config, dict) else None
    asked = evaluation.get("num_prompts") if isinstance(evaluation, dict) else None
    shown = " to ".join(f"{n:,}" for n in (used[0], used[-1])) if len(used) > 1 else f"{used[0]:,}"
    if isinstance(asked, int) and used[-1] < asked:
        return (f"Held-out prompts scored by every trial: {shown} of the {asked:,} requested (the rest overlapped "
                f"the training prompts, or the data had no more).")
    return f"Held-out prompts scored by every trial: {shown}."


def delta_cell(relative: float, better: bool | None, clear: bool | None, words: str) -> dict[str, str]:
    """One cell of the effects table: green/red only for a difference beyond the seeds' spread.

    A single seed (clear None) has no spread to judge against, so it stays plain, as the legend
    says; a change that rounds to 0% is written "<1%" with its sign, never as a coloured "-0%".
    """
    pct = relative * 100
    if pct == 0 or better is None:
        text, cls = "0%", "same"
    else:
        text = f"{pct:+.0f}%" if abs(pct) >= 0.5 else ("+" if pct > 0 else "−") + "<1%"
        if clear is None:
            cls = "single"  # one seed: plain, the spread is unknown
        elif clear is False:
            cls = "noise"  # within the seeds' spread: no colour, it is no evidence either way
        else:
            cls = ("better" if better else "worse") + " clear"
    return {"text": text.replace("-", "−"), "cls": cls, "title": words}


def _delta_columns(data: ReportData) -> list[str]:
    objectives = {m for m, _ in data.objectives}
    return [m for m in _arm_columns(data) if m in objectives or data.metrics[m].headline]


_ARROWS = {"maximize": "↑", "minimize": "↓"}


def _outcomes_text(a: ArmSummary) -> str:
    """'3 done, 1 oom': completed first, short words so the column stays narrow."""
    order = {o.value: i for i, o in enumerate(Outcome)}
    words = {Outcome.COMPLETED.value: "done"}
    return ", ".join(f"{v} {words.get(k, k)}" for k, v in sorted(a.outcomes.items(), key=lambda kv: order.get(kv[0], 9)))


def race_path(race: Mapping[str, Any], data: ReportData, label: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The verdict after every round (each arm's call against the baseline) and the settled point.

    The settled point: "settled after 5 of 12 seeds, 38 % of the planned completions" once a race
    that stops when settled has no arm left undecided; every trial of a planned study runs the same
    budget, so the share of trials run is the share of completions.
    """
    rounds = [r for r in race.get("path") or [] if isinstance(r, Mapping)]
    rows = [{"round": r.get("round"), "seeds": r.get("seeds"),
             "calls": "; ".join(f"{label(k)} {v}" for k, v in (r.get("calls") or {}).items()),
             "dropped": ", ".join(label(k) for k in r.get("dropped") or []) or "none",
             "live": len(r.get("live") or [])} for r in rounds]
    if not rounds:
        return rows, None
    study = data.config.get("study") or {}
    seeds = study.get("seeds") if isinstance(study.get("seeds"), list) else None
    arms = {a for r in rounds for a in [*(r.get("calls") or {}), *(r.get("live") or []), *(r.get("dropped") or [])]}
    arms |= {str(race.get("leader"))} if race.get("leader") else set()
    base = next((a.config.key for a in data.arms if a.is_baseline), None)
    arms |= {base} if base else set()
    last = rounds[-1]
    if not race.get("decided"):
        return rows, None
    undecided = [k for k, v in (last.get("calls") or {}).items() if v == "undecided"]
    ran = sum(1 for r in data.records if r.outcome not in (Outcome.RUNNING.value, Outcome.QUEUED.value))
    planned = len(arms) * len(seeds) if seeds else None
    spent = (f", {ran / planned:.0%} of the planned completions ({ran} of {planned} trials)"
             if planned and ran else "")
    of = f" of {len(seeds)}" if seeds else ""
    if not last.get("live") and not undecided:
        return rows, f"settled after {last.get('seeds')}{of} seeds{spent}"
    return rows, (f"not settled: stopped after {last.get('seeds')}{of} seeds{spent} with "
                  f"{len(undecided)} arm(s) still undecided")


def eval_path(data: ReportData) -> list[dict[str, Any]]:
    """The verdict at each shared evaluation point: every arm's call against the baseline on the
    held-out reward measured there, by the answer's own rule (the CS when the study ran the anytime
    race, else the Holm-adjusted family of stats.calls at the answer's level), with study.min_effect."""

    ev = data.evals
    base = next((a for a in data.arms if a.is_baseline), None)
    if base is None or ev.empty or not {"point", "reward", "config", "seed", "outcome"} <= set(ev.columns):
        return []
    ev = ev[(ev["outcome"] == Outcome.COMPLETED.value) & ev["reward"].notna()]
    study = data.config.get("study") or {}
    given = study.get("min_effect")
    min_effect = float(given) if isinstance(given, (int, float)) else default_min_effect("eval_final_reward") or 0.0
    race = data.racing or {}
    sequential = bool(race.get("path")) and race.get("design", "anytime") == "anytime"
    level = calls_level(data.racing)  # the answer's level: below 5% after a group-sequential race stopped early
    rows = []
    for point, at in ev.groupby("point"):
        by = {k: dict(zip(g["seed"], g["reward"])) for k, g in at.groupby("config")}
        b = by.get(base.config.key, {})
        if not b or int(point) == 0:  # point 0 is before the first step: every arm is the same model
            continue
        calls = []
        family = {} if sequential else holm_calls(by, base.config.key, min_effect=min_effect, level=level)
        for a in data.arms:
            if a.is_baseline or a.config.key not in by:
                continue
            arm = by[a.config.key]
            if sequential:
                # the race's anytime rule: the confidence sequence over the paired seeds, no fixed-sample test
                call, _ = arm_call(None, b, arm, maximize=True, min_effect=min_effect, sequential=True)
            else:
                call = family[a.config.key].call
            calls.append(f"{a.config.label} {call}")
        share = at["completions"].mean() / ev["completions"].max() if "completions" in at and ev["completions"].max() else None
        rows.append({"point": int(point), "share": f"{share:.0%}" if share is not None else "", "calls": "; ".join(calls)})
    return rows if len(rows) > 1 else []


def racing_view(data: ReportData) -> dict[str, Any] | None:
    """The racing section: which arms were dropped, in which round, on which seeds and why."""
    race = data.racing
    if not race:
        return None

    labels = {r.config.key: r.config.label for r in data.records if r.config is not None}  # keys looked up, not parsed

    def label(key: object) -> str:
        return labels.get(str(key), str(key))

    settings = (data.config.get("study") or {}).get("racing") or {}
    if race.get("decided"):
        state = f"was decided after round {race.get('round')}: {label(race.get('leader'))} leads"
    else:
        live = ", ".join(label(k) for k in race.get("live") or []) or "none"
        state = f"used every seed; still in contention: {live}"
    ran = sum(1 for r in data.records if r.outcome not in (Outcome.RUNNING.value, Outcome.QUEUED.value))
    path, settled = race_path(race, data, label)
    return {
        "confidence": settings.get("confidence"),
        "first_round_seeds": settings.get("first_round_seeds"),
        "state": state,
        "ran": ran,
        "path": path,
        "settled": settled,
        "stop_when_settled": settings.get("stop_when_settled", True) if race.get("path") else False,
        "design": design_words(race) if race.get("path") else None,  # which race ran (race_record.py)
        "decides_at": race.get("decides_at"),  # which evaluation point the race decides at (study/search/early_rank.py)
        "rows": [{"arm": label(d.get("arm")), "round": d.get("round"),
                  "seeds": ", ".join(str(s) for s in d.get("seeds") or []), "why": d.get("reason", "")}
                 for d in race.get("dropped") or []],
    }


def view_model(data: ReportData, figures: Sequence[Figure]) -> dict[str, Any]:
    """Everything the template prints, already decided and formatted."""
    base = next((a for a in data.arms if a.is_baseline), None)
    best_rows = []
    for metric, direction in data.objectives:
        b = data.best.get(metric)
        info = data.metrics[metric]
        vs = None
        if b is not None and base is not None:
            d = data.deltas.get(b.arm.name, {}).get(metric)
            vs = d.words if d is not None else ("this is the baseline" if b.arm.is_baseline else None)
        best_rows.append({
            "metric": metric, "label": info.label, "direction": direction,
            "arm": b.arm if b else None, "stat": b.stat if b else None, "vs": vs,
        })
    delta_cols = _delta_columns(data)
    delta_rows = []
    for a in data.arms:
        if a.is_baseline or a.name not in data.deltas:
            continue
        cells = []
        for m in delta_cols:
            d = data.deltas[a.name].get(m)
            if d is None or d.diff.relative is None:
                cells.append({"text": "–", "cls": "", "title": d.words if d else ""})
                continue
            cells.append(delta_cell(d.diff.relative, d.better, d.diff.clear, d.words))
        delta_rows.append({"arm": a, "cells": cells})
    primary = data.objectives[0][0] if data.objectives else None
    delta_words = [data.deltas[a.name][primary].words for a in data.arms
                   if primary and a.name in data.deltas and primary in data.deltas[a.name]]
    prompts = []
    for i, row in enumerate(data.prompts.head(TOP_PROMPTS).itertuples(index=False), start=1):
        rewards = list(getattr(row, "example_rewards", []) or [])
        if all(r is None for r in rewards):  # groups.jsonl from before rewards were kept per completion
            rewards = []
        texts = [clip(c, COMPLETION_CHARS) for c in row.example_completions]
        prompts.append({
            "arm": getattr(row, "example_arm", None),
            "rewards": rewards,
            "pairs": [(t, rewards[j] if j < len(rewards) else None) for j, t in enumerate(texts)],
            "rank": i,
            "prompt": row.prompt,
            "var": row.mean_reward_var,
            "max_var": row.max_reward_var,
            "groups": row.groups,
            "reward": row.mean_reward,
            "distinct": row.mean_distinct_frac,
        })
    trials = []
    for r in data.records:
        t = data.targets.get(r.number)
        trials.append({
            "r": r,
            "target": ("–" if t is None or t.get("completions_to_target") is None else
                       fmt(t["completions_to_target"]) if t.get("target_reached") else "not reached"),
            "vals": ", ".join(fmt(v) for v in r.values) if r.values is not None and r.outcome == "completed" else "–",
            "reason": clip(r.reason, 300) if r.reason else "",
        })
    counts = data.counts
    extra = {"trials": ", ".join(f"{v} {k}" for k, v in counts.items() if v)}
    if data.storage_url:
        extra["storage"] = data.storage_url
    return {
        "d": data,
        "title": f"GRPO ablation: {data.study_name}",
        "tab_title": _BIDI_CONTROLS.sub("", f"GRPO ablation: {data.study_name}"),  # <title> holds no <bdi>
        "base": base,
        "best_rows": best_rows,
        "delta_cols": [(m, data.metrics[m].label) for m in delta_cols],
        "delta_rows": delta_rows,
        "delta_words": delta_words,
        "arm_cols": [(m, data.metrics[m].label, _ARROWS.get(data.metrics[m].direction or "", ""))
                     for m in _arm_columns(data)],
        "arms": data.arms,
        "outcomes_text": _outcomes_text,
        "warnings": [w for w in data.warnings if w.severity == "warning"],
        "notes": [w for w in data.warnings if w.severity != "warning"],
        "setup": setup_sections(data.config, data.hardware, data.versions, extra),
        "definitions": [(m, d.label, d.direction, d.description, d.unit) for m, d in data.metrics.items()]
        + ([(m, registry_metric(m).label, registry_metric(m).direction, registry_metric(m).description,
             registry_metric(m).unit) for m in TARGET_METRICS]
           if data.has_eval else []),
        "figures": list(figures),
        "sections": {name: [f for f in figures if f.section == name]
                     for name in ("held-out", "held-out-seeds", "training", "more")},
        "prompts": prompts,
        "n_prompts": len(data.prompts),
        "trials": trials,
        "counts": counts,
        "exports": EXPORTS,
        "objective_names": [m for m, _ in data.objectives],
        "verdict_facts": _verdict_facts(data),
        "target_cols": [(m, data.metrics[m].label if m in data.metrics else m) for m in TARGET_KEYS],
        "target_rows": [{"arm": a, "cells": [target_cell(a.targets.get(m)) for m in TARGET_KEYS]}
                        for a in data.arms if a.targets],
        "eval_samples": data.eval_samples,
        "racing": racing_view(data),
        "eval_path": eval_path(data),
        "ranking_rule": RANKING_RULE,
        "has_eval": data.has_eval,
        "screen": data.screen,
        "completion_chars": COMPLETION_CHARS,
    }


def render_html(data: ReportData, figures: Sequence[Figure] | None = None) -> str:
    """The whole page; figures are drawn here unless given (tests pass [] to skip matplotlib)."""
    figs = all_figures(data) if figures is None else figures
    return _env().get_template("template.html.j2").render(**view_model(data, figs))
