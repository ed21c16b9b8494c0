"""Racing for planned studies (grid, ablation): spend seeds only where the answer is still open.

    study: {sampler: ablation, seeds: [0, 1, ..., 11], min_effect: 0.05,
            racing: {design: group_sequential, confidence: 0.95, first_round_seeds: 3}}

Round 1 runs every arm on the first `first_round_seeds` seeds; every later round adds one seed to
the arms still in the race, until the planned seeds are spent. Three designs; the racing state and
the report say which ran.

- group_sequential (the default; a planned study knows its maximum seeds): after each round, a
  look with group-sequential error spending over the planned looks (stats/spending.py, the
  Haybittle-Peto rule: a strict level at every early look, 5% at the last). The first look is at
  stats/model.MIN_SEEDS (3) seeds: nothing is tested or excluded from fewer (a round with fewer
  is recorded without a look). Every look reads the report's own answer (stats/selection.select)
  over every arm of the race, dropped ones with the seeds they ran, so the race's probability and
  the report's are the same number from the same model (stats/model.py). An arm leaves only
  when it is excluded from the eps-best set at the look's family-wise level (some arm beats it by
  more than study.min_effect; the exclusions simultaneous over every pair). The race stops when
  one arm is left in it, or the probability that the leading arm is within min_effect of the best
  (the posterior PCS, stats/selection.p_within) reaches `confidence`, or the seeds run out. A
  race that never stops early ends at the last look at 5% on the same values as a fixed-sample
  study, so its answer is exactly the fixed-sample answer, whether or not it dropped arms on the way;
  one that stops early holds the report's calls and exclusions to the level its last look spent
  (`calls_level`), never to 5% at a look the data chose.
- elimination: Kim & Nelson's fully sequential indifference-zone procedure (stats/elimination.py:
  the one model's contrast variances, updated at every stage, KN++) with common seeds: the first
  `first_round_seeds` seeds (at least 3) are its first stage, then one seed per round for the arms
  still in; an arm leaves when the procedure eliminates it, and the race stops when one arm is left,
  when every arm left is within min_effect of every other (the equivalence stop: the equivalent set
  is recorded), or when the seeds run out. Its guarantee: P(the arm kept is the best) >= `confidence`
  when the best leads by at least study.min_effect (race_guarantee), which the group-sequential stop (a
  posterior probability that counts an arm exactly min_effect behind as within) does not give at the
  least-favourable configuration; the answer then recommends the cheapest arm it kept. It plans on
  the mean seeds it spends (plan/price.race_share; about 13-16 per arm at min_effect 0.05 on the
  committed tables, 50-90 at 0.02: benchmarks/calibration.py). The answer's probability, eps-best set
  and calls are the report's own, from the one model over every arm's seeds, its calls and exclusions
  at ELIMINATION_LEVEL (1%): an eliminated arm stopped when it looked worst.
- anytime (for open-ended use, kept from round 3): Lai's t confidence sequence of each arm's paired
  differences (stats/sequential.py), valid however often it is looked at; an arm is dropped once
  its sequence against the leader lies wholly below zero; with `stop_when_settled` an arm stops
  once its call against the baseline is known and it is worse than or equivalent to the leader.
  The differences are read in the order the seeds finished (a confidence sequence is a path).

Each round's state is stored on the study by the ledger (set_race; read back as StudyAttrs.racing): its design, drops
with their round and reason, and every round's look in its `path`, which the report shows. That record (RaceState,
Drop) and its readers (calls_level, race_guarantee, design_words) are grpo_ablate/records/race_record.py's, a floor below,
so the report reads a race without importing this module; this one decides the race.
The repeated paired t-test the race used in round 2 lives in benchmarks/sequential.py only, where
its replay shows why it was replaced.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from grpo_ablate.plan.run_plan import StudyPlan
from grpo_ablate.records.race_record import (ALPHA, ANYTIME, ELIMINATION, ELIMINATION_LEVEL, GROUP_SEQUENTIAL, Drop,
                                     RaceState)
from grpo_ablate.study.search.early_rank import race_decides_at
from grpo_ablate.stats.calls import calls as holm_calls
from grpo_ablate.stats.elimination import eliminate
from grpo_ablate.stats.min_effect import default_min_effect
from grpo_ablate.stats.model import MIN_SEEDS
from grpo_ablate.stats.selection import select
from grpo_ablate.stats.sequential import EQUIVALENT, UNDECIDED, WORSE, classify
from grpo_ablate.stats.spending import plan as spending_plan
from grpo_ablate.study import ledger
from grpo_ablate.core.vocab import METRICS

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import StudyConfig

__all__ = ["Rule", "decide", "arm_results", "advance", "describe", "rule_of"]


@dataclass(frozen=True)
class Rule:
    """How a round judges arms. `confidence`: the PCS target (group_sequential) or the CS level (anytime)."""

    min_effect: float = 0.05
    confidence: float = 0.95
    method: str = "t"  # stats/sequential.METHODS (anytime only)
    bound: float | None = None  # the betting method's bound on a paired difference (the objective's range)
    stop_when_settled: bool = False  # anytime only
    design: str = GROUP_SEQUENTIAL
    max_seeds: int | None = None  # group_sequential: the planned seeds (None: the results' own count at the end)
    first: int = MIN_SEEDS  # group_sequential: seeds at the first look (never below MIN_SEEDS)
    spending: str = "haybittle-peto"
    order: tuple[int, ...] = ()  # elimination: the order the study runs its seeds in (study.seeds)

    def call(self, diffs: Sequence[float], maximize: bool) -> str:
        return classify(diffs, min_effect=self.min_effect, maximize=maximize, method=self.method,
                        bound=self.bound, alpha=1.0 - self.confidence).call

    def level(self, seeds: int, last: bool) -> float:
        """The family-wise level of the look after `seeds` seeds (alpha itself at the last look)."""
        top = max(self.max_seeds or seeds, seeds)
        if last or seeds >= top:
            return ALPHA
        first = max(self.first, MIN_SEEDS)
        if seeds < first:  # no look yet: nothing can be tested
            return 0.0
        looks = list(range(first, top + 1))
        return spending_plan(self.spending, looks, top, ALPHA).level(seeds)


def rule_of(study: "StudyConfig") -> Rule:
    """The study's rule: study.min_effect (default: stats/min_effect.py, per metric), the race's design,
    confidence, method and stop key, the objective's range as the betting bound, the planned seeds."""
    racing = study.study.racing
    m = METRICS.get(study.study.objectives[0].metric) if study.study.objectives else None
    bound = (m.high - m.low) if m is not None and m.low is not None and m.high is not None else None
    min_effect = study.study.min_effect
    if min_effect is None and m is not None:
        min_effect = default_min_effect(m)
    return Rule(float(min_effect) if min_effect is not None else 0.0, racing.confidence if racing else 0.95,
                racing.method if racing else "t", bound, bool(racing and racing.stop_when_settled),
                racing.design if racing else GROUP_SEQUENTIAL, len(study.study.seeds),
                racing.first_round_seeds if racing else MIN_SEEDS, order=tuple(study.study.seeds))


