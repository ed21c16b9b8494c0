"""The answer: which configuration to use, how sure the study is, and why.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
print(collect(load_study('studies/tiny-cpu.yaml')).verdict.words)"

The rules, in order:
1. The metric. With held-out evaluation, the study's first objective when it is an evaluation
   metric, else eval_final_reward: every arm is scored on the same prompts at the same decoding.
   Without it, the first objective. A time-based metric whose arms differ by less than the
   study's run-to-run timing noise is replaced by its token-based twin, and the answer says so.
2. The answer a user acts on leads (stats/selection.py): the configuration most likely to be
   within study.min_effect of the best (default per metric: stats/min_effect.py), that
   probability and how it was computed (a posterior over the seeds), the configurations that
   cannot be excluded from being within min_effect of the best (family-wise 5%), and the cheapest
   of those in generated tokens and training hours. A recommendation is not "the baseline unless
   beaten": a configuration need not be significantly better to be the one most likely best.
3. Each arm against the baseline on that metric (stats.seeds.mean_difference's one rule, chosen
   from the design before any value is seen: paired over shared seeds, else Welch): better /
   worse when its Holm-adjusted p is below 5% (the family-wise error over all the arms' calls
   held at 5%), equivalent when both one-sided tests of a difference beyond +-min_effect reject
   (Holm-adjusted too), undecided otherwise; adjusted p-values and the method are on the page.
   A study that ran the anytime race looked after every round, so its calls rest on the
   anytime-valid confidence sequence instead; a group-sequential race ends at a last look at 5%,
   the fixed-sample rule. Without a clear difference the answer says "not detected", the smallest
   difference the study could have detected (80% power, 5% two-sided) and the seeds it would take.
4. Fewer than two seeds anywhere: no probability and no test; the best mean is only something to try.
0. Before any of that: a study in which nothing learned cannot rank G ("cannot_rank"). That is
   when no arm's gain (held-out gain with evaluation, else the training reward gain) is
   distinguishable from zero, every arm having a gain that is exactly zero or whose 95% interval
   spans zero, or, failing a measured gain, when nearly all groups of every arm had no reward
   spread (NO_SPREAD_FRACTION). Ranking arms that all stood still would rank noise, so the answer
   says why (per-arm gains, zero-spread shares and success rates, advise's never-solved prompts)
   and what to change before choosing G.

Warnings consult `Verdict.recommended` (report.findings), so the page gives one recommendation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from grpo_ablate.files.advise_file import ADVISE_COMPLETIONS, NO_SPREAD_FRACTION
from grpo_ablate.report.arms import ArmSummary, arm_vs_baseline
from grpo_ablate.report.records import TrialRecord
from grpo_ablate.stats.calls import calls as holm_calls
from grpo_ablate.stats.min_effect import default_min_effect
from grpo_ablate.stats.multiplicity import METHOD as HOLM
from grpo_ablate.stats.seeds import (ALPHA, POWER, Comparison, MetricStat, detectable_difference, seeds_needed, stat)
from grpo_ablate.stats.selection import HOW, Selection, select
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE, classify
from grpo_ablate.report.text import fmt, fmt_interval, fmt_p
from grpo_ablate.report.timing_noise import TIME_TWINS, TimingNoise, timing_noise
from grpo_ablate.vocab import Arm, Metric, Outcome, finite, metric

__all__ = ["Verdict", "ArmVerdict", "decide", "arm_call", "calls_text", "verdict_metric", "NO_SPREAD_FRACTION",
           "arm_costs", "arm_hours", "answer_words", "learned_nothing"]


@dataclass(frozen=True)
class ArmVerdict:
    """One arm against the baseline on the verdict's metric."""

    name: str
    config: Arm
    mean: float | None
    n: int
    comparison: Comparison | None
    better: bool  # clearly better: the one rule's call is "better"
    worse: bool  # clearly worse: its call is "worse"
    cost: float | None
    call: str = UNDECIDED  # better | worse | equivalent | undecided (stats/sequential.py)
    cs: tuple[float, float] | None = None  # the anytime-valid sequence's last interval, when the study raced
    p_adjusted: float | None = None  # Holm-adjusted p of "no difference from the baseline" (fixed-sample calls)
    p_equivalence_adjusted: float | None = None  # Holm-adjusted TOST p of "not within min_effect"
    hours: float | None = None  # training hours per trial (device-hours: GPU-hours on a GPU study)

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.name, "key": self.config.key, "mean": self.mean, "n": self.n, "call": self.call,
                "cs": list(self.cs) if self.cs else None, "p_adjusted": self.p_adjusted,
                "p_equivalence_adjusted": self.p_equivalence_adjusted, "hours": self.hours,
                "clearly_better": self.better, "clearly_worse": self.worse, "cost": self.cost,
                **(self.comparison.as_dict() if self.comparison else {"comparison": None})}


