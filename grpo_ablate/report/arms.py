"""Arms: trials grouped by configuration (`vocab.Arm`) over their seeds, the baseline among them,
the best arm per objective, and every arm's differences to the baseline.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
print([a.title for a in collect(load_study('studies/tiny-cpu.yaml')).arms])"

Arm statistics use completed trials only (pruned trials stopped early, OOM trials never
trained), except the diagnostics (`vocab.DIAGNOSTIC_METRICS`), which pool every trial that
logged them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from grpo_ablate.report.records import TrialRecord
from grpo_ablate.report.evaluation import CensoredStat
from grpo_ablate.stats.calls import ArmCall, page_calls
from grpo_ablate.stats.model import fit
from grpo_ablate.stats.multiplicity import PAGE_METHOD
from grpo_ablate.stats.multiplicity import holm
from grpo_ablate.stats.seeds import ALPHA, TOO_FEW, Comparison, Difference, MetricStat, model_comparison, stat
from grpo_ablate.stats.sequential import BETTER, UNDECIDED, WORSE
from grpo_ablate.report.text import delta_words
from grpo_ablate.core.vocab import BUILTIN_TASKS, DIAGNOSTIC_METRICS, Arm, Metric, Outcome, finite, metric

__all__ = ["ArmSummary", "Best", "Delta", "summarize_arms", "study_baseline", "best_per_objective",
           "baseline_deltas", "baseline_calls", "baseline_comparison", "table_pvalues", "names_an_arm", "DELTA_METHOD",
           "REWARD_LEVELS", "reward_range"]

# What the effects table's colours rest on (the page's legend and summary.json say it)
DELTA_METHOD = (f"t tests of one model of every arm over its seeds per metric (paired over shared seeds, each pair its "
                f"own variance moderated toward the pooled one and floored at the values' rounding error; no test "
                f"below 3 seeds); on the answer's metric the answer's own calls; {PAGE_METHOD}")


def names_an_arm(role: str) -> bool:
    """Whether a trial's role names its arm ("baseline", "temperature=0.3") or says who chose it.

    The ablation plan's roles are "baseline" and one "key=value" per factor; the others are the
    names of samplers ("grid", "tpe", ...), shared by every arm they propose.
    """
    return role == "baseline" or "=" in role


@dataclass(frozen=True)
class ArmSummary:
    """One arm over its seeds: `config` is the configuration, `name` what the study called it."""

    name: str
    config: Arm
    trials: tuple[int, ...]
    seeds: tuple[int, ...]  # seeds of the completed trials
    outcomes: dict[str, int]
    metrics: dict[str, MetricStat]  # completed trials only (diagnostics: every trial that logged them)
    is_baseline: bool = False
    # metric -> {seed: value} of the completed trials: what the paired comparisons pair on
    by_seed: dict[str, dict[int, float]] = field(default_factory=dict)
    # target metric -> seeds reached and the censored median; never averaged (report.evaluation)
    targets: dict[str, CensoredStat] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.seeds) if self.seeds else self.outcomes.get(Outcome.COMPLETED.value, 0)

    @property
    def title(self) -> str:
        """What tables and legends call the arm."""
        return self.name


def _arm_name(roles: Iterable[str], config: Arm) -> str:
    names = sorted({r for r in roles if names_an_arm(r)})
    if "baseline" in names:
        return "baseline"
    return names[0] if len(names) == 1 else config.label


def study_baseline(attr: Mapping[str, Any] | None, records: Sequence[TrialRecord]) -> Arm | None:
    """The study's baseline arm, when some trial ran it.

    The study stores it as its "baseline" attr (grpo_ablate.plan.cells.baseline_arm). A study without
    that attr falls back to the arm of the trials whose role is "baseline".
    """
    ran = {r.config for r in records if r.config is not None}
    stored = Arm.from_mapping(attr or {})
    if stored is not None:
        return stored if stored in ran else None
    named = sorted(r.config for r in records if r.config is not None and r.role == "baseline")
    return named[0] if named else None


# the metrics that are a mean reward (not a difference or a rate of one): inside the reward's range when it has one
REWARD_LEVELS = ("eval_final_reward", "eval_start_reward", "final_reward", "start_reward")


def summarize_arms(records: Sequence[TrialRecord], names: Sequence[str], baseline: Arm | None = None,
                   reward_range: tuple[float, float] | None = None) -> list[ArmSummary]:
    """Group trials by arm, each metric of `names` over its seeds; baseline first, then by G, batch, temperature.

    `reward_range`: the range the study's reward takes when its rewards declare one (the built-in tasks' 0/1
    reward: [0, 1]); a mean reward's interval (REWARD_LEVELS) is then the betting interval for a bounded mean."""
    by_arm: dict[Arm, list[TrialRecord]] = defaultdict(list)
    for r in records:
        if r.config is not None:
            by_arm[r.config].append(r)
    arms: list[ArmSummary] = []
    for cfg, rs in by_arm.items():
        done = [r for r in rs if r.outcome == Outcome.COMPLETED.value]
        metrics: dict[str, MetricStat] = {}
        by_seed: dict[str, dict[int, float]] = {}
        for m in names:
            pool = rs if m in DIAGNOSTIC_METRICS else done
            bounds = metric(m)
            if reward_range is not None and m in REWARD_LEVELS:
                metrics[m] = stat((r.metrics.get(m) for r in pool), low=reward_range[0], high=reward_range[1],
                                  bounded=True)
            else:
                metrics[m] = stat((r.metrics.get(m) for r in pool), low=bounds.low, high=bounds.high)
            by_seed[m] = {r.seed: v for r in done if r.seed is not None
                          and (v := finite(r.metrics.get(m))) is not None}
        arms.append(ArmSummary(
            name=_arm_name((r.role for r in rs), cfg),
            config=cfg,
            trials=tuple(sorted(r.number for r in rs)),
            seeds=tuple(sorted(r.seed for r in done if r.seed is not None)),
            outcomes=dict(Counter(r.outcome for r in rs)),
            metrics=metrics,
            is_baseline=(baseline is not None and cfg == baseline),
            by_seed=by_seed,
        ))
    arms.sort(key=lambda a: (not a.is_baseline, a.config))
    return arms


