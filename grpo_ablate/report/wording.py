"""The answer in words, from the record `report.verdict.judge` returns, and nothing else.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
v = collect(load_study('studies/tiny-cpu.yaml')).verdict; print('\\n'.join(v.lines)); print(*v.details, sep='\\n')"

Three lines lead wherever the answer is printed first (the end of `run` and `report`, the top of
report.html, the dashboard's note):
1. what to use and how sure (the probability of being within min_effect of the best);
2. which others are as good (cannot be excluded from that) and the cheapest of them;
3. what is worse.
The details follow, each said once: the metric, the recommended arm's mean and interval, the
comparison with the baseline, what the study could detect, the probability's method, each arm's
call with its adjusted p-value and the method, the other objectives. No statistics are computed
here: a sentence that needs a number reads it from the record.
"""

from __future__ import annotations

from grpo_ablate.files.advise_file import ADVISE_COMPLETIONS
from grpo_ablate.report.text import fmt, fmt_interval, fmt_p
from grpo_ablate.report.verdict_record import Stuck, Verdict
from grpo_ablate.stats.selection import HOW
from grpo_ablate.stats.seeds import MetricStat
from grpo_ablate.core.vocab import metric

__all__ = ["answer_lines", "details", "notes", "bounded_interval", "guarantee_words", "LINES"]

LINES = 3  # the answer's lead: what to use, what is as good, what is worse


def _label(v: Verdict) -> str:
    return metric(v.metric).label if v.metric else "the objective"


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + fmt(x)


def _seeds(n: int) -> str:
    return "1 seed" if n == 1 else f"{n} seeds"


def _eps(v: Verdict) -> str:
    return f"{(v.min_effect or 0.0):.3g}"


def _name(v: Verdict, arm: str) -> str:
    return v.names.get(arm, arm)


def bounded_interval(ci: tuple[float, float] | None, low: float | None, high: float | None,
                     values: tuple[float, ...] = ()) -> str:
    """'0.91 to 1' for an arm's 95% interval, cut to the metric's declared range; where no range is
    declared and the interval passes [0, 1] while every value lies inside it (a reward that looks
    bounded), the words say why it was not cut rather than let a reader take 1.02 for a result."""
    if ci is None:
        return fmt_interval(ci, signed=False)
    lo, hi = ci
    if low is not None:
        lo = max(lo, low)
    if high is not None:
        hi = min(hi, high)
    text = fmt_interval((lo, hi), signed=False)
    if low is None and high is None and values and all(0.0 <= x <= 1.0 for x in values) and (lo < 0.0 or hi > 1.0):
        text += " (not cut to [0, 1]: the reward functions declare no range)"
    return text


def answer_lines(v: Verdict) -> tuple[str, ...]:
    """The answer's three lines (one for a study with nothing to rank yet)."""
    if v.kind == "no_objective":
        return ("The study has no objectives: nothing to recommend.",)
    if v.kind == "no_data":
        return (f"No configuration completed yet (none has a {_label(v)}): nothing to recommend. Run (or resume) "
                f"the study.",)
    if v.kind == "cannot_rank" and v.stuck is not None:
        return _stuck_lines(v.stuck)
    if v.kind == "untested":
        return _untested_lines(v)
    return (_use_line(v), _as_good_line(v), _worse_line(v))


def _seed_counts(v: Verdict) -> str:
    sel = v.selection
    assert sel is not None
    counts = [n for a, n in sel.seeds.items() if a in sel.p_within]
    return (f"{min(counts)} to {max(counts)}" if counts and min(counts) != max(counts)
            else str(counts[0]) if counts else "?")


def _left_out(v: Verdict) -> str:
    """The caveat for arms the probability could not include (fewer than 3 seeds)."""
    sel = v.selection
    assert sel is not None
    if not sel.unmeasured:
        return ""
    return ("; left out of it, with fewer than 3 seeds (nothing tested): "
            + ", ".join(f"{_name(v, a)} ({_seeds(sel.seeds[a])})" for a in sel.unmeasured))


def _p(p: float, threshold: float) -> str:
    """A probability to two places, or three where two would round it onto the threshold it is compared with."""
    text = f"{p:.2f}"
    return f"{p:.3f}" if text == f"{threshold:.2f}" and p != threshold else text