@dataclass(frozen=True)
class Verdict:
    """The answer and the statistics behind it; summary.json carries `as_dict()` under "verdict"."""

    kind: str  # winner | no_clear_winner | untested | cannot_rank | no_baseline | no_data | no_objective
    metric: str | None
    direction: str | None
    words: str
    recommended: Arm | None = None
    recommended_name: str | None = None
    reason: str | None = None  # learned_nothing | clearly_better | cheapest_not_worse | baseline_not_beaten | best_mean_untested | best_mean_no_baseline
    comparison: Comparison | None = None  # the recommended arm's (or, without a winner, the best arm's)
    arms: tuple[ArmVerdict, ...] = ()
    detectable: float | None = None
    detectable_relative: float | None = None
    seeds_for: tuple[float, int] | None = None  # (difference, seeds needed to detect it)
    cost_unit: str | None = None
    timing: TimingNoise | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    headline: str | None = None  # the opening of `words` the page sets in bold; None: all of it
    selection: Selection | None = None  # the recommendation's probability, the eps-best set, its cheapest
    names: dict[str, str] = field(default_factory=dict)  # arm name -> its configuration in words
    hours: dict[str, float] = field(default_factory=dict)  # arm name -> training hours per trial
    min_effect: float | None = None
    calls_method: str | None = None  # how the better/worse calls were made (named on the page)

    @property
    def detail(self) -> str:
        """The rest of `words`, after the headline: the numbers behind it."""
        return self.words[len(self.headline):].strip() if self.headline and self.words.startswith(self.headline) else ""

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "kind": self.kind,
            "words": self.words,
            "headline": self.headline or self.words,
            "metric": self.metric,
            "direction": self.direction,
            "recommended": ({"arm": self.recommended_name, "key": self.recommended.key, **self.recommended.as_dict()}
                            if self.recommended else None),
            "reason": self.reason,
            "comparison": c.kind if c else None,
            "delta": c.delta if c else None,
            "ci95": list(c.ci95) if c and c.ci95 else None,
            "p_value": c.p_value if c else None,
            "n": c.n if c else None,
            "alpha": ALPHA,
            "power": POWER,
            "detectable_difference": self.detectable,
            "detectable_relative": self.detectable_relative,
            "seeds_needed": ({"difference": self.seeds_for[0], "seeds": self.seeds_for[1]} if self.seeds_for else None),
            "cost_unit": self.cost_unit,
            "arms": [a.as_dict() for a in self.arms],
            "timing_noise": self.timing.as_dict() if self.timing else None,
            "notes": list(self.notes),
            "min_effect": self.min_effect,
            "calls_method": self.calls_method,
            "selection": self.selection_dict(),
        }

    def selection_dict(self) -> dict[str, Any] | None:
        """The answer a user acts on, as the console, the note and the page print it (`answer_words`)."""
        sel = self.selection
        if sel is None or sel.recommended is None:
            return None
        return {**sel.as_dict(), "recommended_words": self.names.get(sel.recommended, sel.recommended),
                "cheapest_words": self.names.get(sel.cheapest) if sel.cheapest else None,
                "cheapest_hours": self.hours.get(sel.cheapest) if sel.cheapest else None,
                "cost_unit": self.cost_unit, "words": answer_words(self)}


