"""Racing for planned studies (grid, ablation): spend seeds only on arms still in contention.

    study: {sampler: ablation, seeds: [0, 1, 2, 3, 4, 5], racing: {confidence: 0.95, first_round_seeds: 2}}

Round 1 runs every arm on the first `first_round_seeds` seeds. After each round the arm with
the best mean (over the seeds every live arm has) leads; an arm is dropped once a paired
one-sided t-test over the seeds it shares with the leader says it is worse at the stated
confidence. The next round adds one seed to every arm still in contention. The race is decided
when one arm is left, and ends anyway when the seeds are spent. Each drop is recorded in the
study user attr `racing` (RACING_ATTR) with its round and reason; the report lists them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.vocab import RACING_ATTR

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["Drop", "RaceState", "decide", "paired_worse_p", "arm_results", "advance", "describe"]



@dataclass(frozen=True)
class Drop:
    arm: str
    round: int
    reason: str
    p_value: float | None  # None: dropped without a test (no result to race on)
    seeds: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "round": self.round, "reason": self.reason, "p_value": self.p_value,
                "seeds": list(self.seeds)}


@dataclass
class RaceState:
    """What the race knows after a round; `live` is in contention, `dropped` in drop order."""

    round: int = 0
    live: list[str] = field(default_factory=list)
    dropped: list[Drop] = field(default_factory=list)
    leader: str | None = None
    decided: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "live": list(self.live), "leader": self.leader, "decided": self.decided,
                "dropped": [d.as_dict() for d in self.dropped]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, arms: Sequence[str]) -> "RaceState":
        if not d:
            return cls(0, list(arms))
        drops = [Drop(x["arm"], int(x["round"]), str(x["reason"]),
                      None if x.get("p_value") is None else float(x["p_value"]), tuple(x.get("seeds", ())))
                 for x in d.get("dropped", [])]
        gone = {x.arm for x in drops}
        return cls(int(d.get("round", 0)), [a for a in arms if a not in gone], drops, d.get("leader"),
                   bool(d.get("decided")))


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


def decide(state: RaceState, results: Mapping[str, Mapping[int, float]], *, maximize: bool, confidence: float,
           seeds_left: bool) -> RaceState:
    """Close a round: name the leader, drop the arms clearly worse than it, say whether the race is over.

    `results`: arm key -> {seed: objective value} for the arms still in contention. An arm
    with no result on any seed (every trial ran out of memory or failed) is dropped untested:
    there is nothing to compare, and a placeholder zero must not stand in for a measurement.
    """
    rnd = state.round + 1
    live = [a for a in state.live if results.get(a)]
    if not live:
        return RaceState(rnd, list(state.live), list(state.dropped), state.leader, not seeds_left)
    shared = set.intersection(*(set(results[a]) for a in live))
    basis = shared if len(shared) >= 1 else None

    def mean(a: str) -> float:
        vals = [results[a][s] for s in (basis or results[a])]
        return statistics.fmean(vals)

    leader = (max if maximize else min)(live, key=mean)
    dropped = list(state.dropped)
    dropped += [Drop(a, rnd, "no result on any seed (every trial ran out of memory or failed): nothing to race on",
                     None, ()) for a in state.live if a not in live]
    keep = [leader]
    for a in live:
        if a == leader:
            continue
        common = sorted(set(results[a]) & set(results[leader]))
        p = paired_worse_p([results[leader][s] for s in common], [results[a][s] for s in common], maximize)
        if p < 1.0 - confidence:
            gap = mean(a) - mean(leader)
            dropped.append(Drop(a, rnd, f"worse than {leader} by {gap:+.4g} on {len(common)} shared seed(s) "
                                       f"(paired one-sided t-test p={p:.3g} < {1.0 - confidence:.3g})",
                                p, tuple(common)))
        else:
            keep.append(a)
    live_sorted = [a for a in state.live if a in keep]
    decided = len(live_sorted) <= 1 or not seeds_left
    return RaceState(rnd, live_sorted, dropped, leader, decided)


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
    state = RaceState.from_dict(ostudy.user_attrs.get(RACING_ATTR), arms)
    if state.decided:
        return state
    used = racing.first_round_seeds + state.round
    results = arm_results(ostudy)
    state = decide(state, {a: results.get(a, {}) for a in state.live}, maximize=study.directions[0] == "maximize",
                   confidence=racing.confidence, seeds_left=queue_next and used < len(study.study.seeds))
    ostudy.set_user_attr(RACING_ATTR, state.as_dict())
    if not state.decided:
        ledger.queue(ostudy, study, racing_round(study, state.round + 1, set(state.live)))
    return state


def describe(state: RaceState) -> str:
    """One line for the console when the race ends."""
    if len(state.live) <= 1:
        return f"racing decided after round {state.round}: {state.leader} leads, {len(state.dropped)} arm(s) dropped"
    return (f"racing ended after round {state.round} with the seeds spent: {len(state.live)} arm(s) still tied "
            f"({', '.join(state.live)}), {len(state.dropped)} dropped")