def reward_range(config: Mapping[str, Any]) -> tuple[float, float] | None:
    """The range of the study's reward when it is known: a built-in task (vocab.BUILTIN_TASKS) scored by its own 0/1
    exact-answer reward alone (no `rewards`, or only the task's own at weight 1): [0, 1]. None otherwise (a user's
    reward functions declare no range)."""
    data = config.get("data") if isinstance(config, Mapping) else None
    task = data.get("task") if isinstance(data, Mapping) else None
    if task not in BUILTIN_TASKS:
        return None
    rewards = config.get("rewards") or []
    own = ("task", task)
    for r in rewards if isinstance(rewards, list) else [rewards]:
        name, weight = (r, 1.0) if isinstance(r, str) else ((r or {}).get("name"), (r or {}).get("weight", 1.0))
        if name not in own or weight != 1.0:
            return None
    return (0.0, 1.0)


@dataclass(frozen=True)
class Best:
    metric: str
    direction: str
    arm: ArmSummary
    stat: MetricStat


def best_per_objective(arms: Sequence[ArmSummary], objectives: Sequence[tuple[str, str]]) -> dict[str, Best | None]:
    """The arm with the best mean per objective; ties go to more seeds, then to the baseline."""
    out: dict[str, Best | None] = {}
    for name, direction in objectives:
        cands = [a for a in arms if name in a.metrics and a.metrics[name].mean is not None]
        if not cands:
            out[name] = None
            continue
        sign = 1.0 if direction == "maximize" else -1.0
        best = max(cands, key=lambda a: (sign * a.metrics[name].mean, a.metrics[name].n, a.is_baseline))  # type: ignore[operator]
        out[name] = Best(name, direction, best, best.metrics[name])
    return out