def _diffs(results: Mapping[str, Mapping[int, float]], arm: str, ref: str) -> tuple[list[float], list[int]]:
    """arm minus ref on their shared seeds, in the order the pairs were complete (each dict keeps the
    order its seeds finished, `arm_results`): a confidence sequence is read along its path."""
    a, r = results.get(arm, {}), results.get(ref, {})
    pos_a, pos_r = {s: i for i, s in enumerate(a)}, {s: i for i, s in enumerate(r)}
    common = sorted(set(a) & set(r), key=lambda s: (max(pos_a[s], pos_r[s]), s))
    return [a[s] - r[s] for s in common], common


def decide(state: RaceState, results: Mapping[str, Mapping[int, float]], *, maximize: bool, confidence: float = 0.95,
           seeds_left: bool, rule: Rule | None = None, baseline: str | None = None) -> RaceState:
    """Close a round: look at the results by the rule's design, drop what it excludes, say whether it is over.

    `results`: arm key -> {seed: objective value} (each dict in the order its seeds finished) for
    the arms still in contention (and the baseline's, when it is given). An arm with no result on
    any seed (every trial ran out of memory or failed) is dropped untested: a placeholder zero
    must not stand in for a measurement. `rule` None: the anytime rule at `confidence` without
    stopping.
    """
    rule = rule or Rule(confidence=confidence, design=ANYTIME)
    if rule.design == ELIMINATION:
        return _decide_elimination(state, results, maximize=maximize, seeds_left=seeds_left, rule=rule,
                                   baseline=baseline)
    if rule.design == GROUP_SEQUENTIAL:
        return _decide_group_sequential(state, results, maximize=maximize, seeds_left=seeds_left, rule=rule,
                                        baseline=baseline)
    return _decide_anytime(state, results, maximize=maximize, seeds_left=seeds_left, rule=rule, baseline=baseline)


