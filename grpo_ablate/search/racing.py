"""Racing for planned studies (grid, ablation): spend seeds only on arms still in contention.

    study: {sampler: ablation, seeds: [0, 1, ..., 11], min_effect: 0.02,
            racing: {confidence: 0.95, first_round_seeds: 2, stop_when_settled: true}}

Round 1 runs every arm on the first `first_round_seeds` seeds. After each round the arm with
the best mean (over the seeds every live arm has) leads, and every arm is judged by the study's
one rule (report/sequential.py: an anytime-valid confidence sequence on its paired differences,
valid however often it is looked at): an arm is dropped once its sequence against the leader lies
wholly on the worse side of zero. With `stop_when_settled` an arm also stops taking seeds once its
call against the baseline (the leader in a grid) is settled (better, worse, or equivalent within
study.min_effect) and it is worse than or equivalent to the leader; the baseline and the leader
keep running while any arm still needs them as the other half of its pairs, and the race is
decided when every arm is settled. The next round adds one seed to every arm still in
contention; the race ends anyway when the seeds are spent. Each drop is recorded in the study
user attr `racing` (RACING_ATTR) with its round and reason, and every round's calls in its
`path`, which the report shows.

The paired t-test the race used before (`paired_worse_p`, rule "t-test") stays for the
benchmarks' replay of the old strategy only: repeated after every round it drops a tied arm far
more often than its nominal level (tests/test_sequential.py measures that).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.report.sequential import EQUIVALENT, UNDECIDED, WORSE, classify
from grpo_ablate.trial_record import RACING as RACING_ATTR

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["Drop", "RaceState", "Rule", "decide", "paired_worse_p", "arm_results", "advance", "describe", "rule_of"]



@dataclass(frozen=True)
class Drop:
    arm: str
    round: int
    reason: str
    p_value: float | None  # None: dropped without a p-value (the anytime rule, or no result to race on)
    seeds: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "round": self.round, "reason": self.reason, "p_value": self.p_value,
                "seeds": list(self.seeds)}


@dataclass(frozen=True)
class Rule:
    """How a round judges arms: the study's one rule, or the old repeated t-test (benchmarks only)."""

    min_effect: float = 0.02
    confidence: float = 0.95
    method: str = "t"  # report/sequential.METHODS
    bound: float | None = None  # the betting method's bound on a paired difference (the objective's range)
    stop_when_settled: bool = False
    kind: str = "anytime"  # anytime | t-test

    def call(self, diffs: Sequence[float], maximize: bool) -> str:
        return classify(diffs, min_effect=self.min_effect, maximize=maximize, method=self.method,
                        bound=self.bound, alpha=1.0 - self.confidence).call


@dataclass
class RaceState:
    """What the race knows after a round; `live` is in contention, `dropped` in drop order.

    `settled`: arms that stopped taking seeds because their call is known; `calls`: each arm's
    call against the baseline (the leader without one) after the last round; `path`: one entry
    per round ({round, seeds, calls, live, leader}) for the report.
    """

    round: int = 0
    live: list[str] = field(default_factory=list)
    dropped: list[Drop] = field(default_factory=list)
    leader: str | None = None
    decided: bool = False
    settled: list[str] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)
    path: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "live": list(self.live), "leader": self.leader, "decided": self.decided,
                "dropped": [d.as_dict() for d in self.dropped], "settled": list(self.settled),
                "calls": dict(self.calls), "path": list(self.path)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, arms: Sequence[str]) -> "RaceState":
        if not d:
            return cls(0, list(arms))
        drops = [Drop(x["arm"], int(x["round"]), str(x["reason"]),
                      None if x.get("p_value") is None else float(x["p_value"]), tuple(x.get("seeds", ())))
                 for x in d.get("dropped", [])]
        gone = {x.arm for x in drops}
        stored = d.get("live") if isinstance(d.get("live"), list) else arms
        return cls(int(d.get("round", 0)), [a for a in arms if a not in gone and a in stored], drops,
                   d.get("leader"), bool(d.get("decided")), list(d.get("settled") or []), dict(d.get("calls") or {}),
                   list(d.get("path") or []))


def objective_range(study: "Study") -> tuple[float | None, float | None]:
    """The range the study's first objective can take (vocab's metric bounds), (None, None) when unbounded."""
    from grpo_ablate.vocab import METRICS

    m = METRICS.get(study.study.objectives[0].metric) if study.study.objectives else None
    return (m.low, m.high) if m is not None else (None, None)


