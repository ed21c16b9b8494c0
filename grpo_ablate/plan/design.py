"""The design of a study that is to decide: its arms, seeds, trial length and start, fitted to a budget, and
what it can resolve at that price.

    python -c "from grpo_ablate.plan.design import effect_for_seeds; print(effect_for_seeds(3, 4, span=3.0))"

`init` writes studies in two stages: a screen that costs no training (preflight/screen.py), then a confirm
stage that trains the arms the screen could not separate. This module sizes the confirm stage; it is pure
arithmetic over a price the caller supplies (`fit`'s `price`: what a candidate design costs as a multiple of
the full run, the high end of plan's estimate), so `init`, `plan` and the benchmarks size and word a design
the same way.

What a design can resolve is Bechhofer's indifference-zone figure: with k arms and n seeds per arm, the
smallest lead `effect` at which the best arm has the best mean with probability RACE_CONFIDENCE, when arms
vary between seeds with sd SEED_SD_SHARE of the reward's range, uncorrelated between arms (the CPU tables
measure 0.047-0.078 of the range: shared/guide/facts.md, round 4). The race (Kim & Nelson elimination) may
stop sooner; it never needs more than the planned seeds to give the report's answer. Nothing is tested
from fewer than MIN_SEEDS seeds (stats/model.py), so no design with fewer is proposed or written.

The arithmetic a budget faces: a trial that is to stand for the run must end past the run's learning-rate
warmup. From step 0 that is at least `warmup + MIN_STEPS_PAST_WARMUP` steps a trial; where the warmup is a
tenth of the run, two arms x three seeds cost 0.6x the run before anything else. `fit` tries, in the order
the caller allows: every trial from step 0 (the answer is about the run), then the arms branched at the end
of the warmup, one prefix per seed counted once (the answer is about G from the branch step on, after the
baseline's warmup: docs/your-own-run.md says what that changed on the CPU benchmark), and, when neither
fits with MIN_SEEDS seeds, the screen alone (no confirm stage), with what the confirm stage would cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Literal

from grpo_ablate.core.cost import fmt_multiple
from grpo_ablate.stats.model import MIN_SEEDS
from grpo_ablate.stats.min_effect import REWARD_MIN_EFFECT
from grpo_ablate.stats.selection import bechhofer_pcs
from grpo_ablate.plan.branching import BranchError, branch_step
from grpo_ablate.plan.cells import study_plan
from grpo_ablate.core.vocab import PREFIX_ROLE

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["NEIGHBOUR_RATIO", "SECOND_TEMPERATURES", "spanning_generations", "second_temperature", "SEED_SD_SHARE", "RACE_CONFIDENCE", "MIN_SEEDS", "MIN_STEPS_PAST_WARMUP", "TRIAL_STEPS_CAP", "Start",
           "Shape", "Fitted", "Resolution", "seeds_to_decide", "effect_for_seeds", "critical_shift", "resolution",
           "fit", "trial_bounds", "reward_span", "study_resolution", "resolution_line"]

# Arms vary between seeds with a held-out reward sd of at least this share of the reward's range
# (0.05-0.08 over 40 seeds on the CPU tasks, stats/min_effect.py), uncorrelated between arms.
SEED_SD_SHARE = 0.05
RACE_CONFIDENCE = 0.95  # P(the arm kept is the best) at the indifference zone; Bechhofer's PCS
MIN_STEPS_PAST_WARMUP = 10  # a trial trains at least this many optimizer steps after the run's learning-rate warmup
TRIAL_STEPS_CAP = 100  # the longest trial (or branch) a fitted design trains: budget left over buys no more steps

NEIGHBOUR_RATIO = 1.5  # confirm arms are at least this far apart in G (14 vs 16 is a neighbour: no arm of its own)
SECOND_TEMPERATURES = (0.7, 1.0)  # a second temperature arm: 0.7 against a default of 1.0 (or above 0.85), else 1.0

Start = Literal["scratch", "branch"]  # every trial from step 0, or the arms branched at the end of the warmup


def spanning_generations(base: int, feasible: list[int]) -> list[int]:
    """The confirm stage's G arms: the baseline, and the feasible G nearest half and twice it (log ratio), never
    within NEIGHBOUR_RATIO of an arm already chosen; where one side has none, the next value out on the other side.
    Neighbours (14 against 16) cost a study to tell apart and would change nothing a user does."""
    chosen = [base]

    def far(g: int) -> bool:
        return all(max(g, c) / min(g, c) >= NEIGHBOUR_RATIO for c in chosen)

    for target in (base / 2, base * 2, base / 4, base * 4):
        if len(chosen) == 3:
            break
        pool = [g for g in feasible if far(g) and (g < base) == (target < base)]
        if pool:
            chosen.append(min(pool, key=lambda g: (abs(math.log(g / target)), g)))
    return [base, *sorted(chosen[1:])]


def second_temperature(temperature: float) -> float:
    """The temperature of the second temperature arm, where the recipe's own is a default: the usual alternative
    on the other side of 0.85 (practitioners move between 0.7 and 1.0 as G grows)."""
    return SECOND_TEMPERATURES[0] if temperature >= 0.85 else SECOND_TEMPERATURES[1]


@lru_cache(maxsize=None)
def critical_shift(arms: int) -> float:
    """The standardised lead s* = effect x sqrt(seeds) / sd at which Bechhofer's PCS for `arms` arms is exactly
    RACE_CONFIDENCE (stats.selection.bechhofer_pcs depends on effect, seeds and sd through that one number and
    grows with it), so the seeds an effect needs and the effect seeds resolve are each one line of arithmetic."""
    # lazy: every command imports this module (commands/init.py, plan_words.py); scipy costs ~0.6 s of each command's start
    from scipy.optimize import brentq

    return float(brentq(lambda shift: bechhofer_pcs(arms, 1, shift, 1.0) - RACE_CONFIDENCE, 1e-3, 20.0, xtol=1e-9))


def seeds_to_decide(arms: int, span: float = 1.0, min_effect: float | None = None) -> int:
    """Seeds per arm Bechhofer's design needs to pick an arm within min_effect of the best of `arms` with probability
    RACE_CONFIDENCE (sd SEED_SD_SHARE of the reward's range `span`; min_effect REWARD_MIN_EFFECT of it unless given):
    stats.selection.bechhofer_seeds' answer, never fewer than MIN_SEEDS, the fewest anything is tested from."""
    effect = min_effect if min_effect is not None else REWARD_MIN_EFFECT * span
    if arms < 2:
        return MIN_SEEDS
    return max(MIN_SEEDS, math.ceil((critical_shift(arms) * SEED_SD_SHARE * span / effect) ** 2 - 1e-9))


def effect_for_seeds(arms: int, seeds: int, span: float = 1.0) -> float:
    """The smallest lead (reward units, rounded up to three significant digits) Bechhofer's design tells apart from
    `seeds` seeds per arm among `arms` with probability RACE_CONFIDENCE (sd as seeds_to_decide assumes)."""
    exact = critical_shift(arms) * SEED_SD_SHARE * span / math.sqrt(seeds)
    step = 10.0 ** (math.floor(math.log10(exact)) - 2)  # three significant digits, rounded up: never below what it needs
    return round(math.ceil(exact / step - 1e-9) * step, 12)


@dataclass(frozen=True)
class Resolution:
    """What a design tells apart: a lead of `effect` (reward units) or more among `arms` arms from `seeds` seeds,
    with probability RACE_CONFIDENCE, on a reward whose range is `span`."""

    effect: float
    span: float
    arms: int
    seeds: int

    def words(self, share: str | None = None) -> str:
        """"at 0.5x your run this study tells apart differences of 0.08 or more in held-out reward (2.7 % of the
        range)"; `share`: the price as written by fmt_multiple, when known."""
        head = f"at {share} your run this study" if share else "this study"
        return (f"{head} tells apart differences of {self.effect:.3g} or more in held-out reward "
                f"({self.effect / self.span:.1%} of the range {self.span:g}): with {self.seeds} seeds per arm it keeps "
                f"the best of {self.arms} arms with probability {RACE_CONFIDENCE:g} when it leads by that much (seed-to-"
                f"seed sd assumed {SEED_SD_SHARE:.0%} of the range, as measured on the CPU tasks)")


def resolution(arms: int, seeds: int, span: float) -> Resolution | None:
    """The design's Resolution; None when it tests nothing (fewer than 2 arms, or fewer than MIN_SEEDS seeds)."""
    if arms < 2 or seeds < MIN_SEEDS:
        return None
    return Resolution(effect_for_seeds(arms, seeds, span), span, arms, seeds)


@dataclass(frozen=True)
class Shape:
    """A candidate confirm stage: `seeds` per arm, trials of `steps` optimizer steps (a branch's, from the branch
    step, when `start` is "branch"). `confirm` False: the screen alone (seeds and steps then say what it would run)."""

    seeds: int
    steps: int
    start: Start
    confirm: bool = True


@dataclass(frozen=True)
class Fitted:
    """`fit`'s answer: the shape written, its price (a multiple of the full run, the high end), the min_effect it is
    written with, whether that is what its seeds resolve (`resolved`, below the one asked for) and, for the screen
    alone, the cheapest confirm stage that would decide (`wanted`, with its price)."""

    shape: Shape
    price: float
    min_effect: float
    resolved: bool
    wanted: tuple[Shape, float] | None = None


def trial_bounds(start: Start, full_steps: int, warmup: int) -> tuple[int, int] | None:
    """(shortest, longest) trial the design may write: past the warmup by MIN_STEPS_PAST_WARMUP (from step 0), or a
    branch of at least that many steps after it; at most TRIAL_STEPS_CAP past the start. None when a branch cannot
    be placed (no warmup, or none that leaves room for a branch)."""
    if start == "branch":
        if not 0 < warmup < full_steps - MIN_STEPS_PAST_WARMUP:
            return None
        return MIN_STEPS_PAST_WARMUP, max(MIN_STEPS_PAST_WARMUP, min(full_steps - warmup, TRIAL_STEPS_CAP))
    shortest = min(full_steps, warmup + MIN_STEPS_PAST_WARMUP)
    return shortest, min(full_steps, max(TRIAL_STEPS_CAP, shortest))


def fit(*, arms: int, span: float, min_effect: float | None, budget: float, full_steps: int, warmup: int,
        starts: tuple[Start, ...], price: Callable[[Shape], float]) -> Fitted:
    """The design written for `budget` (a multiple of the full run): for the first start in `starts` at which
    MIN_SEEDS seeds fit, the most seeds up to what min_effect needs (Bechhofer), then the longest trial that fits.

    `min_effect` None: the default (REWARD_MIN_EFFECT of `span`), and a design with fewer seeds than it needs is
    written at the effect its seeds resolve (`resolved`). A min_effect given must be resolved: a start whose budget
    buys fewer seeds than it needs does not fit. When no start fits, the screen alone, with the cheapest confirm
    stage that would decide (`wanted`) and its price. `price` must grow with seeds and steps (it does: every trial
    and every prefix costs something)."""
    asked = min_effect if min_effect is not None else REWARD_MIN_EFFECT * span
    need = seeds_to_decide(arms, span, asked)
    cheapest: tuple[Shape, float] | None = None
    for start in starts:
        bounds = trial_bounds(start, full_steps, warmup)
        if bounds is None:
            continue
        shortest, longest = bounds
        floor = MIN_SEEDS if min_effect is None else need
        low = price(Shape(floor, shortest, start))
        if cheapest is None or low < cheapest[1]:
            cheapest = (Shape(floor, shortest, start), low)
        if low > budget:
            continue
        seeds = _most(floor, need, budget, _by_seeds(price, shortest, start))
        steps = _most(shortest, longest, budget, _by_steps(price, seeds, start))
        shape = Shape(seeds, steps, start)
        effect = asked if seeds >= need else max(asked, effect_for_seeds(arms, seeds, span))
        return Fitted(shape, price(shape), effect, seeds < need)
    if cheapest is None:
        raise ValueError(f"no start of {starts} can be placed in a run of {full_steps} steps with a {warmup}-step warmup")
    screen = replace(cheapest[0], confirm=False)  # the confirm stage it would run, written switched off
    return Fitted(screen, price(screen), asked, False, wanted=cheapest)


def _by_seeds(price: Callable[[Shape], float], steps: int, start: Start) -> Callable[[int], float]:
    return lambda seeds: price(Shape(seeds, steps, start))


def _by_steps(price: Callable[[Shape], float], seeds: int, start: Start) -> Callable[[int], float]:
    return lambda steps: price(Shape(seeds, steps, start))


def _most(low: int, high: int, budget: float, cost: Callable[[int], float]) -> int:
    """The largest x in [low, high] with cost(x) <= budget (cost grows with x; cost(low) <= budget): bisection."""
    if cost(high) <= budget:
        return high
    lo, hi = low, high  # cost(lo) fits, cost(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cost(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def reward_span(study: "StudyConfig") -> float:
    """The held-out reward's range: the study's reward weights summed (each reward scoring in [0, 1]); 1 for a
    built-in task's own reward."""
    weights = [abs(float(r.weight)) for r in study.rewards]
    return sum(weights) if weights and sum(weights) > 0 else 1.0


def study_resolution(study: "StudyConfig") -> Resolution | None:
    """What the study's plan resolves (plan, init and the report say it): its arms (those the screen kept, when it
    ran) and its planned seeds; None for a study that tests nothing (no plan, one arm, fewer than MIN_SEEDS seeds)."""
    arms = {c.arm.key for c in study_plan(study) if c.role != PREFIX_ROLE}
    return resolution(len(arms), len(set(study.study.seeds)), reward_span(study))


def resolution_line(study: "StudyConfig", share: tuple[float, float] | None) -> str | None:
    """"Resolves: at 0.42x your run this study tells apart ..." for `plan` and the report; None when it tests
    nothing."""
    res = study_resolution(study)
    if res is None:
        return None
    line = "Resolves: " + res.words(fmt_multiple(*share) if share else None)
    try:
        step = branch_step(study)
    except BranchError:  # plan's price line says why the branch point cannot be placed
        step = None
    if step is not None:
        line += (f"; the arms branch at step {step}, so this is about G from step {step} on, after training to there "
                 f"at the baseline's G (on the CPU benchmark branching past a warmup moved the answer towards the "
                 f"baseline's G: as often within 5% of the best as from step 0, less often within 2%: "
                 f"docs/your-own-run.md)")
    return line