def _no_result(state: RaceState, live: list[str], rnd: int) -> list[Drop]:
    return [Drop(a, rnd, "no result on any seed (every trial ran out of memory or failed): nothing to race on",
                 None, ()) for a in state.live if a not in live]


def _decide_group_sequential(state: RaceState, results: Mapping[str, Mapping[int, float]], *, maximize: bool,
                             seeds_left: bool, rule: Rule, baseline: str | None) -> RaceState:
    """One group-sequential look (see the module docstring): exclusions at the look's spent level, the PCS."""
    rnd = state.round + 1
    live = [a for a in state.live if results.get(a)]
    dropped = list(state.dropped) + _no_result(state, live, rnd)
    if not live:
        return RaceState(rnd, [], dropped, state.leader, True, [], dict(state.calls), list(state.path), GROUP_SEQUENTIAL)
    shared = set.intersection(*(set(results[a]) for a in live))
    # every arm of the race, dropped ones with the seeds they ran: the report's own values
    values = {a: dict(results[a]) for a in sorted(results) if results[a]}
    n = len(shared)
    level = rule.level(n, last=not seeds_left)
    sel = select(values, rule.min_effect, maximize=maximize, alpha=level)  # the report's own answer, at this look
    excluded = {a: by for a, by in sel.excluded.items() if a in live}
    keep = [a for a in live if a not in excluded]
    for a, by in excluded.items():
        lead = statistics.fmean(values[by].values()) - statistics.fmean(values[a].values())
        dropped.append(Drop(a, rnd, f"excluded from the {rule.min_effect:g}-best set: {by} leads it by {lead:+.4g} "
                                    f"on {n} shared seed(s), more than min_effect at family-wise level {level:.2g} "
                                    f"(group-sequential look {rnd})", None, tuple(sorted(shared))))
    leader, pcs = sel.leader, sel.pcs
    ref = baseline if baseline is not None and results.get(baseline) else None
    calls = {}
    if ref is not None:
        calls = {a: c.call for a, c in holm_calls(values, ref, min_effect=rule.min_effect, maximize=maximize,
                                                  level=level).items()}
    stop = ("one configuration left in the race" if len(keep) <= 1 else
            f"the probability of correct selection reached {rule.confidence:g}" if pcs is not None and
            pcs >= rule.confidence else "the planned seeds ran out" if not seeds_left else None)
    path = list(state.path) + [{"round": rnd, "seeds": n, "leader": leader, "calls": dict(calls), "live": list(keep),
                                "settled": [], "dropped": list(excluded), "level": level, "pcs": pcs,
                                "eps_best": list(sel.eps_best), "stop": stop}]
    return RaceState(rnd, keep, dropped, leader, stop is not None, [], calls, path, GROUP_SEQUENTIAL, pcs,
                     list(sel.eps_best))