def rule_of(study: "Study") -> Rule:
    """The study's rule: study.min_effect (default: report/sequential's share of the objective's range,
    else of the baseline-free 1.0), the race's confidence, method and stop key, the range as bound."""
    from grpo_ablate.report.sequential import default_min_effect

    racing = study.study.racing
    low, high = objective_range(study)
    bound = (high - low) if low is not None and high is not None else None
    min_effect = study.study.min_effect
    if min_effect is None:
        min_effect = default_min_effect(low, high) if bound is not None else default_min_effect(0.0, 1.0)
    return Rule(float(min_effect), racing.confidence if racing else 0.95, racing.method if racing else "t", bound,
                bool(racing and racing.stop_when_settled))


def paired_worse_p(leader: Sequence[float], other: Sequence[float], maximize: bool) -> float:
    """One-sided p-value that `other` is worse than `leader`, paired by seed (scipy's ttest_rel).

    Identical differences (no spread) give 0 when they all favour the leader, else 1.
    """
    from scipy import stats

    diffs = [(a - b) if maximize else (b - a) for a, b in zip(leader, other)]
    if len(diffs) < 2:
        return 1.0
    if statistics.pstdev(diffs) == 0.0:
        return 0.0 if diffs[0] > 0 else 1.0
    p = float(stats.ttest_rel(leader, other, alternative="greater" if maximize else "less").pvalue)
    return p if math.isfinite(p) else 1.0


def _diffs(results: Mapping[str, Mapping[int, float]], arm: str, ref: str) -> tuple[list[float], list[int]]:
    common = sorted(set(results.get(arm, {})) & set(results.get(ref, {})))
    return [results[arm][s] - results[ref][s] for s in common], common


def decide(state: RaceState, results: Mapping[str, Mapping[int, float]], *, maximize: bool, confidence: float = 0.95,
           seeds_left: bool, rule: Rule | None = None, baseline: str | None = None) -> RaceState:
    """Close a round: name the leader, drop the arms the rule calls worse than it, settle, say whether it is over.

    `results`: arm key -> {seed: objective value} for the arms still in contention (and the
    baseline's, when it is given). An arm with no result on any seed (every trial ran out of
    memory or failed) is dropped untested: a placeholder zero must not stand in for a measurement.
    `rule` None: the anytime rule at `confidence` without stopping (Rule's defaults).
    """
    rule = rule or Rule(confidence=confidence)
    rnd = state.round + 1
    live = [a for a in state.live if results.get(a)]
    if not live:
        return RaceState(rnd, list(state.live), list(state.dropped), state.leader, not seeds_left, list(state.settled),
                         dict(state.calls), list(state.path))
    shared = set.intersection(*(set(results[a]) for a in live))

    def mean(a: str) -> float:
        return statistics.fmean([results[a][s] for s in (shared or results[a])])

    leader = (max if maximize else min)(live, key=mean)
    dropped = list(state.dropped)
    dropped += [Drop(a, rnd, "no result on any seed (every trial ran out of memory or failed): nothing to race on",
                     None, ()) for a in state.live if a not in live]
    keep = [leader]
    vs_leader: dict[str, str] = {}

    def undecided_vs_base(a: str) -> bool:
        if baseline is None or not results.get(baseline):
            return False
        return rule.call(_diffs(results, a, baseline)[0], maximize) == UNDECIDED

    for a in live:
        if a == leader:
            continue
        diffs, common = _diffs(results, a, leader)
        if rule.kind == "t-test":
            p = paired_worse_p([results[leader][s] for s in common], [results[a][s] for s in common], maximize)
            if p < 1.0 - rule.confidence:
                dropped.append(Drop(a, rnd, f"worse than {leader} by {mean(a) - mean(leader):+.4g} on {len(common)} "
                                           f"shared seed(s) (paired one-sided t-test p={p:.3g} < "
                                           f"{1.0 - rule.confidence:.3g})", p, tuple(common)))
                continue
            keep.append(a)
            continue
        vs_leader[a] = rule.call(diffs, maximize)
        if vs_leader[a] == WORSE and rule.stop_when_settled and (a == baseline or undecided_vs_base(a)):
            # the baseline is the other half of every arm's pairs: it runs on while any arm needs it;
            # an arm behind the leader runs on until its own call against the baseline is known, so
            # the answer says better / worse / equivalent for it too (it settles below)
            keep.append(a)
        elif vs_leader[a] == WORSE:
            dropped.append(Drop(a, rnd, f"worse than {leader} by {statistics.fmean(diffs):+.4g} on {len(common)} shared "
                                       f"seed(s): its {rule.confidence:.0%} confidence sequence (valid at every look) "
                                       f"lies wholly below zero", None, tuple(common)))
        else:
            keep.append(a)
    ref = baseline if baseline is not None and baseline in results and results[baseline] else None
    calls = dict(state.calls)
    for a in keep:
        if a == ref:
            continue
        if ref is not None:
            calls[a] = rule.call(_diffs(results, a, ref)[0], maximize)
        else:
            calls[a] = EQUIVALENT if a == leader else vs_leader.get(a, UNDECIDED)
    for d in dropped:
        if d.round == rnd and d.arm in results and ref is not None and d.arm != ref:
            calls[d.arm] = rule.call(_diffs(results, d.arm, ref)[0], maximize)
    settled = list(state.settled)
    if rule.stop_when_settled and rule.kind == "anytime":
        def known(a: str) -> bool:
            return a == ref or calls.get(a, UNDECIDED) != UNDECIDED

        others = [a for a in keep if a not in (leader, ref)]
        done = [a for a in others if known(a) and vs_leader.get(a) in (WORSE, EQUIVALENT)]
        if len(done) == len(others) and known(leader):  # the references are needed no more
            done += [a for a in keep if a in (leader, ref)]
        settled += [a for a in done if a not in settled]
    open_arms = [a for a in state.live if a in keep and a not in settled]
    # the references (leader, baseline) run on while any arm still needs them for its pairs
    live_sorted = [a for a in state.live if a in keep and (a not in settled or (open_arms and a in (leader, ref)))]
    decided = not open_arms or len(live_sorted) <= 1 or not seeds_left
    path = list(state.path) + [{"round": rnd, "seeds": len(shared), "leader": leader, "calls": dict(calls),
                                "live": list(live_sorted), "settled": list(settled),
                                "dropped": [d.arm for d in dropped if d.round == rnd]}]
    return RaceState(rnd, live_sorted, dropped, leader, decided, settled, calls, path)