def _use_line(v: Verdict) -> str:
    sel = v.selection
    assert sel is not None and v.recommended is not None
    conf = f"{sel.confidence:.2f}"
    if sel.kept:
        c = sel.contender
        closest = (f"; the closest, {_name(v, c)}, has probability {_p(sel.p_within[c], sel.confidence)}"
                   if c is not None else "")
        return (f"Keep the baseline, {v.recommended.words}: no configuration reaches probability {conf} of being "
                f"within {_eps(v)} of the best {_label(v)} (a model posterior, not a frequency; {_seed_counts(v)} "
                f"seeds per configuration){closest}{_left_out(v)}.")
    if sel.reference_excluded is not None:
        ref = sel.reference_excluded
        return (f"Use {v.recommended.words}: the baseline, {_name(v, ref)}, is excluded from being within {_eps(v)} "
                f"of the best {_label(v)} ({_name(v, sel.excluded[ref])} leads it by more than {_eps(v)}, simultaneous "
                f"{1 - sel.alpha:.0%}), so it is not kept; no configuration reaches probability {conf} of being within "
                f"{_eps(v)} of the best, and this one is the most likely, probability "
                f"{_p(sel.probability or 0.0, sel.confidence)} (a model posterior, not a frequency; {_seed_counts(v)} "
                f"seeds per configuration){_left_out(v)}.")
    keep = v.recommended == v.baseline
    what = f"Keep the baseline, {v.recommended.words}" if keep else f"Use {v.recommended.words}"
    g = v.guarantee
    if v.reason == "race_kept" and g is not None:
        which = (f" (the cheapest of the {len(g.kept)} it found each within {_eps(v)} of every other)"
                 if len(g.kept) > 1 else "")
        model = f"; model probability {sel.probability:.2f}" if sel.probability is not None else ""
        return (f"{what}: the elimination race kept it{which}; the race picks the best configuration with probability "
                f"at least {g.probability:.2f} whenever it leads every other by {_eps(v)} or more (the design's "
                f"guarantee, a frequency){model} ({_seed_counts(v)} seeds per configuration){_left_out(v)}.")
    many = len(sel.confident)
    cheapest = (f"; the cheapest of the {many} configurations that reach {conf}" if many > 1 and sel.costs else
                f"; {many} configurations reach {conf}" if many > 1 else "")
    clearly = "; it is clearly better than the baseline" if v.kind == "winner" else ""
    return (f"{what}: probability {sel.probability:.2f} that it is within {_eps(v)} of the best {_label(v)} "
            f"(a model posterior, not a frequency; {_seed_counts(v)} seeds per configuration){cheapest}{clearly}"
            f"{_left_out(v)}.")


def _cost(v: Verdict, arm: str) -> str:
    sel = v.selection
    assert sel is not None
    hours = v.hours.get(arm)
    per = f"branch (from step {v.branched_at} on, the shared prefix not in it)" if v.branched_at else "trial"
    return (f"{fmt(sel.costs.get(arm))} {v.cost_unit or 'cost'}"
            + (f", {fmt(hours)} device-hours per {per}" if hours is not None and v.cost_unit != "GPU-hours per "
               "optimizer step" else ""))


def _as_good_line(v: Verdict) -> str:
    sel = v.selection
    assert sel is not None and v.recommended_name is not None
    rec = v.recommended_name
    others = [a for a in sel.eps_best if a != rec]
    level = f"simultaneous {1 - sel.alpha:.0%}"
    if not others:
        return (f"No other configuration is as good: each is excluded from being within {_eps(v)} of the best "
                f"({level}).")
    line = (f"As good (not excluded from being within {_eps(v)} of the best, {level}): "
            + "; ".join(_name(v, a) for a in others))
    group = [rec, *others]
    if not sel.costs or sel.costs.get(rec) is None:
        return line + "."
    if len({sel.costs.get(a) for a in group}) == 1:
        return line + f". They cost the same ({_cost(v, rec)})."
    mine = sel.costs[rec]
    cheaper = [a for a in others if sel.costs.get(a) is not None and sel.costs[a] < mine]
    if not cheaper:
        return line + f". The recommended one is also the cheapest of these ({_cost(v, rec)})."
    return line + (f". Cheaper, but not within {_eps(v)} of the best with probability {sel.confidence:.2f}: "
                   + "; ".join(f"{_name(v, a)} ({_cost(v, a)}; probability "
                               + (f"{_p(sel.p_within[a], sel.confidence)})" if a in sel.p_within else "not measured)")
                               for a in cheaper) + f"; the recommended one costs {_cost(v, rec)}.")