def _is_eval_metric(name: str) -> bool:
    return name.startswith("eval_") and name != "eval_seconds"


def verdict_metric(objectives: Sequence[tuple[str, str]], has_eval: bool) -> tuple[str, str] | None:
    """The metric the answer rests on, before the timing-noise check (see rule 1)."""
    if has_eval:
        for name, direction in objectives[:1]:
            if _is_eval_metric(name):
                return name, direction
        return "eval_final_reward", "maximize"
    return tuple(objectives[0]) if objectives else None  # type: ignore[return-value]


def arm_costs(records: Sequence[TrialRecord], tokens: Mapping[int, float]) -> tuple[dict[Arm, float], str]:
    """Mean cost per trial of each arm: generated tokens when every arm has them, else training seconds."""
    done = [r for r in records if r.outcome == Outcome.COMPLETED.value and r.config is not None]
    by_arm: dict[Arm, list[TrialRecord]] = {}
    for r in done:
        by_arm.setdefault(r.config, []).append(r)  # type: ignore[arg-type]

    def mean(xs: list[float | None]) -> float | None:
        ys = [x for x in xs if x is not None]
        return math.fsum(ys) / len(ys) if ys else None

    tok = {a: mean([tokens.get(r.number) for r in rs]) for a, rs in by_arm.items()}
    if tok and all(v for v in tok.values()):
        return {a: v for a, v in tok.items() if v is not None}, "generated tokens per trial"
    secs = {a: mean([finite(r.metrics.get("train_seconds")) for r in rs]) for a, rs in by_arm.items()}
    return {a: v for a, v in secs.items() if v is not None}, "training seconds per trial"


def arm_hours(records: Sequence[TrialRecord]) -> dict[Arm, float]:
    """Mean training hours per completed trial of each arm (device-hours: GPU-hours on a one-GPU trial)."""
    by_arm: dict[Arm, list[float]] = {}
    for r in records:
        secs = finite(r.metrics.get("train_seconds"))
        if r.outcome == Outcome.COMPLETED.value and r.config is not None and secs is not None:
            by_arm.setdefault(r.config, []).append(secs / 3600)
    return {a: math.fsum(v) / len(v) for a, v in by_arm.items()}


def _worse_text(verdicts: Sequence[ArmVerdict], bmean: float) -> str:
    """The configurations clearly worse than the baseline, each with the numbers that say so."""
    parts = []
    for v in verdicts:
        c = v.comparison
        if v.worse and c is not None:
            parts.append(f"{v.config.label} ({fmt(v.mean)} vs {fmt(bmean)}, {_signed(c.delta)}, 95% interval "
                         f"{fmt_interval(c.ci95)}, {fmt_p(c.p_value)}, {c.words})")
    return (" Clearly worse than the baseline: " + "; ".join(parts) + ".") if parts else ""


def arm_call(c: Comparison | None, base: Mapping[int, float], arm: Mapping[int, float], *, maximize: bool,
             min_effect: float, sequential: bool) -> tuple[str, tuple[float, float] | None]:
    """The one rule's call for an arm against the baseline, and the CS it rests on (sequential only).

    Fixed-sample (one look, one comparison alone: the per-point view): the comparison's 95% interval,
    equivalent when inside +-min_effect; the answer's own calls are a family (`stats.calls`, Holm).
    Sequential (the study raced): Lai's t confidence sequence over the paired differences in
    seed order, as the race's rounds read it.
    """
    if sequential:
        seeds = sorted(set(base) & set(arm))
        if not seeds:
            return UNDECIDED, None
        call = classify([arm[s] - base[s] for s in seeds], min_effect=min_effect, maximize=maximize)
        iv = call.interval
        return call.call, (iv.low, iv.high) if iv is not None else None
    if c is None or c.ci95 is None:
        return UNDECIDED, None
    lo, hi = c.ci95 if maximize else (-c.ci95[1], -c.ci95[0])
    if -min_effect <= lo and hi <= min_effect:
        return EQUIVALENT, None
    return (BETTER if lo > 0 else WORSE if hi < 0 else UNDECIDED), None


