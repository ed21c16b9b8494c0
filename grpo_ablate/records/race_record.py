"""The race's record: what a race stores on its study after each round, and how it is read back.

    from grpo_ablate.records.race_record import RaceState, calls_level
    RaceState.from_dict(trial_record.study_attrs(optuna_study).racing, arms)

study/racing.py decides a race (the policy: which arm leaves, when the race stops) and the ledger
writes the state it returns (`ledger.set_race`, `RaceState.as_dict`). The report reads that state
to show the race and to hold the answer's calls to the level the race left them (`calls_level`,
`race_guarantee`, `design_words`). Both import this module, which sits on the records floor beside
trial_record.py, below both: the report reads a race without importing the study, its ledger or
its launchers.

Stored per round, in `path` (one entry each): `round`, `seeds` (shared by the arms still in),
`leader`, `calls`, `live`, `settled`, `dropped`; a group-sequential look adds `level` (the
family-wise level it spent), `pcs`, `eps_best` and `stop`; an elimination look also `stage`,
`max_seeds`, `equivalent` and `guarantee` (the confidence, once the procedure stopped by its own
rule). A stored race without `design` is the anytime race of earlier versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["GROUP_SEQUENTIAL", "ANYTIME", "ELIMINATION", "ALPHA", "ELIMINATION_LEVEL", "Drop", "RaceState",
           "calls_level", "race_guarantee", "design_words"]

GROUP_SEQUENTIAL, ANYTIME, ELIMINATION = "group_sequential", "anytime", "elimination"  # racing.design
ALPHA = 0.05  # the family-wise level of exclusions and calls at the last look
# after an elimination race, the answer's calls and exclusions (calls_level): an eliminated arm stopped taking
# seeds when it looked worst, so its mean is biased low; on all-equal planted worlds of addition_rare the
# report's better/worse calls were then false in 9% of 300 races at 5%, 5% at 2%, 3% at 1%
# (benchmarks/sequential_frontier.py, part 4)
ELIMINATION_LEVEL = 0.01


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


@dataclass
class RaceState:
    """What the race knows after a round; `live` is in contention, `dropped` in drop order.

    `settled`: arms that stopped taking seeds because their call is known (anytime); `calls`: each
    arm's call against the baseline (the leader without one) after the last round; `path`: one
    entry per round (module docstring) for the report; `design`: which race ran; `pcs`, `eps_best`:
    the last look's selection (group_sequential, elimination).
    """

    round: int = 0
    live: list[str] = field(default_factory=list)
    dropped: list[Drop] = field(default_factory=list)
    leader: str | None = None
    decided: bool = False
    settled: list[str] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)
    path: list[dict[str, Any]] = field(default_factory=list)
    design: str = ANYTIME
    pcs: float | None = None
    eps_best: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "live": list(self.live), "leader": self.leader, "decided": self.decided,
                "dropped": [d.as_dict() for d in self.dropped], "settled": list(self.settled),
                "calls": dict(self.calls), "path": list(self.path), "design": self.design, "pcs": self.pcs,
                "eps_best": list(self.eps_best)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, arms: Sequence[str]) -> "RaceState":
        if not d:
            return cls(0, list(arms))
        drops = [Drop(x["arm"], int(x["round"]), str(x["reason"]),
                      None if x.get("p_value") is None else float(x["p_value"]), tuple(x.get("seeds", ())))
                 for x in d.get("dropped", [])]
        gone = {x.arm for x in drops}
        live = d.get("live")
        stored: Sequence[str] = live if isinstance(live, list) else arms
        return cls(int(d.get("round", 0)), [a for a in arms if a not in gone and a in stored], drops,
                   d.get("leader"), bool(d.get("decided")), list(d.get("settled") or []), dict(d.get("calls") or {}),
                   list(d.get("path") or []), str(d.get("design") or ANYTIME), d.get("pcs"), list(d.get("eps_best") or []))


def calls_level(race: Mapping[str, Any] | None) -> float:
    """The family-wise level the answer's calls and exclusions are held to after a race: the level
    the group-sequential race had spent at its last look. That is ALPHA when it ran to its planned
    seeds (so a race that never stops early gives the fixed-sample answer), but the strict early
    level when it stopped early (its probability reached the target, or one arm was left): testing
    at 5% at a look the race chose from the data is optional stopping (on the all-equal null of
    addition_rare with 48 planned seeds, 8 of 150 races then made a false better/worse call, none
    at the look's own level: benchmarks/sequential_frontier.py). ALPHA for no race, or the anytime
    race (its calls are the confidence sequences'). ELIMINATION_LEVEL after an elimination race (its
    arms stopped when they looked worst: see the constant)."""
    if isinstance(race, Mapping) and race.get("design") == ELIMINATION:
        return ELIMINATION_LEVEL
    if not isinstance(race, Mapping) or race.get("design") != GROUP_SEQUENTIAL:
        return ALPHA
    path = [r for r in race.get("path") or [] if isinstance(r, Mapping)]
    level = path[-1].get("level") if path else None
    return min(ALPHA, float(level)) if isinstance(level, (int, float)) and level > 0 else ALPHA


def race_guarantee(race: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An elimination race that stopped by its own rule (one configuration left, or the equivalence stop): its
    guarantee at the indifference zone, P(the configuration recommended is within min_effect of the best) >= the
    confidence, with the arms and seeds it ran and the equivalent set; None for any other race or none."""
    if not isinstance(race, Mapping) or race.get("design") != ELIMINATION:
        return None
    path = [r for r in race.get("path") or [] if isinstance(r, Mapping)]
    last = path[-1] if path else {}
    if not isinstance(last.get("guarantee"), (int, float)):
        return None
    arms = len(set(race.get("live") or []) | {d.get("arm") for d in race.get("dropped") or [] if isinstance(d, Mapping)})
    return {"probability": float(last["guarantee"]), "arms": arms, "seeds": int(last.get("seeds") or 0),
            "equivalent": list(last.get("equivalent") or []), "kept": list(last.get("live") or [])}


def design_words(race: Mapping[str, Any] | None) -> str:
    """One sentence for the page: which race ran and when it dropped an arm (a stored race without a
    design is the anytime race of earlier versions)."""
    design = race.get("design") if isinstance(race, Mapping) else None
    if design == ELIMINATION:
        return ("The race was Kim & Nelson's fully sequential elimination: an arm stopped taking seeds when the "
                "procedure eliminated it (P(the arm kept is the best) at least the confidence when the best leads "
                "by study.min_effect); an elimination decides where seeds go, it is not a call: the answer above "
                "reads every arm's seeds, its calls at family-wise 1% (an eliminated arm stopped when it looked "
                "worst).")
    if design == GROUP_SEQUENTIAL:
        return ("The race was group-sequential (Haybittle-Peto spending over the planned seeds): an arm was dropped "
                "when it left the min_effect-best set at the look's family-wise level, and the race stopped when "
                "one arm was left or the probability that the leader is within min_effect of the best reached "
                "the confidence.")
    return ("The race was anytime: an arm was dropped only when its confidence sequence against the leader (valid "
            "however often it is looked at) lay wholly below zero.")
