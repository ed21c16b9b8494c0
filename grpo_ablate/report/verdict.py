"""The answer's statistics: which configuration to use, how sure the study is, and the numbers behind it.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
print('\\n'.join(collect(load_study('studies/tiny-cpu.yaml')).verdict.lines))"

`decide` returns a typed record (`Verdict`): what is recommended, the probability, the as-good set
and its cheapest, the worse ones, each arm's call with its interval and adjusted p-value, the
method that ran. Its sentences come from report/wording.py, which reads only the record, so the
statistics can change (stats/) without touching the words, and the words without the statistics.

The rules, in order:
1. The metric. With held-out evaluation, the study's first objective when it is an evaluation
   metric, else eval_final_reward: every arm is scored on the same prompts at the same decoding.
   Without it, the first objective. A time-based metric whose arms differ by less than the
   study's run-to-run timing noise is replaced by its token-based twin (`Verdict.replaced`).
2. The answer a user acts on leads (stats/selection.py): ONE configuration, the cheapest (GPU-hours
   per optimizer step on a GPU study, else generated tokens per trial) among those whose probability
   of being within study.min_effect of the best (default per metric: stats/min_effect.py) reaches the
   study's confidence (racing.confidence, 0.95); none reaching it, keep the baseline (the user's own
   recipe) and name the closest contender with its probability, unless the page excludes the baseline from
   being within min_effect of the best: then the most probable configuration. That probability is a model
   posterior and the page says so; beside it the design's frequentist guarantee (`Guarantee`: P(the
   best is picked) at the indifference zone, Bechhofer's for the design that ran, or an elimination
   race's bound). Then the configurations that cannot be excluded from being within min_effect of the
   best (simultaneous at the page's level).
3. Each arm against the baseline on that metric (report.arms.baseline_calls: the t tests of
   stats/model.py's one fit over every arm, paired over shared seeds, each contrast its own variance,
   no test below 3 seeds): better / worse when its adjusted p is below the level, equivalent when both
   one-sided tests of a difference beyond +-min_effect reject, undecided otherwise; every call and
   every coloured cell of the effects table in one family at the page's level (stats/calls.page_calls:
   the answer's calls with Shaffer's count, the table's other metrics beside them). A study that ran
   the anytime race looked after every round, so its calls rest on the anytime-valid confidence
   sequence instead; a group-sequential race ends at a last look at 5%, the fixed-sample rule.
   Without a clear difference the record carries the smallest difference the study could have
   detected (80% power, 5% two-sided) and the seeds it would take.
4. Fewer than three seeds anywhere: no probability and no test; the best mean is only something to try.
0. Before any of that: a study in which nothing learned cannot rank G ("cannot_rank", `Stuck`).
   That is when no arm's gain (held-out gain with evaluation, else the training reward gain) is
   distinguishable from zero, every arm having a gain that is exactly zero or whose 95% interval
   spans zero, or, failing a measured gain, when nearly all groups of every arm had no reward
   spread (NO_SPREAD_FRACTION). Ranking arms that all stood still would rank noise.

Warnings consult `Verdict.recommended` (report.findings), so the page gives one recommendation.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

from grpo_ablate.files.advise_file import NO_SPREAD_FRACTION
from grpo_ablate.report.arms import ArmSummary, baseline_calls, baseline_comparison, table_pvalues
from grpo_ablate.report.records import TrialRecord
from grpo_ablate.report.timing_noise import TIME_TWINS, TimingNoise, timing_noise
from grpo_ablate.report.verdict_record import ArmVerdict, Guarantee, Secondary, Stuck, Verdict
from grpo_ablate.report.wording import answer_lines, details, notes
from grpo_ablate.stats.calls import ArmCall
from grpo_ablate.stats.calls import method as calls_model
from grpo_ablate.stats.min_effect import default_min_effect
from grpo_ablate.stats.multiplicity import PAGE_METHOD
from grpo_ablate.stats.seeds import (ALPHA, MODEL_PAIRED, Comparison, MetricStat, detectable_difference,
                                     seeds_needed, stat)
from grpo_ablate.stats.selection import CONFIDENCE, select
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE, classify
from grpo_ablate.core.vocab import Arm, Metric, Outcome, finite, metric

__all__ = ["Verdict", "ArmVerdict", "Stuck", "Secondary", "Guarantee", "decide", "judge", "arm_call", "verdict_metric",
           "NO_SPREAD_FRACTION", "arm_costs", "arm_hours", "learned_nothing", "SEQUENTIAL_METHOD"]

SEQUENTIAL_METHOD = ("anytime-valid 95% confidence sequences over the paired seeds (the study ran the anytime race); "
                     "each comparison alone")


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


def arm_costs(records: Sequence[TrialRecord], tokens: Mapping[int, float],
              gpus: int | None = None) -> tuple[dict[Arm, float], str]:
    """Mean cost of each arm, what the single recommendation is cheapest by: GPU-hours per optimizer step on a GPU
    study (`gpus`: hardware.gpus; training seconds x GPUs over the trial's optimizer steps), else generated tokens
    per trial when every arm has them, else training seconds per trial."""
    done = [r for r in records if r.outcome == Outcome.COMPLETED.value and r.config is not None]
    by_arm: dict[Arm, list[TrialRecord]] = {}
    for r in done:
        by_arm.setdefault(r.config, []).append(r)  # type: ignore[arg-type]

    def mean(xs: list[float | None]) -> float | None:
        ys = [x for x in xs if x is not None]
        return math.fsum(ys) / len(ys) if ys else None

    if gpus:
        def per_step(r: TrialRecord) -> float | None:
            secs, steps = finite(r.metrics.get("train_seconds")), finite(r.metrics.get("steps"))
            return secs * gpus / 3600 / steps if secs is not None and steps else None

        step = {a: mean([per_step(r) for r in rs]) for a, rs in by_arm.items()}
        if step and all(v for v in step.values()):
            return {a: v for a, v in step.items() if v is not None}, "GPU-hours per optimizer step"
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


def decide(arms: Sequence[ArmSummary], records: Sequence[TrialRecord], objectives: Sequence[tuple[str, str]],
           metrics: Mapping[str, Metric], has_eval: bool, tokens: Mapping[int, float] | None = None,
           success: Mapping[Arm, float] | None = None, advice: Mapping[str, Any] | None = None, *,
           min_effect: float | None = None, sequential: bool = False, branched_at: int | None = None,
           level: float = ALPHA, confidence: float = CONFIDENCE, gpus: int | None = None,
           race: Guarantee | None = None, reward_range: tuple[float, float] | None = None) -> Verdict:
    """The study's answer: `judge`'s record with its words (report/wording.py) filled in. `branched_at`: the step
    the arms branched at (budget.branch_from), which the words say the answer is about G from; `level`: the
    family-wise level of the calls (a race that stopped early: its last look's, race_record.calls_level);
    `confidence`, `gpus`, `race`: see `judge`."""
    v = judge(arms, records, objectives, metrics, has_eval, tokens, success, advice, min_effect=min_effect,
              sequential=sequential, level=level, confidence=confidence, gpus=gpus, race=race,
              reward_range=reward_range)
    v = dataclasses.replace(v, branched_at=branched_at)
    return dataclasses.replace(v, lines=answer_lines(v), details=details(v), notes=notes(v))


def _choose_metric(objectives: Sequence[tuple[str, str]], records: Sequence[TrialRecord], arms: Sequence[ArmSummary],
                   has_eval: bool) -> tuple[str, str, TimingNoise | None, str | None, str | None] | None:
    """Rule 1: (metric, direction, timing noise, the replaced time-based objective, the study's other objective)."""
    chosen = verdict_metric(objectives, has_eval)
    if chosen is None:
        return None
    name, direction = chosen
    time_ref = name if name in TIME_TWINS else ("eval_gain_per_hour" if has_eval else "reward_per_hour")
    timing = timing_noise(records, arms, time_ref, has_eval)
    twin = TIME_TWINS.get(name)
    replaced = None
    if timing is not None and timing.exceeds and twin and any(a.metrics.get(twin) and a.metrics[twin].mean is not None
                                                                for a in arms):
        replaced, name, direction = name, twin, metric(twin).direction or "maximize"
    other = (objectives[0][0] if has_eval and objectives and not _is_eval_metric(objectives[0][0])
             and name != objectives[0][0] else None)
    return name, direction, timing, replaced, other


def _arm_verdicts(ran: Sequence[ArmSummary], base: ArmSummary, name: str, model: Mapping[str, ArmCall], *,
                  maximize: bool, min_effect: float, sequential: bool, costs: Mapping[Arm, float],
                  hours: Mapping[Arm, float]) -> list[ArmVerdict]:
    """Rule 3: every other arm's call against the baseline (`model`: the page family's calls on the answer's metric)."""
    family = {} if sequential else model
    out = []
    for a in ran:
        if a.is_baseline:
            continue
        c = baseline_comparison(model.get(a.name), base, a, name)  # the interval and p of the model the call read
        fc = family.get(a.name)
        if sequential:
            call, cs = arm_call(c, base.by_seed.get(name, {}), a.by_seed.get(name, {}), maximize=maximize,
                                min_effect=min_effect, sequential=True)
        else:
            call, cs = (fc.call if fc is not None else UNDECIDED), None
        out.append(ArmVerdict(a.name, a.config, a.metrics[name].mean, a.metrics[name].n, c, call == BETTER,
                              call == WORSE, costs.get(a.config), call, cs,
                              fc.p_adjusted if fc is not None else None,
                              fc.p_equivalence_adjusted if fc is not None else None, hours.get(a.config)))
    return out


def _power(verdicts: Sequence[ArmVerdict], bmean: float, sign: float) -> dict[str, Any]:
    """Without a winner: the closest arm, the smallest difference the study could detect, the seeds it would take."""
    tested = [v for v in verdicts if v.comparison is not None and v.comparison.ci95 is not None]
    if not tested:
        return {}
    closest = max(tested, key=lambda v: sign * v.comparison.delta)  # type: ignore[union-attr]
    tc = closest.comparison
    assert tc is not None
    paired = [v.comparison for v in tested
              if v.comparison and v.comparison.kind in ("paired", MODEL_PAIRED) and v.comparison.sd is not None]
    pool = paired or [v.comparison for v in tested if v.comparison and v.comparison.sd is not None]
    sd = math.sqrt(math.fsum(c.sd**2 for c in pool) / len(pool)) if pool else None  # type: ignore[operator]
    n = min(c.n for c in pool) if pool else 0
    mde = detectable_difference(sd, n, bool(paired)) if sd else None
    observed = abs(tc.delta)
    need = seeds_needed(observed, sd, bool(paired)) if sd and observed > 0 else None
    return dict(closest=closest.name, comparison=tc, detectable=mde,
                detectable_relative=mde / abs(bmean) if mde is not None and bmean else None,
                seeds_for=(observed, need) if need is not None else None, detect_n=n, detect_paired=bool(paired))


def judge(arms: Sequence[ArmSummary], records: Sequence[TrialRecord], objectives: Sequence[tuple[str, str]],
          metrics: Mapping[str, Metric], has_eval: bool, tokens: Mapping[int, float] | None = None,
          success: Mapping[Arm, float] | None = None, advice: Mapping[str, Any] | None = None, *,
          min_effect: float | None = None, sequential: bool = False, level: float = ALPHA,
          confidence: float = CONFIDENCE, gpus: int | None = None, race: Guarantee | None = None,
          reward_range: tuple[float, float] | None = None) -> Verdict:
    """The study's answer as a record without words (see the module docstring).

    `confidence`: the probability a configuration must reach to be recommended (study.racing.confidence);
    `gpus`: hardware.gpus (the recommendation is then the cheapest in GPU-hours per optimizer step); `race`: the
    guarantee of an elimination race that stopped (its confidence, a bound), which replaces the fixed design's;
    `reward_range`: the range a reward metric's values can take when the study's rewards declare one (the built-in
    tasks: [0, 1]), which its intervals keep inside.

    `level`: the family-wise level of the calls and the eps-best set's exclusions, ALPHA unless a
    group-sequential race stopped early (race_record.calls_level: the level its last look spent).

    `min_effect`: study.min_effect (None: stats/min_effect.py's default for the metric);
    `sequential`: the study ran the anytime race (it looked after every round with no plan), so
    calls rest on the CS.

    `tokens` is each trial's generated tokens, `success` each arm's own success rate
    (report.groups.success_rates_by_arm), `advice` advise.json when advise ran: both only feed
    the evidence of a study that learned nothing.
    """
    chosen = _choose_metric(objectives, records, arms, has_eval)
    if chosen is None:
        return Verdict("no_objective", None, None)
    name, direction, timing, replaced, other = chosen
    m = metrics.get(name) or metric(name)
    sign = 1.0 if direction == "maximize" else -1.0
    ran = [a for a in arms if a.metrics.get(name) is not None and a.metrics[name].mean is not None]
    if not ran:
        return Verdict("no_data", name, direction, timing=timing, replaced=replaced, objective=other)
    costs, cost_unit = arm_costs(records, tokens or {}, gpus)
    hours = arm_hours(records)
    base = next((a for a in ran if a.is_baseline), None)
    maximize = direction == "maximize"
    if min_effect is None:
        reference = (base or max(ran, key=lambda a: sign * a.metrics[name].mean)).metrics[name].mean  # type: ignore[operator]
        min_effect = default_min_effect(m, reference) or 0.0
    values = {a.name: a.by_seed.get(name, {}) for a in ran}
    selection = select(values, min_effect, maximize=maximize, alpha=level, confidence=confidence,
                       costs={a.name: costs[a.config] for a in ran if a.config in costs},
                       reference=base.name if base else None, chosen=race.kept if race is not None else ())
    # one family for every call and colour on the page: the answer's calls and the effects table's other metrics
    table_raw = table_pvalues(arms, metrics, exclude=name) if base is not None and not sequential else {}
    model, table_adj = baseline_calls(ran, name, maximize=maximize, min_effect=min_effect, level=level,
                                      others=list(table_raw.values()))
    table_p: dict[str, dict[str, float | None]] = {}
    for (arm_name, metric_name), p in zip(table_raw, table_adj):
        table_p.setdefault(arm_name, {})[metric_name] = p
    verdicts = [] if base is None else _arm_verdicts(ran, base, name, model, maximize=maximize, min_effect=min_effect,
                                                    sequential=sequential, costs=costs, hours=hours)
    guarantee = race
    if guarantee is None and selection.design_pcs is not None:
        measured = [a for a in ran if a.name in selection.p_within]
        guarantee = Guarantee(selection.design_pcs, "fixed", len(measured),
                              min(len(a.by_seed.get(name, {})) for a in measured))
    common: dict[str, Any] = dict(
        arms=tuple(verdicts), cost_unit=cost_unit, timing=timing, selection=selection,
        names={a.name: a.config.label for a in ran}, hours={a.name: hours[a.config] for a in ran if a.config in hours},
        min_effect=min_effect, sequential=sequential,
        calls_method=SEQUENTIAL_METHOD if sequential else f"{calls_model(values)}; {PAGE_METHOD}"
        + (f" (held at {level:.2g}, the level the group-sequential race had spent at the look where it stopped early)"
           if level < ALPHA else ""),
        baseline_name=base.name if base else None, baseline=base.config if base else None,
        baseline_mean=base.metrics[name].mean if base else None, replaced=replaced, objective=other,
        metric_low=m.low if m.low is not None else (reward_range[0] if reward_range else None),
        metric_high=m.high if m.high is not None else (reward_range[1] if reward_range else None),
        confidence=confidence, guarantee=guarantee, level=level, table_p=table_p)
    stuck = None if any(v.better or v.worse for v in verdicts) else learned_nothing(arms, has_eval, success or {}, advice)
    if stuck is not None:
        return Verdict("cannot_rank", name, direction, reason="learned_nothing", stuck=stuck,
                       **{**common, "selection": None})
    best = max(ran, key=lambda a: (sign * a.metrics[name].mean, a.metrics[name].n, a.is_baseline))  # type: ignore[operator]
    common["secondary"] = _secondary(objectives, arms, best)
    rec = next(a for a in ran if a.name == selection.recommended)
    common["recommended_stat"] = rec.metrics[name]
    rv = next((v for v in verdicts if v.name == rec.name), None)
    if selection.pcs is None:  # fewer than 3 seeds somewhere: no spread to test, so no probability and no test
        return Verdict("untested", name, direction, rec.config, rec.name,
                       "baseline_not_beaten" if rec is base else "best_mean_untested",
                       rv.comparison if rv is not None else None, **common)
    reason = ("race_kept" if race is not None and rec.name in race.kept else "baseline_kept" if selection.kept else
              "baseline_excluded" if selection.reference_excluded else
              "baseline_cheapest_confident" if rec is base else "cheapest_confident")
    if base is None:
        return Verdict("no_baseline", name, direction, rec.config, rec.name,
                       "most_likely_best" if not selection.confident else reason, **common)
    if rv is not None and rv.better and rv.comparison is not None:
        return Verdict("winner", name, direction, rec.config, rec.name, reason, rv.comparison, **common)
    power = _power(verdicts, base.metrics[name].mean or 0.0, sign)
    return Verdict("no_clear_winner", name, direction, rec.config, rec.name, reason, **power, **common)


def _secondary(objectives: Sequence[tuple[str, str]], arms: Sequence[ArmSummary], best: ArmSummary) -> tuple[Secondary, ...]:
    """The other objectives' best arms, when they differ: the trade-off is on the Pareto plot."""
    out = []
    for name, direction in objectives[1:]:
        sign = 1.0 if direction == "maximize" else -1.0
        cands = [a for a in arms if a.metrics.get(name) is not None and a.metrics[name].mean is not None]
        if not cands:
            continue
        o = max(cands, key=lambda a: (sign * a.metrics[name].mean, a.metrics[name].n, a.is_baseline))  # type: ignore[operator]
        if o.config != best.config:
            out.append(Secondary(name, o.config.label, o.metrics[name].mean))  # type: ignore[arg-type]
    return tuple(out)


# ---------------------------------------------------------------- a study that learned nothing


def _moved(s: MetricStat) -> bool | None:
    """Whether a gain is distinguishable from zero: True / False, None when one seed cannot say."""
    if s.mean is None:
        return None
    if s.ci95 is not None:
        return not (s.ci95[0] <= 0 <= s.ci95[1])
    return None if s.mean != 0 else False


def learned_nothing(arms: Sequence[ArmSummary], has_eval: bool, success: Mapping[Arm, float],
                    advice: Mapping[str, Any] | None = None) -> Stuck | None:
    """Rule 0's evidence when no arm learned anything measurable; else None.

    Also None when the gains pooled over every trial move: seed effects can hide one arm's gain
    and still leave a study-wide one. (judge asks only when no arm differs clearly from the baseline.)
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
    never, always, n = (advice or {}).get("never_solved"), (advice or {}).get("always_solved"), (advice or {}).get("num_prompts")
    counts = isinstance(never, list) and isinstance(always, list) and isinstance(n, int) and n
    return Stuck(
        flat=flat, has_eval=has_eval, gain_metric=gain,
        gains=tuple((a.title, s) for a in ran if (s := gains.get(a.config)) is not None and s.mean is not None),
        zero_spread=tuple((a.title, zero[a.config], success.get(a.config)) for a in ran if a.config in zero),  # type: ignore[misc]
        success_rates=tuple(success[a.config] for a in ran if a.config in success),
        never_solved=len(never) if counts else None, always_solved=len(always) if counts else None,  # type: ignore[arg-type]
        num_prompts=n if counts else None, advise_completions=bool(advice and advice.get("completions_file")))