def calls_text(verdicts: Sequence["ArmVerdict"], min_effect: float, sequential: bool) -> str:
    """One sentence: every configuration's call against the baseline, in the rule's four words, with the
    Holm-adjusted p-values (fixed-sample calls) and the method named."""
    if not verdicts:
        return ""
    if sequential:
        how = ("anytime-valid 95% confidence sequences over the paired seeds, valid at every round the study "
               "looked; each comparison alone")
        return (f" Against the baseline ({how}; equivalent means within ±{fmt(min_effect)}): "
                + "; ".join(f"{v.config.label} {v.call}" for v in verdicts) + ".")
    return (f" Against the baseline (paired t tests over shared seeds, {HOLM}; equivalent: both one-sided tests of "
            f"a difference beyond ±{fmt(min_effect)} rejected, Holm-adjusted): "
            + "; ".join(f"{v.config.label} {v.call} (adjusted {fmt_p(v.p_adjusted)})" for v in verdicts) + ".")


def decide(arms: Sequence[ArmSummary], records: Sequence[TrialRecord], objectives: Sequence[tuple[str, str]],
           metrics: Mapping[str, Metric], has_eval: bool, tokens: Mapping[int, float] | None = None,
           success: Mapping[Arm, float] | None = None, advice: Mapping[str, Any] | None = None, *,
           min_effect: float | None = None, sequential: bool = False) -> Verdict:
    """The study's answer (see the module docstring).

    `min_effect`: study.min_effect (None: stats/min_effect.py's default for the metric);
    `sequential`: the study ran the anytime race (it looked after every round with no plan), so
    calls rest on the CS.

    `tokens` is each trial's generated tokens, `success` each arm's own success rate
    (report.groups.success_rates_by_arm), `advice` advise.json when advise ran: both only feed
    the words of a study that learned nothing.
    """
    chosen = verdict_metric(objectives, has_eval)
    if chosen is None:
        return Verdict("no_objective", None, None, "The study has no objectives: nothing to recommend.")
    name, direction = chosen
    notes: list[str] = []
    time_ref = name if name in TIME_TWINS else ("eval_gain_per_hour" if has_eval else "reward_per_hour")
    timing = timing_noise(records, arms, time_ref, has_eval)
    twin = TIME_TWINS.get(name)
    if timing is not None and timing.exceeds and twin and any(a.metrics.get(twin) and a.metrics[twin].mean is not None
                                                                for a in arms):
        notes.append(f"The study optimised {metric(name).label}, a time-based metric, but timing noise "
                     f"({timing.cv * 100:.0f}%) exceeds its differences between configurations; this answer rests on "
                     f"its token-based twin, {metric(twin).label}.")
        name, direction = twin, metric(twin).direction or "maximize"
    if has_eval and objectives and not _is_eval_metric(objectives[0][0]) and name != objectives[0][0]:
        notes.append(f"The study's objective is {metric(objectives[0][0]).label} (training reward, scored on each "
                     f"configuration's own samples); the answer rests on {metric(name).label}, scored on the same "
                     f"held-out prompts at the same decoding for every configuration.")
    m = metrics.get(name) or metric(name)
    label = m.label
    sign = 1.0 if direction == "maximize" else -1.0
    ran = [a for a in arms if a.metrics.get(name) is not None and a.metrics[name].mean is not None]
    if not ran:
        return Verdict("no_data", name, direction, f"No configuration completed yet (none has a {label}): nothing "
                       f"to recommend. Run (or resume) the study.", timing=timing, notes=tuple(notes))
    costs, cost_unit = arm_costs(records, tokens or {})
    hours = arm_hours(records)
    base = next((a for a in ran if a.is_baseline), None)
    maximize = direction == "maximize"
    if min_effect is None:
        reference = (base or max(ran, key=lambda a: sign * a.metrics[name].mean)).metrics[name].mean  # type: ignore[operator]
        min_effect = default_min_effect(m, reference) or 0.0
    by_seed = {a.name: a.by_seed.get(name, {}) for a in ran}
    names = {a.name: a.config.label for a in ran}
    arm_hours_by_name = {a.name: hours[a.config] for a in ran if a.config in hours}
    selection = select(by_seed, min_effect, maximize=maximize, alpha=ALPHA,
                       costs={a.name: costs[a.config] for a in ran if a.config in costs})
    family = holm_calls(by_seed, base.name, min_effect=min_effect, maximize=maximize, level=ALPHA) \
        if base is not None and not sequential else {}
    verdicts = []
    for a in ran if base is not None else ():
        if a.is_baseline:
            continue
        c = arm_vs_baseline(base, a, name)  # type: ignore[arg-type]
        fc = family.get(a.name)
        if sequential:
            call, cs = arm_call(c, base.by_seed.get(name, {}), a.by_seed.get(name, {}),  # type: ignore[union-attr]
                                maximize=maximize, min_effect=min_effect, sequential=True)
        else:
            call, cs = (fc.call if fc is not None else UNDECIDED), None
        verdicts.append(ArmVerdict(a.name, a.config, a.metrics[name].mean, a.metrics[name].n, c, call == BETTER,
                                   call == WORSE, costs.get(a.config), call, cs,
                                   fc.p_adjusted if fc is not None else None,
                                   fc.p_equivalence_adjusted if fc is not None else None, hours.get(a.config)))
    method = (("anytime-valid 95% confidence sequences over the paired seeds (the study ran the anytime race); "
               "each comparison alone") if sequential else HOLM)
    common = dict(arms=tuple(verdicts), cost_unit=cost_unit, timing=timing, notes=tuple(notes), selection=selection,
                  names=names, hours=arm_hours_by_name, min_effect=min_effect, calls_method=method)
    calls = calls_text(verdicts, min_effect, sequential)
    stuck = None if any(v.better or v.worse for v in verdicts) else learned_nothing(arms, has_eval, success or {}, advice)
    if stuck is not None:
        head, why = stuck
        return Verdict("cannot_rank", name, direction, f"{head} {why}", None, None, "learned_nothing",
                       headline=head, **{**common, "selection": None})  # type: ignore[arg-type]
    best = max(ran, key=lambda a: (sign * a.metrics[name].mean, a.metrics[name].n, a.is_baseline))  # type: ignore[operator]
    tail = _secondary(objectives, arms, best)
    if selection.pcs is None:  # a single seed somewhere: no spread, so no probability and no test
        top = next(a for a in ran if a.name == selection.recommended)
        versus = (f" vs {fmt(base.metrics[name].mean)} for the baseline, {base.config.label}"
                  if base is not None and top is not base else "")
        text = (f"Try {top.config.words}: it had the best {label} ({fmt(top.metrics[name].mean)}{versus}), "
                f"from a single seed per configuration, so no test was possible and nothing can be excluded from "
                f"being within {min_effect:.3g} of the best; add seeds (study.seeds) before switching for good.")
        if base is not None and top is base:
            text = (f"Keep the baseline ({base.config.words}): no other configuration had a better {label} "
                    f"({fmt(base.metrics[name].mean)}), but with a single seed nothing was tested and nothing can be "
                    f"excluded from being within {min_effect:.3g} of the best; add seeds (study.seeds) to measure how "
                    f"sure this is.")
        if base is None:
            text += " The baseline was not run, so there is no comparison to the default."
        tv = next((v for v in verdicts if v.name == top.name), None)
        return Verdict("untested", name, direction, text + tail, top.config, top.name,
                       "baseline_not_beaten" if top is base else "best_mean_untested",
                       tv.comparison if tv is not None else None, **common)  # type: ignore[arg-type]
    rec = next(a for a in ran if a.name == selection.recommended)
    head = answer_words(Verdict("", name, direction, "", rec.config, rec.name, names=names, hours=arm_hours_by_name, selection=selection,
                                min_effect=min_effect, cost_unit=cost_unit))
    if base is None:
        text = (f" It had the best {label}, {fmt(rec.metrics[name].mean)} ({_seeds(rec.metrics[name].n)}). The "
                f"baseline was not run, so there is no comparison to the default.")
        return Verdict("no_baseline", name, direction, head + text + tail, rec.config, rec.name, "most_likely_best",
                       headline=head, **common)  # type: ignore[arg-type]
    bmean = base.metrics[name].mean
    assert bmean is not None
    versus = f"the baseline ({base.config.label})"
    winners = [v for v in verdicts if v.better]
    rv = next((v for v in verdicts if v.name == rec.name), None)
    if rv is not None and rv.better and rv.comparison is not None:
        c = rv.comparison
        rel = f" ({abs(c.delta / bmean) * 100:.0f}% {'higher' if c.delta > 0 else 'lower'})" if bmean else ""
        text = (f" Against {versus}: {label} {fmt(rv.mean)} vs {fmt(bmean)}, a difference of {_signed(c.delta)}{rel}, "
                f"95% interval {fmt_interval(c.ci95)}, {fmt_p(c.p_value)} ({c.words})"
                + (f", Holm-adjusted p {_p(rv.p_adjusted)}" if rv.p_adjusted is not None else "")
                + ": more than the seed-to-seed spread explains.")
        return Verdict("winner", name, direction, head + text + _worse_text(verdicts, bmean) + calls + tail,
                       rec.config, rec.name, "clearly_better", c, headline=head, **common)  # type: ignore[arg-type]
    tested = [v for v in verdicts if v.comparison is not None and v.comparison.ci95 is not None]
    detail, mde, mde_rel, seeds_for, tc = "", None, None, None, None
    if tested:
        # no arm (or not the recommended one) clearly better than the baseline: what the study could have seen
        closest = max(tested, key=lambda v: sign * v.comparison.delta)  # type: ignore[union-attr]
        tc = closest.comparison
        assert tc is not None
        paired = [v.comparison for v in tested if v.comparison and v.comparison.kind == "paired" and v.comparison.sd is not None]
        pool = paired or [v.comparison for v in tested if v.comparison and v.comparison.sd is not None]
        sd = math.sqrt(math.fsum(c.sd**2 for c in pool) / len(pool)) if pool else None  # type: ignore[operator]
        n = min(c.n for c in pool) if pool else 0
        is_paired = bool(paired)
        mde = detectable_difference(sd, n, is_paired) if sd else None
        mde_rel = mde / abs(bmean) if mde is not None and bmean else None
        observed = abs(tc.delta)
        need = seeds_needed(observed, sd, is_paired) if sd and observed > 0 else None
        seeds_for = (observed, need) if need is not None else None
        if not winners:
            detail = (f" No configuration is clearly better than {versus} on {label} (not detected): the closest, "
                      f"{closest.config.label}, scored {fmt(closest.mean)} vs {fmt(bmean)} ({_signed(tc.delta)}, 95% interval "
                      f"{fmt_interval(tc.ci95)}, {fmt_p(tc.p_value)}, {tc.words}).")
        else:
            w = max(winners, key=lambda v: sign * (v.mean or 0.0))
            detail = (f" {w.config.label} is clearly better than {versus}, but {rec.config.label} is at least as likely "
                      f"to be within {fmt(min_effect)} of the best.")
        if mde is not None and not winners:
            rel = f"{mde_rel * 100:.0f}% of the baseline; " if mde_rel is not None else ""
            detail += (f" With {n} seeds this study could only detect a difference of about {fmt(mde)} "
                       f"({rel}80% power, 5% two-sided, from the observed {'paired' if is_paired else 'per-arm'} spread)")
            if need is not None and need > n:
                more = f"more than {need - 1:,}" if need > 1000 else f"about {need}"
                detail += f"; {more} seeds would be needed to detect a difference as small as the observed {fmt(observed)}."
            else:
                detail += "."
    reason = "baseline_most_likely_best" if rec is base else "most_likely_best"
    return Verdict("no_clear_winner", name, direction, head + detail + _worse_text(verdicts, bmean) + calls + tail,
                   rec.config, rec.name, reason, tc, detectable=mde, detectable_relative=mde_rel, seeds_for=seeds_for,
                   headline=head, **common)  # type: ignore[arg-type]