def _decide_elimination(state: RaceState, results: Mapping[str, Mapping[int, float]], *, maximize: bool,
                        seeds_left: bool, rule: Rule, baseline: str | None) -> RaceState:
    """One elimination look (module docstring): KN on every arm's table decides which arms take the next
    seed; the leader, probability, eps-best set and calls are the report's own (stats/selection, at 5%)."""
    if rule.min_effect <= 0:
        raise ValueError("racing.design elimination: the indifference zone is study.min_effect, which is "
                         f"{rule.min_effect:g}; set study.min_effect > 0 (e.g. 0.02)")
    rnd = state.round + 1
    live = [a for a in state.live if results.get(a)]
    dropped = list(state.dropped) + _no_result(state, live, rnd)
    if not live:
        return RaceState(rnd, [], dropped, state.leader, True, [], dict(state.calls), list(state.path), ELIMINATION)
    gone = {d.arm for d in dropped if d.reason.startswith("no result")}
    values = {a: dict(results[a]) for a in sorted(results) if results[a] and a not in gone}
    n0 = max(rule.first, MIN_SEEDS)
    elim = eliminate(values, delta=rule.min_effect, alpha=1.0 - rule.confidence, n0=n0, maximize=maximize,
                     order=rule.order, cap=rule.max_seeds)
    keep = [a for a in live if a not in elim.eliminated]
    out = [a for a in live if a in elim.eliminated]
    for a in out:
        by, r = elim.eliminated[a]
        seeds = tuple(sorted(values[a]))
        dropped.append(Drop(a, rnd, f"eliminated by the fully sequential procedure (Kim & Nelson) at {r} seeds: {by} "
                                    f"leads it by more than the procedure's continuation region allows at "
                                    f"P(correct selection) >= {rule.confidence:g} with min_effect {rule.min_effect:g}; "
                                    f"it takes no more seeds (this decides where seeds go, it is not a call)",
                            None, seeds))
    # the report's own answer, at the level it holds an elimination race's answer to (calls_level)
    sel = select(values, rule.min_effect, maximize=maximize, alpha=ELIMINATION_LEVEL, confidence=rule.confidence)
    ref = baseline if baseline is not None and values.get(baseline) else None
    calls = {}
    if ref is not None:
        calls = {a: c.call for a, c in holm_calls(values, ref, min_effect=rule.min_effect, maximize=maximize,
                                                  level=ELIMINATION_LEVEL).items()}
    n = len(set.intersection(*(set(values[a]) for a in keep))) if keep and all(a in values for a in keep) else 0
    stop = ("one configuration left in the race" if len(keep) <= 1 else
            f"the configurations left are equivalent: each within {rule.min_effect:g} of every other"
            if elim.equivalent else "the planned seeds ran out" if not seeds_left else None)
    path = list(state.path) + [{"round": rnd, "seeds": n, "leader": sel.leader, "calls": dict(calls),
                                "live": list(keep), "settled": [], "dropped": out, "level": ELIMINATION_LEVEL,
                                "pcs": sel.pcs, "eps_best": list(sel.eps_best), "stop": stop, "stage": elim.seeds,
                                "max_seeds": elim.max_seeds, "equivalent": list(keep) if elim.equivalent else [],
                                "guarantee": rule.confidence if elim.stopped else None}]
    return RaceState(rnd, keep, dropped, sel.leader, stop is not None, [], calls, path, ELIMINATION, sel.pcs,
                     list(sel.eps_best))


def _decide_anytime(state: RaceState, results: Mapping[str, Mapping[int, float]], *, maximize: bool,
                    seeds_left: bool, rule: Rule, baseline: str | None) -> RaceState:
    """One anytime look: confidence sequences against the leader, stop-when-settled (module docstring)."""
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
    if rule.stop_when_settled:
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
    """arm key -> {seed: first objective} over the study's results, each arm's seeds in the order they finished.

    A result is the ledger's: a completed trial with values. An out-of-memory trial (COMPLETE,
    with a violated constraint and placeholder zeros) is no result, so its arm never enters the
    paired test on a zero; an arm with no result leaves the race at the next round (`decide`).
    """
    out: dict[str, dict[int, float]] = {}
    trials = ostudy.get_trials(deepcopy=False)
    for t in sorted(trials, key=lambda t: (t.datetime_complete is None, t.datetime_complete or 0, t.number)):
        cell = ledger.cell_of(t)
        if cell is None or not ledger.is_result(t):
            continue
        out.setdefault(cell.arm.key, {})[cell.seed] = float(t.values[0])
    return out