def _worse_line(v: Verdict) -> str:
    worse = v.worse
    if not worse:
        if v.baseline is None:
            return "Nothing is shown worse: no configuration is excluded from being within " \
                   f"{_eps(v)} of the best."
        return (f"Nothing is shown worse: no configuration is excluded from being within {_eps(v)} of the best "
                f"or clearly worse than the baseline.")
    by_name = {a.name: a for a in v.arms}
    parts = []
    for a in worse:
        av = by_name.get(a)
        c = av.comparison if av is not None else None
        vs = (f"{_signed(c.delta)} vs the baseline" + (", clearly worse" if av is not None and av.worse else "")
              if c is not None else "the baseline" if a == v.baseline_name else None)
        parts.append(_name(v, a) + (f" ({vs})" if vs else ""))
    return f"Worse ({_label(v)}): " + "; ".join(parts) + "."


def _untested_lines(v: Verdict) -> tuple[str, ...]:
    s = v.recommended_stat
    mean = fmt(s.mean if s is not None else None)
    assert v.recommended is not None
    sel = v.selection
    counts = sorted(set(sel.seeds.values())) if sel is not None and sel.seeds else []
    few = (f"{_seeds(counts[0])} per configuration" if len(counts) == 1 else
           f"{counts[0]} to {_seeds(counts[-1])} per configuration" if counts else "too few seeds")
    why = f"from {few}, fewer than the 3 a test needs,"
    if v.reason == "baseline_not_beaten":
        first = (f"Keep the baseline ({v.recommended.words}): no other configuration had a better {_label(v)} "
                 f"({mean}), but {why} nothing was tested, so how sure cannot be measured.")
    else:
        versus = (f" vs {fmt(v.baseline_mean)} for the baseline" if v.baseline is not None else "")
        first = (f"Try {v.recommended.words}: it had the best {_label(v)} ({mean}{versus}), {why} so no test was "
                 f"possible and how sure cannot be measured.")
    return (first, f"Every configuration may be as good: with fewer than 3 seeds nothing can be excluded from being "
                   f"within {_eps(v)} of the best.",
            "Nothing is shown worse; add seeds (study.seeds) before switching for good.")


def _stuck_lines(s: Stuck) -> tuple[str, ...]:
    what = "held-out reward" if s.has_eval else "training reward"
    head = (f"This study cannot rank G: no configuration's {what} changed measurably during training, so there is "
            f"no difference between configurations to measure." if s.flat else
            "This study cannot rank G: nearly all prompt groups had no reward spread in every configuration, so "
            "almost no prompt gave a gradient whatever G was.")
    return (head, "No configuration can be called as good as or worse than another.",
            "What to do next: make the task learnable before choosing G: easier prompts (or a reward that gives "
            "partial credit), a longer budget (budget.max_steps), or a stronger starting model.")


def _stuck_details(s: Stuck) -> list[str]:
    out = []
    if s.gains:
        out.append(f"{metric(s.gain_metric).label.capitalize()} per configuration: " + "; ".join(
            f"{title} {_signed(g.mean)}" + (f" (95% interval {fmt_interval(g.ci95)}, {_seeds(g.n)})"  # type: ignore[arg-type]
                                            if g.ci95 else f" ({_seeds(g.n)})")
            for title, g in s.gains) + ".")
    if s.zero_spread:
        out.append("Groups with no reward spread: " + "; ".join(
            f"{title} {share * 100:.0f}%" + (f" (success rate {rate:.2f})" if rate is not None else "")
            for title, share, rate in s.zero_spread) + ".")
    if s.success_rates and max(s.success_rates) < 0.1:
        out.append("The model almost never earned the reward.")
    elif s.success_rates and min(s.success_rates) > 0.9:
        out.append("The model almost always earned the reward already: the task is too easy to teach anything.")
    if s.num_prompts:
        out.append(f"Before any trial, advise found {s.never_solved} of {s.num_prompts} prompts never solved and "
                   f"{s.always_solved} always solved in every sample.")
    shown = "the completions and rewards shown on the report" + (
        f" and in {ADVISE_COMPLETIONS}" if s.advise_completions else "")
    out.append(f"Check the reward function on {shown}: a reward that never fires looks exactly like this.")
    return out