def answer_words(v: "Verdict") -> str:
    """The answer's lead, the same on the page, the console and the note: the recommended configuration,
    P(within min_effect of the best) and how it was computed, the eps-best set, and its cheapest."""
    sel = v.selection
    if sel is None or sel.recommended is None:
        return v.headline or v.words
    label = metric(v.metric).label if v.metric else "the objective"
    eps = f"{sel.min_effect:.3g}"
    rec = v.recommended.words if v.recommended is not None else v.names.get(sel.recommended, sel.recommended)
    out = f"Use {rec}."
    if sel.pcs is not None:
        counts = [n for a, n in sel.seeds.items() if a in sel.p_within]
        lo, hi = min(counts), max(counts)
        left = ("; left out, with a single seed: " + ", ".join(v.names.get(a, a) for a in sel.unmeasured)
                if sel.unmeasured else "")
        out += (f" Probability that it is within {eps} of the best {label}: {sel.pcs:.2f} ({HOW}; "
                f"{lo if lo == hi else f'{lo} to {hi}'} seeds per configuration{left}).")
    others = [a for a in sel.eps_best]
    if len(others) > 1:
        out += (f" Configurations that cannot be excluded from being within {eps} of the best (family-wise 5%): "
                + "; ".join(v.names.get(a, a) for a in others) + ".")
    elif others:
        out += f" Every other configuration is excluded from being within {eps} of the best (family-wise 5%)."
    if sel.cheapest is not None and len(others) > 1:
        hours = v.hours.get(sel.cheapest)
        cost = (f"{fmt(sel.costs.get(sel.cheapest))} {v.cost_unit or 'cost'}"
                + (f", {fmt(hours)} device-hours per trial" if hours is not None else ""))
        if len({sel.costs.get(a) for a in others}) == 1:
            out += f" They cost the same ({cost})."
        elif sel.cheapest == sel.recommended:
            out += f" It is also the cheapest of these ({cost})."
        else:
            out += f" The cheapest of these: {v.names.get(sel.cheapest, sel.cheapest)} ({cost})."
    return out