def advance(ostudy: "optuna.Study", study: "StudyConfig", plan: StudyPlan, queue_next: bool = True) -> RaceState:
    """Close the round that just finished and queue the next one from the run's plan; the new state is written by
    the ledger (set_race). `queue_next=False`: the study's trial budget is spent, so the race ends with this round.
    """
    racing = study.study.racing
    assert racing is not None
    arms = list(dict.fromkeys(c.arm.key for c in plan.cells))

    state = RaceState.from_dict(ledger.study_attrs(ostudy).racing, arms)
    if state.decided:  # a rerun of a finished race: cells queued behind its back (another host) are not run
        ledger.cancel_queued(ostudy, arms, f"the race was decided in round {state.round}")
        return state

    used = racing.first_round_seeds + state.round
    results = arm_results(ostudy)
    base = plan.baseline.key if study.study.sampler == "ablation" else None
    base = base if base in arms else None
    # the group-sequential look reads every arm (dropped ones with the seeds they ran), as the report does
    wanted = set(arms) if rule_of(study).design in (GROUP_SEQUENTIAL, ELIMINATION) else set(state.live) | ({base} if base else set())
    state = decide(state, {a: results.get(a, {}) for a in wanted}, maximize=study.directions[0] == "maximize",
                   seeds_left=queue_next and used < len(study.study.seeds), rule=rule_of(study), baseline=base)
    ledger.set_race(ostudy, {**state.as_dict(), "decides_at": race_decides_at()})  # which point, and why (the page)
    stopped = set(arms) - set(state.live) if not state.decided else set(arms)
    ledger.cancel_queued(ostudy, stopped, f"racing settled the arm in round {state.round}")
    if not state.decided:
        ledger.queue(ostudy, study, plan.round(list(study.study.seeds), racing.first_round_seeds, state.round + 1, set(state.live)))
    return state


def describe(state: RaceState) -> str:
    """One line for the console when the race ends, naming the design that ran."""
    if state.design == ELIMINATION:
        last = state.path[-1] if state.path else {}
        why = last.get("stop") or "the race was stopped"
        pcs = f", P(within min_effect of the best) {state.pcs:.2f}" if state.pcs is not None else ""
        return (f"racing (fully sequential elimination, Kim & Nelson) decided after round {state.round} "
                f"({last.get('seeds', 0)} seeds): {why}; {state.leader} leads{pcs}; "
                f"{len(state.dropped)} arm(s) eliminated")
    if state.design == GROUP_SEQUENTIAL:
        pcs = f", P(within min_effect of the best) {state.pcs:.2f}" if state.pcs is not None else ""
        last = state.path[-1] if state.path else {}
        seeds, why = last.get("seeds", 0), last.get("stop") or "the race was stopped"
        return (f"racing (group-sequential, Haybittle-Peto spending) decided after round {state.round} ({seeds} seeds): "
                f"{why}; {state.leader} leads{pcs}; eps-best set {', '.join(state.eps_best)}; "
                f"{len(state.dropped)} arm(s) dropped")
    if state.path and not state.live and state.settled:
        calls = ", ".join(f"{a} {c}" for a, c in state.calls.items())
        return (f"racing (anytime, confidence sequences) settled after round {state.round} ({state.path[-1].get('seeds')} seeds): every arm's call "
                f"is known ({calls}); {state.leader} leads, {len(state.dropped)} arm(s) dropped")
    if len(state.live) <= 1:
        return f"racing (anytime) decided after round {state.round}: {state.leader} leads, {len(state.dropped)} arm(s) dropped"
    return (f"racing (anytime) ended after round {state.round} with the seeds spent: {len(state.live)} arm(s) still tied "
            f"({', '.join(state.live)}), {len(state.dropped)} dropped")