# ------------------------------------------------------------------ a racing study in storage


def arm_results(ostudy: "optuna.Study") -> dict[str, dict[int, float]]:
    """arm key -> {seed: first objective} over the study's results.

    A result is the ledger's: a completed trial with values. An out-of-memory trial (COMPLETE,
    with a violated constraint and placeholder zeros) is no result, so its arm never enters the
    paired test on a zero; an arm with no result leaves the race at the next round (`decide`).
    """
    from grpo_ablate.study import ledger

    out: dict[str, dict[int, float]] = {}
    for t in ostudy.get_trials(deepcopy=False):
        cell = ledger.cell_of(t)
        if cell is None or not ledger.is_result(t):
            continue
        out.setdefault(cell.arm.key, {})[cell.seed] = float(t.values[0])
    return out


def advance(ostudy: "optuna.Study", study: "Study", queue_next: bool = True) -> RaceState:
    """Close the round that just finished and queue the next one; the new state is stored in RACING_ATTR.

    `queue_next=False`: the study's trial budget is spent, so the race ends with this round.
    """
    from grpo_ablate.plan import racing_round, study_plan
    from grpo_ablate.study import ledger

    racing = study.study.racing
    assert racing is not None
    arms = list(dict.fromkeys(c.arm.key for c in study_plan(study)))
    from grpo_ablate.plan import baseline_arm
    from grpo_ablate.study import ledger

    state = RaceState.from_dict(ostudy.user_attrs.get(RACING_ATTR), arms)
    if state.decided:  # a rerun of a finished race: cells queued behind its back (another host) are not run
        ledger.cancel_queued(ostudy, arms, f"the race was decided in round {state.round}")
        return state

    used = racing.first_round_seeds + state.round
    results = arm_results(ostudy)
    base = baseline_arm(study).key if study.study.sampler == "ablation" else None
    base = base if base in arms else None
    wanted = set(state.live) | ({base} if base else set())
    state = decide(state, {a: results.get(a, {}) for a in wanted}, maximize=study.directions[0] == "maximize",
                   seeds_left=queue_next and used < len(study.study.seeds), rule=rule_of(study), baseline=base)
    ostudy.set_user_attr(RACING_ATTR, state.as_dict())
    stopped = set(arms) - set(state.live) if not state.decided else set(arms)
    ledger.cancel_queued(ostudy, stopped, f"racing settled the arm in round {state.round}")
    if not state.decided:
        ledger.queue(ostudy, study, racing_round(study, state.round + 1, set(state.live)))
    return state


def describe(state: RaceState) -> str:
    """One line for the console when the race ends."""
    if state.path and not state.live and state.settled:
        calls = ", ".join(f"{a} {c}" for a, c in state.calls.items())
        return (f"racing settled after round {state.round} ({state.path[-1].get('seeds')} seeds): every arm's call "
                f"is known ({calls}); {state.leader} leads, {len(state.dropped)} arm(s) dropped")
    if len(state.live) <= 1:
        return f"racing decided after round {state.round}: {state.leader} leads, {len(state.dropped)} arm(s) dropped"
    return (f"racing ended after round {state.round} with the seeds spent: {len(state.live)} arm(s) still tied "
            f"({', '.join(state.live)}), {len(state.dropped)} dropped")