def _p(p: float | None) -> str:
    return fmt_p(p).removeprefix("p ").strip()


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + fmt(x)


def _seeds(n: int) -> str:
    return "1 seed" if n == 1 else f"{n} seeds"


def _secondary(objectives: Sequence[tuple[str, str]], arms: Sequence[ArmSummary], best: ArmSummary) -> str:
    """The other objectives' best arms, when they differ: the trade-off is on the Pareto plot."""
    out = ""
    for name, direction in objectives[1:]:
        sign = 1.0 if direction == "maximize" else -1.0
        cands = [a for a in arms if a.metrics.get(name) is not None and a.metrics[name].mean is not None]
        if not cands:
            continue
        o = max(cands, key=lambda a: (sign * a.metrics[name].mean, a.metrics[name].n, a.is_baseline))  # type: ignore[operator]
        if o.config != best.config:
            out += (f" For {metric(name).label} the best was {o.config.label} "
                    f"({fmt(o.metrics[name].mean)}): see the Pareto front.")
    return out


# ---------------------------------------------------------------- a study that learned nothing


def _moved(s: MetricStat) -> bool | None:
    """Whether a gain is distinguishable from zero: True / False, None when one seed cannot say."""
    if s.mean is None:
        return None
    if s.ci95 is not None:
        return not (s.ci95[0] <= 0 <= s.ci95[1])
    return None if s.mean != 0 else False