def details(v: Verdict) -> tuple[str, ...]:
    """The numbers behind the three lines, each said once."""
    if v.kind in ("no_objective", "no_data") or v.metric is None:
        return notes(v)
    if v.kind == "cannot_rank" and v.stuck is not None:
        return tuple(_stuck_details(v.stuck)) + notes(v)
    out = [f"Judged on {_label(v)}" + (" (held-out prompts, the same decoding for every configuration)"
                                        if v.metric.startswith("eval_") else "") + "."]
    out += notes(v)
    out += _mean(v)
    out += _against_baseline(v)
    out += _probability(v)
    out += _calls(v)
    out += [f"For {metric(s.metric).label} the best was {s.arm} ({fmt(s.mean)}): see the Pareto front."
            for s in v.secondary]
    return tuple(out)


def notes(v: Verdict) -> tuple[str, ...]:
    """Where the arms started, when they branched from a shared prefix; why the answer rests on another metric
    than the study's objective (timing noise; held-out evaluation)."""
    out = []
    if v.branched_at:
        out.append(f"The arms branched at step {v.branched_at}: per seed the baseline trained once to step "
                   f"{v.branched_at} (a shared prefix, its compute counted once, in no arm's), and every arm went on "
                   f"from that checkpoint with its own settings, so this answer is about G from step {v.branched_at} on, "
                   f"not about the first {v.branched_at} steps.")
    if v.replaced and v.metric and v.timing is not None:
        out.append(f"The study optimised {metric(v.replaced).label}, a time-based metric, but timing noise "
                   f"({v.timing.cv * 100:.0f}%) exceeds its differences between configurations; this answer rests "
                   f"on its token-based twin, {metric(v.metric).label}.")
    if v.objective and v.metric:
        out.append(f"The study's objective is {metric(v.objective).label} (training reward, scored on each "
                   f"configuration's own samples); the answer rests on {metric(v.metric).label}, scored on the same "
                   f"held-out prompts at the same decoding for every configuration.")
    return tuple(out)


def _mean(v: Verdict) -> list[str]:
    s: MetricStat | None = v.recommended_stat
    if s is None or s.mean is None or v.recommended_name is None:
        return []
    how = (f" (the betting interval for a mean in [{fmt(v.metric_low)}, {fmt(v.metric_high)}]: it assumes only the "
           f"bounds, so it is wide with few seeds)" if s.bounded else "")
    spread = (f", 95% interval {bounded_interval(s.ci95, v.metric_low, v.metric_high, s.values)}{how}"
              if s.ci95 is not None else "")
    return [f"{_name(v, v.recommended_name)}: {_label(v)} {fmt(s.mean)} over {_seeds(s.n)}{spread}."]