@dataclass(frozen=True)
class Delta:
    """One arm against the baseline on one metric: the change, its direction, and the one model's call.

    `better` is the change's direction (True: the metric moved the good way; None: no change);
    whether the data support it is `diff.clear` (the Holm-adjusted p below 5%; None: no test, fewer
    than 3 seeds or a diagnostic) and `call`.
    """

    metric: str
    arm: str
    baseline: MetricStat
    value: MetricStat
    diff: Difference
    better: bool | None  # None: no change
    words: str
    comparison: Comparison | None = None  # the one model's contrast behind diff (TOO_FEW: no test)
    p_adjusted: float | None = None  # adjusted p in the page's one family
    answer_call: str | None = None  # on the answer's metric: the answer's own call (equivalent included)

    @property
    def call(self) -> str | None:
        """better / worse (the test says so) / undecided (it does not), or on the answer's metric the answer's call
        (equivalent too); None without a test."""
        if self.answer_call is not None:
            return self.answer_call
        if self.diff.clear is None:
            return None
        if not self.diff.clear:
            return "undecided"
        return "better" if self.better else "worse"

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "baseline": self.baseline.mean,
            "value": self.value.mean,
            "delta": self.diff.delta,
            "relative": self.diff.relative,
            "ci95": list(self.diff.ci95) if self.diff.ci95 else None,
            "clear": self.diff.clear,
            # a call, never a direction alone: True / False only where the test backs it
            "better": self.call == "better" if self.call is not None else None,
            "call": self.call,
            "improves": self.better,
            "comparison": c.kind if c else None,
            "p_value": c.p_value if c else None,
            "p_adjusted": self.p_adjusted,
            "method": DELTA_METHOD,
            "words": self.words,
        }


def baseline_calls(arms: Sequence[ArmSummary], name: str, *, maximize: bool = True, min_effect: float = 0.0,
                   level: float = ALPHA, others: Sequence[float | None] = ()) -> tuple[dict[str, ArmCall], list[float | None]]:
    """Every other arm's call against the baseline on metric `name` (stats.calls.page_calls: the t tests of
    stats/model.py's one fit over every arm's seeds, the fit the verdict's probability reads), in one family with
    the page's other statements (`others`: the effects table's other cells' p-values, `table_pvalues`), at
    family-wise `level` (below ALPHA after a race that stopped early: race_record.calls_level); and those
    statements' adjusted p-values. ({}, []) without a baseline."""
    base = next((a for a in arms if a.is_baseline), None)
    if base is None:
        return {}, [None] * len(others)
    return page_calls({a.name: a.by_seed.get(name, {}) for a in arms}, base.name, min_effect=min_effect,
                      maximize=maximize, level=level, others=others)


def baseline_comparison(call: ArmCall | None, base: ArmSummary, arm: ArmSummary, name: str) -> Comparison | None:
    """The arm minus the baseline on `name` as the page shows it: the one model's contrast (`call`'s,
    from `baseline_calls`: its 95% interval cut to the range the metric can take, its unadjusted p),
    or, for an arm the model left out (fewer than 3 seeds on either side), the difference of the
    means with no interval and no test (TOO_FEW). None when either arm has no value."""
    m = metric(name)
    if call is not None and call.difference is not None:
        return model_comparison(call.difference, low=m.low, high=m.high)
    b, a = base.by_seed.get(name, {}), arm.by_seed.get(name, {})
    if not a or not b:
        return None
    delta = sum(a.values()) / len(a) - sum(b.values()) / len(b)
    return Comparison(TOO_FEW, delta, None, None, min(len(a), len(b)), None)


def _tested_metrics(metrics: Mapping[str, Metric], exclude: str | None) -> list[str]:
    return [n for n, m in metrics.items() if m.direction is not None and n not in DIAGNOSTIC_METRICS and n != exclude]


