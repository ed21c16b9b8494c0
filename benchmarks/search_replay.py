"""Replay a search strategy against the benchmark's grid table, as a real study would see it.

    python benchmarks/search_efficiency.py --replays 30

Each replay is one study run by the real Optuna sampler (and pruner) through study/search/encoding.py.
Asking for an arm costs one trial and returns one of its seeds' results from the table (each
arm's seeds in an order drawn by the replay's seed); a pruned trial costs its share of the
completions. Planned strategies (the full grid, racing) replay the same way. Compute is in
units of the full grid (every arm on every seed = 1.0).
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from grpo_ablate.study.search.encoding import ORDINAL, suggest_arm
from grpo_ablate.study.search.fidelity import ComputeClock, quantum
from grpo_ablate.records.race_record import RaceState
from grpo_ablate.study.racing import decide
from grpo_ablate.study.search.samplers import build_pruner, build_sampler
from grpo_ablate.core.space import BatchShape, FeasiblePair, FeasibleSpace
from grpo_ablate.core.vocab import Arm
from search_table import GridTable

__all__ = ["Strategy", "Trace", "replay", "table_space", "summarise", "Summary"]


@dataclass(frozen=True)
class Strategy:
    name: str
    kind: str = "adaptive"  # adaptive | grid | racing
    sampler: str = "random"  # random | tpe | gp
    encoding: str = ORDINAL
    pruner: str = "none"  # none | median | hyperband
    fidelity: str = "compute"  # compute | steps: the step a pruner compares at
    n_trials: int = 32
    confidence: float = 0.95  # racing
    first_round_seeds: int = 2  # racing


@dataclass
class Trace:
    """(compute spent so far, recommended arm) after every trial; the last one is the answer."""

    points: list[tuple[float, Arm | None]] = field(default_factory=list)
    dropped: list[Any] = field(default_factory=list)

    @property
    def final(self) -> Arm | None:
        return self.points[-1][1] if self.points else None

    @property
    def compute(self) -> float:
        return self.points[-1][0] if self.points else 0.0


def table_space(table: GridTable) -> tuple[FeasibleSpace, list[float]]:
    """The feasible space and temperature list the table's arms span."""
    pairs = sorted({(a.num_generations, a.generation_batch_size) for a in table.arms})
    unit = min(b for _, b in pairs)
    feasible = tuple(FeasiblePair(g, b, b // unit, b // g) for g, b in pairs)
    space = FeasibleSpace(BatchShape(1, unit), feasible, (), len({g for g, _ in pairs}) < len(pairs))
    return space, sorted({a.temperature for a in table.arms})


def _best(observed: dict[Arm, list[float]], maximize: bool) -> Arm | None:
    means = {a: statistics.fmean(v) for a, v in observed.items() if v}
    if not means:
        return None
    return (max if maximize else min)(sorted(means), key=lambda a: means[a])


def replay(table: GridTable, strategy: Strategy, seed: int, objective: str, maximize: bool) -> Trace:
    rng = random.Random(seed)
    seeds = list(table.seeds)
    if strategy.kind == "grid":
        return _replay_grid(table, rng.sample(seeds, len(seeds)), objective, maximize)
    if strategy.kind == "racing":
        return _replay_racing(table, strategy, rng.sample(seeds, len(seeds)), objective, maximize)
    return _replay_adaptive(table, strategy, seed, rng, objective, maximize)


def _grid_cost(table: GridTable) -> float:
    return float(len(table.arms) * len(table.seeds))


def _replay_grid(table: GridTable, order: list[int], objective: str, maximize: bool) -> Trace:
    trace, observed, spent = Trace(), {}, 0.0  # type: ignore[var-annotated]
    for s in order:
        for arm in table.arms:
            observed.setdefault(arm, []).append(table.results(arm, objective)[s])
            spent += 1
            trace.points.append((spent / _grid_cost(table), _best(observed, maximize)))
    return trace


def _replay_racing(table: GridTable, strategy: Strategy, order: list[int], objective: str, maximize: bool) -> Trace:
    trace, spent = Trace(), 0.0
    arms = {a.key: a for a in table.arms}
    state = RaceState(0, list(arms))
    results: dict[str, dict[int, float]] = {k: {} for k in arms}
    used = strategy.first_round_seeds
    batch = order[:used]
    while True:
        for s in batch:
            for key in state.live:
                results[key][s] = table.results(arms[key], objective)[s]
                spent += 1
                observed = {arms[k]: list(results[k].values()) for k in state.live}
                trace.points.append((spent / _grid_cost(table), _best(observed, maximize)))
        state = decide(state, {k: results[k] for k in state.live}, maximize=maximize,
                       confidence=strategy.confidence, seeds_left=used < len(order))
        if state.decided:
            break
        batch = [order[used]]
        used += 1
    trace.dropped = state.dropped
    if state.leader is not None and trace.points:
        trace.points[-1] = (trace.points[-1][0], arms[state.leader])
    return trace


def _replay_adaptive(table: GridTable, strategy: Strategy, seed: int, rng: random.Random, objective: str,
                     maximize: bool) -> Trace:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space, temps = table_space(table)
    seeds = list(table.seeds)
    perm = {a: rng.sample(seeds, len(seeds)) for a in table.arms}
    largest = max(a.generation_batch_size for a in table.arms)
    budget = int(statistics.median(float(r.metrics.get("completions") or 0) for r in table.rows)) or None
    q = quantum(largest, budget)
    pruner = build_pruner(strategy.pruner, budget, q) if strategy.fidelity == "compute" else _step_pruner(strategy, table)
    # A fixed name: Hyperband's brackets hash the study's name (Optuna's default is random).
    study = optuna.create_study(study_name=f"search-replay-{seed}", direction="maximize" if maximize else "minimize",
                                sampler=build_sampler(strategy.sampler, seed, n_trials=strategy.n_trials),
                                pruner=pruner)
    counts: dict[Arm, int] = {}
    observed: dict[Arm, list[float]] = {}
    trace, spent = Trace(), 0.0
    for _ in range(strategy.n_trials):
        trial = study.ask()
        arm = suggest_arm(trial, space, temps, temps[0], strategy.encoding)
        k = counts.get(arm, 0)
        counts[arm] = k + 1
        row = table.row(arm, perm[arm][k % len(seeds)])
        assert row is not None, arm
        value = row.metrics.get(objective)
        cost, pruned = 1.0, False
        if strategy.pruner != "none":
            clock = ComputeClock(q)
            total = float(row.metrics.get("completions") or 1)
            for i, (done, partial) in enumerate(row.curve):
                v = partial.get(objective)
                if v is None:
                    continue
                steps = clock.crossed_at(done) if strategy.fidelity == "compute" else [i + 1]
                for step in steps:
                    trial.report(float(v), step)
                if steps and trial.should_prune():
                    cost, pruned = done / total, True
                    break
        spent += cost
        if pruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, float(value))
            observed.setdefault(arm, []).append(float(value))
        trace.points.append((spent / _grid_cost(table), _best(observed, maximize)))
    return trace


def _step_pruner(strategy: Strategy, table: GridTable) -> Any:
    """The old pruner: steps are curve points (optimizer steps), whatever the compute behind them."""
    import optuna

    n = max(len(r.curve) for r in table.rows)
    if strategy.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=max(1, n // 5))
    if strategy.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, n // 8) * 2 // 2 or 1, max_resource=n)
    return optuna.pruners.NopPruner()


@dataclass
class Summary:
    name: str
    median_compute_to_5pct: float | None  # None: most replays never got within 5 % and stayed
    reached_5pct: float  # share of replays that did
    right_answer: float  # share whose final answer is the true best or statistically tied with it
    mean_compute: float

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _tied_or_best(table: GridTable, arm: Arm | None, best: Arm, objective: str, alpha: float = 0.05) -> bool:
    from scipy import stats

    if arm is None:
        return False
    if arm == best:
        return True
    a, b = table.results(arm, objective), table.results(best, objective)
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return False
    diffs = [a[s] - b[s] for s in common]
    if statistics.pstdev(diffs) == 0.0:
        return diffs[0] == 0.0
    return float(stats.ttest_rel([a[s] for s in common], [b[s] for s in common]).pvalue) >= alpha


def summarise(table: GridTable, name: str, traces: list[Trace], objective: str, maximize: bool,
              within: float = 0.05) -> Summary:
    means = table.arm_means(objective)
    best = (max if maximize else min)(sorted(means), key=lambda a: means[a])
    target = means[best] - within * abs(means[best]) if maximize else means[best] + within * abs(means[best])

    def good(arm: Arm | None) -> bool:
        return arm is not None and (means[arm] >= target if maximize else means[arm] <= target)

    reach: list[float] = []
    for tr in traces:
        first = None
        for c, arm in tr.points:  # the compute from which the answer stays within 5 %
            if good(arm):
                first = c if first is None else first
            else:
                first = None
        reach.append(first if first is not None else float("inf"))
    reach.sort()
    median = reach[len(reach) // 2] if reach else float("inf")
    right = sum(_tied_or_best(table, tr.final, best, objective) for tr in traces) / max(1, len(traces))
    return Summary(name, None if median == float("inf") else median,
                   sum(r != float("inf") for r in reach) / max(1, len(reach)), right,
                   statistics.fmean(tr.compute for tr in traces) if traces else 0.0)