def _against_baseline(v: Verdict) -> list[str]:
    label, base = _label(v), v.baseline
    if base is None:
        return ["The baseline was not run, so there is no comparison to the default."]
    versus = f"the baseline ({base.label})"
    bmean = v.baseline_mean
    c = v.comparison
    rv = next((a for a in v.arms if a.name == v.recommended_name), None)
    if v.kind == "winner" and c is not None and rv is not None:
        rel = f" ({abs(c.delta / bmean) * 100:.0f}% {'higher' if c.delta > 0 else 'lower'})" if bmean else ""
        return [f"Against {versus}: {label} {fmt(rv.mean)} vs {fmt(bmean)}, a difference of {_signed(c.delta)}{rel}, "
                f"95% interval {fmt_interval(c.ci95)}, {fmt_p(c.p_value)} ({c.words})"
                + (f", adjusted {fmt_p(rv.p_adjusted)}" if rv.p_adjusted is not None else "")
                + ": more than the seed-to-seed spread explains."]
    if v.kind != "no_clear_winner":
        return []
    winners = [a for a in v.arms if a.better]
    if winners:
        sign = 1.0 if v.direction == "maximize" else -1.0
        w = max(winners, key=lambda a: sign * (a.mean or 0.0))
        return [f"{w.config.label} is clearly better than {versus}, but {_name(v, v.recommended_name or '')} is at "
                f"least as likely to be within {_eps(v)} of the best."]
    out = []
    closest = next((a for a in v.arms if a.name == v.closest), None)
    if closest is not None and c is not None:
        out.append(f"No configuration is clearly better than {versus} on {label} (not detected): the closest, "
                   f"{closest.config.label}, scored {fmt(closest.mean)} vs {fmt(bmean)} ({_signed(c.delta)}, 95% "
                   f"interval {fmt_interval(c.ci95)}, {fmt_p(c.p_value)}, {c.words}).")
    if v.detectable is not None:
        rel = f"{v.detectable_relative * 100:.0f}% of the baseline; " if v.detectable_relative is not None else ""
        n = v.detect_n or 0
        text = (f"With {n} seeds this study could only detect a difference of about {fmt(v.detectable)} ({rel}80% "
                f"power, 5% two-sided, from the observed {'paired' if v.detect_paired else 'per-arm'} spread)")
        if v.seeds_for is not None and v.seeds_for[1] > n:
            d, need = v.seeds_for
            more = f"more than {need - 1:,}" if need > 1000 else f"about {need}"
            text += f"; {more} seeds would be needed to detect a difference as small as the observed {fmt(d)}."
        else:
            text += "."
        out.append(text)
    return out


def guarantee_words(v: Verdict) -> str | None:
    """The design's frequentist guarantee at the indifference zone, in one sentence (None without one)."""
    g = v.guarantee
    if g is None:
        return None
    if g.design == "elimination":
        text = (f"The design's guarantee (a frequency): the elimination race (Kim & Nelson, variances updated at every "
                f"seed) picks the best configuration with probability at least {g.probability:.2f} whenever it leads "
                f"every other by {_eps(v)} or more")
        if g.equivalent:
            text += (f"; it stopped because the configurations left ({', '.join(_name(v, a) for a in g.equivalent)}) "
                     f"are each within {_eps(v)} of every other, a statement held to the same guarantee")
        return text + "."
    return (f"The design's guarantee (a frequency): had one configuration led every other by {_eps(v)} or more, a study "
            f"of this design ({g.arms} configurations x {_seeds(g.seeds)}, at the spread measured here) would have its "
            f"best mean on it with probability {g.probability:.2f} (Bechhofer's indifference-zone probability).")


def _probability(v: Verdict) -> list[str]:
    sel = v.selection
    if sel is None or not sel.p_within:
        return []
    out = [f"How sure: {HOW}. Per configuration: "
           + "; ".join(f"{_name(v, a)} {p:.2f}" for a, p in sorted(sel.p_within.items(), key=lambda x: -x[1]))
           + (("; left out, with fewer than 3 seeds: " + ", ".join(_name(v, a) for a in sel.unmeasured))
              if sel.unmeasured else "") + "."]
    g = guarantee_words(v)
    if g:
        out.append(g)
    if sel.excluded:
        out.append(f"Excluded from being within min_effect of the best by one-sided t tests (simultaneous over every "
                   f"pair, family-wise {sel.alpha:.0%}): "
                   + "; ".join(f"{_name(v, a)} (behind {_name(v, b)})" for a, b in sel.excluded.items()) + ".")
    return out


def _calls(v: Verdict) -> list[str]:
    if not v.arms:
        return []
    if v.sequential:
        return [f"Against the baseline ({v.calls_method}; equivalent means within ±{_eps(v)}): "
                + "; ".join(f"{a.config.label} {a.call}" for a in v.arms) + "."]
    return [f"Against the baseline ({v.calls_method}; equivalent: both one-sided "
            f"tests of a difference beyond ±{_eps(v)} rejected, adjusted in the same family): "
            + "; ".join(f"{a.config.label} {a.call} (adjusted {fmt_p(a.p_adjusted)})" for a in v.arms) + "."]