def table_pvalues(arms: Sequence[ArmSummary], metrics: Mapping[str, Metric],
                  exclude: str | None = None) -> dict[tuple[str, str], float | None]:
    """(arm name, metric) -> the unadjusted two-sided p of the arm against the baseline on that metric (the one
    model's contrast, per metric), for every coloured cell of the effects table but those of `exclude` (the
    answer's metric, whose cells show the answer's calls). None: no test (fewer than 3 seeds). {} without a
    baseline. Their adjustment is the page's (stats/calls.page_calls)."""
    base = next((a for a in arms if a.is_baseline), None)
    if base is None:
        return {}
    out: dict[tuple[str, str], float | None] = {}
    for name in _tested_metrics(metrics, exclude):
        model = fit({a.name: a.by_seed.get(name, {}) for a in arms})
        for a in arms:
            if a.is_baseline or a.metrics.get(name) is None or a.metrics[name].mean is None:
                continue
            d = model.contrast(base.name, a.name)
            out[(a.name, name)] = d.two_sided_p() if d is not None else None
    return out


def baseline_deltas(arms: Sequence[ArmSummary], metrics: Mapping[str, Metric], level: float = ALPHA,
                    answer_metric: str | None = None, answer: Mapping[str, tuple[str, float | None]] | None = None,
                    table_p: Mapping[str, Mapping[str, float | None]] | None = None) -> dict[str, dict[str, Delta]]:
    """Every arm against the baseline arm, per metric with a direction, in numbers and in words.

    One family for the whole page (DELTA_METHOD): on the answer's metric (`answer_metric`) each cell is the answer's
    own call (`answer`: arm -> (better / worse / equivalent / undecided, its adjusted p)), so the table never
    colours "better" what the
    answer calls equivalent; the other metrics' cells are coloured when their adjusted p (`table_p`: arm -> metric
    -> p, adjusted in the page's family with the answer's calls, stats/calls.page_calls) is below `level`. A tie
    among a few seeds keeps the model's floored spread and is never a certainty; no test below 3 seeds. Without
    `table_p` (a page with no answer), the cells are adjusted here as that family's second half alone.
    """
    base = next((a for a in arms if a.is_baseline), None)
    if base is None:
        return {}
    if table_p is None:
        raw = table_pvalues(arms, metrics, answer_metric)
        own_p: dict[str, dict[str, float | None]] = {}
        for (arm_name, metric_name), p in zip(raw, holm(list(raw.values()))):
            own_p.setdefault(arm_name, {})[metric_name] = p
        table_p = own_p
    models: dict[str, Any] = {}

    def model(name: str) -> Any:  # one fit per metric, on first use
        if name not in models:
            models[name] = fit({x.name: x.by_seed.get(name, {}) for x in arms})
        return models[name]

    out: dict[str, dict[str, Delta]] = {}
    for arm in arms:
        if arm.is_baseline:
            continue
        row: dict[str, Delta] = {}
        for name, m in metrics.items():
            if m.direction is None:  # a count (steps): neither better nor worse
                continue
            a, b = base.metrics.get(name), arm.metrics.get(name)
            if a is None or b is None or a.mean is None or b.mean is None:
                continue
            tested_metric = name not in DIAGNOSTIC_METRICS
            own = (answer or {}).get(arm.name) if name == answer_metric else None
            contrast = model(name).contrast(base.name, arm.name) if tested_metric else None
            comp = (baseline_comparison(ArmCall(UNDECIDED, None, None, contrast), base, arm, name)
                    if tested_metric else None)
            p_adj = own[1] if own is not None else (table_p.get(arm.name, {}).get(name) if tested_metric else None)
            delta = b.mean - a.mean
            relative = delta / abs(a.mean) if a.mean != 0 else None
            if own is not None:  # the answer's call, word for word
                clear = None if contrast is None else own[0] in (BETTER, WORSE)
                call = own[0] if contrast is not None else None
            else:
                # clear: the family's adjusted p below the page's level, the model's estimate on the side the means
                # moved (the two can differ in sign only when seeds are unbalanced: then no colour)
                clear = (bool(p_adj < level and comp is not None and comp.delta * delta > 0)
                         if p_adj is not None else None)
                call = None
            diff = Difference(delta, relative, comp.ci95 if comp else None, clear)
            better = None if diff.delta == 0 else ((diff.delta > 0) == m.higher_is_better)
            words = delta_words(m, arm.title, f"the baseline ({base.config.label})", b, a, diff, better, comp, p_adj)
            row[name] = Delta(name, arm.name, a, b, diff, better, words, comp, p_adj, call)
        out[arm.name] = row
    return out
