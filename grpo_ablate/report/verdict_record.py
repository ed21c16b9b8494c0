"""The verdict as a record: the answer (`Verdict`), each arm's call (`ArmVerdict`), the evidence that nothing was
learned (`Stuck`), another objective's best (`Secondary`). Plain data, no statistics and no words.

report/verdict.py fills it in (`judge`) and report/wording.py reads it into sentences; both import it from here,
so neither imports the other's module for its types.

    python -c "from grpo_ablate.report.verdict_record import Verdict; print(Verdict('no_data', None, None).as_dict())"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grpo_ablate.report.timing_noise import TimingNoise
from grpo_ablate.stats.seeds import ALPHA, POWER, Comparison, MetricStat
from grpo_ablate.stats.selection import Selection
from grpo_ablate.stats.sequential import UNDECIDED
from grpo_ablate.core.vocab import Arm

__all__ = ["Verdict", "ArmVerdict", "Stuck", "Secondary", "Guarantee"]


@dataclass(frozen=True)
class Guarantee:
    """The design's frequentist guarantee at the indifference zone: the probability that the design picks the best
    configuration when it leads every other by min_effect. `bound`: a lower bound the procedure guarantees (an
    elimination race's confidence), else the value of Bechhofer's formula for the design at the measured spread."""

    probability: float
    design: str  # "fixed" (a study of k arms x n seeds, or a race that ran to its planned seeds) | "elimination"
    arms: int
    seeds: int
    bound: bool = False
    equivalent: tuple[str, ...] = ()  # an elimination race's equivalence stop: the configurations found equivalent
    kept: tuple[str, ...] = ()  # the arms (their names) the race kept: the recommendation is the cheapest of them

    def as_dict(self) -> dict[str, Any]:
        return {"probability": self.probability, "design": self.design, "arms": self.arms, "seeds": self.seeds,
                "bound": self.bound, "equivalent": list(self.equivalent), "kept": list(self.kept)}


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
    hours: float | None = None  # training hours per trial (device-hours: GPU-hours on a one-GPU study)

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.name, "key": self.config.key, "mean": self.mean, "n": self.n, "call": self.call,
                "cs": list(self.cs) if self.cs else None, "p_adjusted": self.p_adjusted,
                "p_equivalence_adjusted": self.p_equivalence_adjusted, "hours": self.hours,
                "clearly_better": self.better, "clearly_worse": self.worse, "cost": self.cost,
                **(self.comparison.as_dict() if self.comparison else {"comparison": None})}


@dataclass(frozen=True)
class Stuck:
    """Rule 0's evidence: nothing learned measurably, so G cannot be ranked."""

    flat: bool  # no arm's gain moved (else: nearly no group had a reward spread)
    has_eval: bool  # the gain is the held-out gain (else the training reward gain)
    gain_metric: str
    gains: tuple[tuple[str, MetricStat], ...] = ()  # arm title -> its gain over seeds
    zero_spread: tuple[tuple[str, float, float | None], ...] = ()  # arm title, share of groups, success rate
    success_rates: tuple[float, ...] = ()
    never_solved: int | None = None  # advise.json's counts, when advise ran
    always_solved: int | None = None
    num_prompts: int | None = None
    advise_completions: bool = False  # advise kept its completions (a file to look at)


@dataclass(frozen=True)
class Secondary:
    """Another objective whose best arm differs from the answer's."""

    metric: str
    arm: str  # the best arm's label
    mean: float


@dataclass(frozen=True)
class Verdict:
    """The answer as a record, and its words (report/wording.py) once `decide` filled them in.

    summary.json carries `as_dict()` under "verdict"."""

    kind: str  # winner | no_clear_winner | untested | cannot_rank | no_baseline | no_data | no_objective
    metric: str | None
    direction: str | None
    recommended: Arm | None = None
    recommended_name: str | None = None
    # race_kept | baseline_kept | baseline_excluded | baseline_cheapest_confident | cheapest_confident |
    # most_likely_best | learned_nothing | baseline_not_beaten | best_mean_untested
    reason: str | None = None
    comparison: Comparison | None = None  # the recommended arm's (or, without a winner, the closest arm's)
    arms: tuple[ArmVerdict, ...] = ()
    detectable: float | None = None
    detectable_relative: float | None = None
    seeds_for: tuple[float, int] | None = None  # (difference, seeds needed to detect it)
    cost_unit: str | None = None
    timing: TimingNoise | None = None
    selection: Selection | None = None  # the recommendation's probability, the eps-best set, its cheapest
    names: dict[str, str] = field(default_factory=dict)  # arm name -> its configuration in short words
    hours: dict[str, float] = field(default_factory=dict)  # arm name -> training hours per trial
    min_effect: float | None = None
    calls_method: str | None = None  # how the better/worse calls were made (named on the page)
    sequential: bool = False  # the calls rest on the anytime race's confidence sequences
    baseline_name: str | None = None
    baseline: Arm | None = None
    baseline_mean: float | None = None
    recommended_stat: MetricStat | None = None  # the recommended arm's metric over its seeds
    closest: str | None = None  # without a winner: the arm closest to beating the baseline
    detect_n: int | None = None  # seeds behind `detectable`
    detect_paired: bool = True
    stuck: Stuck | None = None
    replaced: str | None = None  # the study's time-based objective the answer replaced by its token-based twin
    objective: str | None = None  # the study's first objective when the answer rests on another metric
    secondary: tuple[Secondary, ...] = ()
    metric_low: float | None = None  # the range the metric can take (its intervals are cut to it)
    metric_high: float | None = None
    branched_at: int | None = None  # the arms branched at this optimizer step from one shared prefix per seed
    confidence: float = 0.95  # the probability a configuration must reach to be recommended (study.racing.confidence)
    guarantee: Guarantee | None = None  # the design's P(correct selection) at the indifference zone
    level: float = ALPHA  # the page's family-wise level (below 5% after a race that stopped early)
    # arm name -> metric -> adjusted p of the effects table's cells on the other metrics (the page's second family)
    table_p: dict[str, dict[str, float | None]] = field(default_factory=dict)
    # the words (report/wording.py): three lines first, then the details, each said once
    lines: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # the details that say why the answer rests on another metric than the objective

    @property
    def probability(self) -> float | None:
        """P(the recommended configuration is within min_effect of the best), a model posterior; None below three
        seeds."""
        return self.selection.probability if self.selection is not None else None

    @property
    def kept(self) -> bool:
        """No configuration reached the confidence: the recommendation is the baseline, kept."""
        return self.selection is not None and self.selection.kept

    @property
    def as_good(self) -> tuple[str, ...]:
        """The arms that cannot be excluded from being within min_effect of the best (the recommended one too)."""
        return self.selection.eps_best if self.selection is not None else ()

    @property
    def cheapest(self) -> str | None:
        return self.selection.cheapest if self.selection is not None else None

    @property
    def worse(self) -> tuple[str, ...]:
        """Arms excluded from being within min_effect of the best, then those clearly worse than the baseline."""
        out = list(self.selection.excluded) if self.selection is not None else []
        return tuple(out + [a.name for a in self.arms if a.worse and a.name not in out])

    @property
    def words(self) -> str:
        """The three lines and the details as one paragraph (summary.json's "recommendation")."""
        return " ".join((*self.lines, *self.details))

    @property
    def headline(self) -> str:
        return " ".join(self.lines)

    @property
    def detail(self) -> str:
        return " ".join(self.details)

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "kind": self.kind,
            "lines": list(self.lines),
            "details": list(self.details),
            "words": self.words,
            "headline": self.headline,
            "metric": self.metric,
            "direction": self.direction,
            "recommended": ({"arm": self.recommended_name, "key": self.recommended.key, **self.recommended.as_dict()}
                            if self.recommended else None),
            "reason": self.reason,
            "probability": self.probability,
            "as_good": list(self.as_good),
            "cheapest": self.cheapest,
            "worse": list(self.worse),
            "comparison": c.kind if c else None,
            "delta": c.delta if c else None,
            "ci95": list(c.ci95) if c and c.ci95 else None,
            "p_value": c.p_value if c else None,
            "n": c.n if c else None,
            "alpha": self.level,
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
            "branched_at": self.branched_at,
            "confidence": self.confidence,
            "kept": self.kept,
            "guarantee": self.guarantee.as_dict() if self.guarantee else None,
            "level": self.level,
        }

    def selection_dict(self) -> dict[str, Any] | None:
        sel = self.selection
        if sel is None or sel.recommended is None:
            return None
        return {**sel.as_dict(), "recommended_words": self.names.get(sel.recommended, sel.recommended),
                "cheapest_words": self.names.get(sel.cheapest) if sel.cheapest else None,
                "cheapest_hours": self.hours.get(sel.cheapest) if sel.cheapest else None,
                "cost_unit": self.cost_unit, "words": self.lines[0] if self.lines else None}