def learned_nothing(arms: Sequence[ArmSummary], has_eval: bool, success: Mapping[Arm, float],
                    advice: Mapping[str, Any] | None = None) -> tuple[str, str] | None:
    """(headline, why and what next) when no arm learned anything measurable (rule 0); else None.

    Also None when the gains pooled over every trial move: seed effects can hide one arm's gain
    and still leave a study-wide one. (decide asks only when no arm differs clearly from the baseline.)
    """
    ran = [a for a in arms if a.n > 0]
    if not ran:
        return None
    gain = "eval_gain" if has_eval else "reward_gain"
    gains = {a.config: a.metrics[gain] for a in ran if a.metrics.get(gain) is not None
             and a.metrics[gain].mean is not None}
    moved = {arm: _moved(s) for arm, s in gains.items()}
    pooled = stat(v for s in gains.values() for v in s.values)  # every trial's gain: did anything learn at all?
    if any(m is True for m in moved.values()) or (pooled.n > 1 and _moved(pooled)):
        return None
    flat = bool(gains) and len(gains) == len(ran) and all(m is False for m in moved.values())
    zero = {a.config: a.metrics["frac_reward_zero_std"].mean for a in ran if a.metrics.get("frac_reward_zero_std")
            is not None and a.metrics["frac_reward_zero_std"].mean is not None}
    no_spread = len(zero) == len(ran) and all(z >= NO_SPREAD_FRACTION for z in zero.values())  # type: ignore[operator]
    if not (flat or no_spread):
        return None
    what = "held-out reward" if has_eval else "training reward"
    head = (f"This study cannot rank G: no configuration's {what} changed measurably during training, so there is "
            f"no difference between configurations to measure." if flat else
            "This study cannot rank G: nearly all prompt groups had no reward spread in every configuration, so "
            "almost no prompt gave a gradient whatever G was.")
    parts = []
    if gains:
        parts.append(f"{metric(gain).label.capitalize()} per configuration: " + "; ".join(
            f"{a.title} {_signed(s.mean)}" + (f" (95% interval {fmt_interval(s.ci95)}, {_seeds(s.n)})"
                                                     if s.ci95 else f" ({_seeds(s.n)})")
            for a in ran if (s := gains.get(a.config)) is not None and s.mean is not None) + ".")
    if zero:
        parts.append("Groups with no reward spread: " + "; ".join(
            f"{a.title} {zero[a.config] * 100:.0f}%" + (f" (success rate {success[a.config]:.2f})"
                                                            if a.config in success else "")
            for a in ran if a.config in zero) + ".")
    rates = [success[a.config] for a in ran if a.config in success]
    if rates and max(rates) < 0.1:
        parts.append("The model almost never earned the reward.")
    elif rates and min(rates) > 0.9:
        parts.append("The model almost always earned the reward already: the task is too easy to teach anything.")
    if advice:
        never, always, n = advice.get("never_solved"), advice.get("always_solved"), advice.get("num_prompts")
        if isinstance(never, list) and isinstance(always, list) and isinstance(n, int) and n:
            parts.append(f"Before any trial, advise found {len(never)} of {n} prompts never solved and {len(always)} "
                         f"always solved in every sample.")
    shown = "the completions and rewards shown on this page" + (
        f" and in {ADVISE_COMPLETIONS}" if advice and advice.get("completions_file") else "")
    parts.append("What to do next: make the task learnable before choosing G: easier prompts (or a reward that gives "
                 "partial credit), a longer budget (budget.max_steps), or a stronger starting model. Check the reward "
                 f"function on {shown}: a reward that never fires looks exactly like this.")
    return head, " ".join(parts)
