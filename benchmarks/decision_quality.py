"""Decision quality per unit of compute: P(recommendation within min_effect of the best) and regret against
what each design spends, on planted-truth worlds built from the committed tables.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/decision_quality.py --json benchmarks/data/decision_quality.json
    python benchmarks/decision_quality.py --replays 10                      # a quick look
    python benchmarks/decision_quality.py --tasks addition_mixed --designs "screen + confirm" \
        --worlds "one dominated (-4 min_effect)" "screen-marked dominated (-4 min_effect)"  # where the seeds go

Designs are plug-ins (`Design`: a name and `run(replay) -> Decision`); `DESIGNS` lists them and a new one is
one more entry:
- keep the recipe's G: no study; the baseline is the answer;
- fixed Bechhofer: every arm on the seeds Bechhofer's paired design needs for P(correct selection) 0.90 at
  the task's paired sd, its best mean the answer;
- the races (study/racing.py, round by round as a study runs them): group-sequential (the default) and
  anytime, capped at Bechhofer's seeds, the report's single recommendation on what they ran; elimination
  (KN++, stats/elimination.py), the answer the cheapest arm it kept;
- Optuna's SuccessiveHalvingPruner and HyperbandPruner, driven for real: each trial of each arm x seed
  reports its held-out reward at the table's evaluation points (the trial's real curve, its mean shape
  scaled to the planted mean) and stops where the pruner says; the answer is the arm whose completed trials
  have the best mean, with Bechhofer's seeds per arm as the budget;
- screen + confirm: `ScreenConfirm(screen)`, a screen that drops arms before any training (a pure function
  of what the screen measures, `Screen`), then the elimination race on the rest (or the group-sequential
  one). `SCREEN` is the study area's rule (preflight/screen_rule.drops) on the real screen of each task's
  starting model (benchmarks/data/screen_points.json); None leaves the entries out. "budget 0.5": the confirm
  stage sized as `init` sizes it to a budget (the most seeds it buys, at least 3), the budget half the fixed
  design's compute: what a study given half of what Bechhofer's design costs gets.

Compute is measured in trial-seconds at each arm's measured time per trial on the table's machine (a
pruned trial counts its share of the curve it ran); the table gives it as a share of the fixed Bechhofer
design's. Worlds (benchmarks/worlds.py): as measured; screen-marked dominated (the arms the real screen drops
planted 4 x min_effect behind); one dominated (a random arm); ties on the reward grid; all equal; the
least-favourable configuration. Regret: the best planted mean minus the recommended arm's.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import optuna

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from worlds import (ALL_EQUAL, AS_MEASURED, DOMINATED, LFC, SCREEN_DOMINATED, TIES, World, curves, draw,  # noqa: E402
                    paired_sd, screen_drops, seconds, tables)
from grpo_ablate.stats.elimination import eliminate  # noqa: E402
from grpo_ablate.stats.model import MIN_SEEDS  # noqa: E402
from grpo_ablate.stats.selection import bechhofer_seeds, select  # noqa: E402
from grpo_ablate.records.race_record import RaceState  # noqa: E402
from grpo_ablate.study.racing import Rule, decide  # noqa: E402

__all__ = ["Replay", "Decision", "Design", "Keep", "FixedBechhofer", "Race", "Elimination", "Pruned", "ScreenConfirm",
           "Screen", "SCREEN", "designs", "replay_design", "main"]

optuna.logging.set_verbosity(optuna.logging.ERROR)
DRAWS = 2000  # the posterior's Monte Carlo draws in the report's answers here
TARGET = 0.90  # Bechhofer's P(correct selection) for the fixed design and the budgets


@dataclass
class Replay:
    """What a design sees of one planted world: the values (up to `cap` seeds per arm), each trial's curve, each
    arm's cost per trial; and what it is judged on (the world's truth)."""

    world: World
    me: float
    cap: int
    bechhofer: int  # seeds per arm of the fixed design (and the budget of the designs that need one)
    curve: Callable[[str, int], list[tuple[float, float]]]  # (arm, seed) -> [(completions, reward)], the last the value
    cost: dict[str, float]  # arm -> seconds per trial
    task: Any = None  # the table's task (what a screen reads its measurements of)
    planned: int | None = None  # the most seeds per arm a budget buys (a race plans no more); None: the design's own

    @property
    def arms(self) -> list[str]:
        return list(self.world.values)


@dataclass
class Decision:
    recommended: str
    compute: float  # trial-seconds spent
    seeds: dict[str, float] = field(default_factory=dict)  # trials (a pruned one: its share) per arm


class Design(Protocol):
    name: str

    def run(self, r: Replay) -> Decision: ...


def _spent(r: Replay, seeds: dict[str, float]) -> float:
    return float(sum(n * r.cost[a] for a, n in seeds.items()))


@dataclass
class Keep:
    """Keep the recipe's G: no study at all."""

    name: str = "keep the recipe's G"

    def run(self, r: Replay) -> Decision:
        return Decision(r.world.baseline, 0.0, {})


@dataclass
class FixedBechhofer:
    """Every arm on Bechhofer's seeds (P(correct selection) TARGET at the indifference zone), the best mean chosen."""

    name: str = "fixed Bechhofer design"

    def run(self, r: Replay) -> Decision:
        n = r.bechhofer
        means = {a: float(np.mean([r.world.values[a][s] for s in range(n)])) for a in r.arms}
        seeds = {a: float(n) for a in r.arms}
        return Decision(max(sorted(means), key=lambda a: means[a]), _spent(r, seeds), seeds)


@dataclass
class Race:
    """A race of study/racing.py run round by round as a study runs it (one seed per round after the first),
    capped at Bechhofer's seeds; the report's single recommendation on what ran."""

    design: str
    confidence: float = 0.95
    first: int = 3
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.design.replace('_', '-')} race"

    def run(self, r: Replay) -> Decision:
        cap = min(r.planned or r.bechhofer, r.bechhofer)
        rule = Rule(min_effect=r.me, confidence=self.confidence, design=self.design, max_seeds=cap, first=self.first,
                    order=tuple(range(cap)))
        state, used = RaceState(0, r.arms), self.first
        seen: dict[str, dict[int, float]] = {a: {} for a in r.arms}
        while True:
            for a in state.live:
                for s in range(min(used, cap)):
                    seen[a].setdefault(s, r.world.values[a][s])
            state = decide(state, {a: v for a, v in seen.items() if v}, maximize=True, seeds_left=used < cap,
                           rule=rule, baseline=r.world.baseline)
            if state.decided:
                break
            used += 1
        sel = select(seen, r.me, draws=DRAWS, reference=r.world.baseline, confidence=self.confidence,
                     costs=r.cost)
        seeds = {a: float(len(v)) for a, v in seen.items()}
        return Decision(str(sel.recommended), _spent(r, seeds), seeds)


@dataclass
class Elimination:
    """The elimination race (KN++) as `init` writes it (confidence 0.95, a first stage of 3 seeds, planned seeds
    Bechhofer's for P 0.95): the procedure on the world's table replays exactly what the race reads seed by seed
    (tests/test_racing.py); the answer is the cheapest arm it kept (its survivor, or its equivalent set), or, when
    it ran out of seeds, the report's recommendation on what ran."""

    confidence: float = 0.95
    n0: int = 3
    name: str = "elimination race (KN++)"

    def run(self, r: Replay) -> Decision:
        sd, k = paired_sd(r.task), len(r.task.arms)
        own = bechhofer_seeds(k, r.me, sd, self.confidence)  # planned for min_effect; a budget may buy fewer
        cap = max(self.n0, min(r.planned or own, own))
        table = {a: {s: r.world.values[a][s] for s in range(cap)} for a in r.arms}
        e = eliminate(table, delta=r.me, alpha=1 - self.confidence, n0=self.n0, order=list(range(cap)), cap=cap)
        ran = {a: (e.eliminated[a][1] if a in e.eliminated else (e.seeds if e.stopped else cap)) for a in r.arms}
        seen = {a: {s: table[a][s] for s in range(ran[a])} for a in r.arms}
        chosen = list(e.live) if e.stopped else []
        sel = select(seen, r.me, draws=DRAWS, reference=r.world.baseline, confidence=self.confidence, costs=r.cost,
                     chosen=chosen)
        seeds = {a: float(n) for a, n in ran.items()}
        return Decision(str(sel.recommended), _spent(r, seeds), seeds)


@dataclass
class Pruned:
    """An Optuna pruner driven over replayed curves: trials enqueued arm by arm, seed after seed (Bechhofer's seeds
    per arm), each reporting its held-out reward at every evaluation point after the start."""

    kind: str  # "successive halving" | "hyperband"
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"Optuna {self.kind} pruner"

    def _pruner(self, steps: int) -> optuna.pruners.BasePruner:
        if self.kind == "hyperband":
            return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=steps, reduction_factor=3)
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)

    def run(self, r: Replay) -> Decision:
        n = r.bechhofer
        points = r.curve(r.arms[0], 0)[1:]
        # A fixed name: Hyperband puts a trial in a bracket by a hash of the study's name and the trial's
        # number, and Optuna's default name is random, so the figures would change from run to run.
        study = optuna.create_study(study_name="decision-quality-replay", direction="maximize",
                                    pruner=self._pruner(len(points)), sampler=optuna.samplers.RandomSampler(seed=0))
        finals: dict[str, list[float]] = {a: [] for a in r.arms}
        seeds = {a: 0.0 for a in r.arms}
        for s in range(n):
            for a in r.arms:
                trial = study.ask()
                curve = r.curve(a, s)[1:]
                total = curve[-1][0]
                for step, (x, y) in enumerate(curve, start=1):
                    trial.report(y, step)
                    if step < len(curve) and trial.should_prune():
                        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                        seeds[a] += x / total
                        break
                else:
                    study.tell(trial, curve[-1][1])
                    finals[a].append(curve[-1][1])
                    seeds[a] += 1.0
        done = {a: float(np.mean(v)) for a, v in finals.items() if v}
        rec = max(sorted(done), key=lambda a: done[a]) if done else r.world.baseline
        return Decision(rec, _spent(r, seeds), seeds)


Screen = Callable[[Replay], set[str]]  # the arms a screen drops before any training (a pure function of its measures)


def table_screen(r: Replay) -> set[str]:
    """The study area's screen rule (preflight/screen_rule.drops) on the real screen of the replay's task
    (benchmarks/data/screen_points.json: advise and the probe on the tables' own starting model). Its features
    are the task's, not the planted world's: in a world that shuffles the means over the arms the screen is
    as wrong as a screen that does not know the task."""
    return screen_drops(r.task) if r.task is not None else set()


SCREEN: Screen | None = table_screen


@dataclass
class ScreenConfirm:
    """screen + confirm: the arms the screen drops never train; a race confirms among the rest (the elimination race
    as init writes it, or another design to compare). `budget`: the confirm stage sized as `init` sizes it
    (plan/design.fit: the most seeds the budget buys, at least MIN_SEEDS, no more than the race plans), the budget a
    share of the fixed Bechhofer design's compute on all the arms; None: the race's own planned seeds."""

    screen: Screen
    confirm: Design = field(default_factory=Elimination)
    name: str = "screen + confirm (elimination)"
    budget: float | None = None

    def run(self, r: Replay) -> Decision:
        dropped = self.screen(r)
        rest = [a for a in r.arms if a not in dropped] or [r.world.baseline]
        if len(rest) == 1:
            return Decision(rest[0], 0.0, {})
        planned = None
        if self.budget is not None:
            fixed = r.bechhofer * sum(r.cost.values())
            planned = max(MIN_SEEDS, int(self.budget * fixed / sum(r.cost[a] for a in rest)))
        sub = Replay(World({a: r.world.values[a] for a in rest}, r.world.truth, r.world.baseline, r.world.rows,
                           {a: r.world.other[a] for a in rest}), r.me, r.cap, r.bechhofer, r.curve, r.cost, r.task,
                     planned)
        return self.confirm.run(sub)


def designs(screen: Screen | None = None) -> list[Design]:
    """The designs compared (module docstring); screen + confirm only with a screen to plug in."""
    out: list[Design] = [Keep(), FixedBechhofer(), Race("group_sequential"), Race("anytime"), Elimination(),
                         Pruned("successive halving"), Pruned("hyperband")]
    if screen is not None:
        out += [ScreenConfirm(screen), ScreenConfirm(screen, Race("group_sequential"),
                                                     "screen + confirm (group-sequential)"),
                ScreenConfirm(screen, name="screen + confirm (elimination), budget 0.5", budget=0.5),
                ScreenConfirm(screen, Race("group_sequential"), "screen + confirm (group-sequential), budget 0.5",
                              budget=0.5)]
    return out


def planted_curve(task: Any, w: World, shapes: dict[str, list[float]], raw: dict[tuple[str, int], list]) -> Callable:
    """(arm, seed i) -> the trial's curve in world w: the table's trial on the residual row seed i drew, its arm's
    mean curve shape scaled to the planted mean plus its own deviation from that mean; the last point is the
    world's value exactly."""
    table_seeds = task.seeds

    def curve(arm: str, i: int) -> list[tuple[float, float]]:
        real = raw[(arm, table_seeds[w.rows[i]])]
        shape = shapes[arm]
        out = [(x, w.truth[arm] * shape[t] + (y - shape[t] * shapes[arm + "|final"][0]))
               for t, (x, y) in enumerate(real)]
        out[-1] = (out[-1][0], w.values[arm][i])
        return out
    return curve


def replay_design(design: Design, task: Any, world: str, me: float, replays: int, seed: int = 7) -> dict[str, Any]:
    """One design on `replays` replays of one world (the same replays for every design: `seed`): P(within), regret,
    compute (module docstring)."""
    rng = np.random.default_rng(seed)
    sd, k = paired_sd(task), len(task.arms)
    bech = bechhofer_seeds(k, me, sd, TARGET)
    cap = int(math.ceil(3 * bech)) + 5
    raw = curves(task)
    shapes: dict[str, list[float]] = {}
    for a in task.arms:
        ys = np.array([[y for _, y in raw[(a, s)]] for s in task.seeds])
        mean = ys.mean(axis=0)
        shapes[a] = list(mean / mean[-1]) if mean[-1] else [1.0] * len(mean)
        shapes[a + "|final"] = [float(mean[-1])]
    cost = seconds(task)
    within, regret, compute, longest = [], [], [], []
    for _ in range(replays):
        w = draw(task, world, me, cap, rng)
        r = Replay(w, me, cap, bech, planted_curve(task, w, shapes, raw), cost, task)
        d = design.run(r)
        within.append(w.within(d.recommended, me))
        regret.append(w.best - w.truth[d.recommended])
        compute.append(d.compute)
        longest.append(int(math.ceil(max(d.seeds.values(), default=0))))
    fixed = bech * sum(cost.values())
    return {"design": design.name, "task": task.name, "world": world, "replays": replays, "bechhofer_seeds": bech,
            "within": float(np.mean(within)), "regret": float(np.mean(regret)), "compute": float(np.mean(compute)),
            "share": float(np.mean(compute)) / fixed if fixed else None,
            # the most seeds an arm ran, replay by replay: a race that stopped at its first look ran its first stage
            "longest_arm": {str(n): longest.count(n) / replays for n in sorted(set(longest))}}


def _row(job: tuple[int, str, int, float, int]) -> dict[str, Any]:
    t, world, d, me, replays = job
    return replay_design(designs(SCREEN)[d], tables()[t], world, me, replays)


def markdown(report: dict[str, Any]) -> str:
    """docs/statistics.md's table from the json: per world, each design's P(within), regret and compute share
    (the tasks side by side)."""
    rows = report["rows"]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    out = ["| world | design | " + " | ".join(f"{t.split(',')[0]}: P within / regret / compute" for t in tasks) + " |",
           "|---|---|" + "---|" * len(tasks)]
    for world in dict.fromkeys(r["world"] for r in rows):
        for design in dict.fromkeys(r["design"] for r in rows):
            cells = []
            for t in tasks:
                r = next(x for x in rows if x["world"] == world and x["design"] == design and x["task"] == t)
                cells.append(f"{r['within']:.2f} / {r['regret']:.3f} / {r['share']:.2f}")
            out.append(f"| {world} | {design} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replays", type=int, default=60)
    p.add_argument("--jobs", type=int, default=2, help="worker processes")
    p.add_argument("--min-effect", type=float, default=0.05)
    p.add_argument("--worlds", nargs="+", default=[AS_MEASURED, SCREEN_DOMINATED, DOMINATED, TIES, ALL_EQUAL, LFC])
    p.add_argument("--tasks", nargs="+", help="only the tables whose task is named (default: every table)")
    p.add_argument("--designs", nargs="+", help="only the designs whose name contains one of these (default: all)")
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", action="store_true", help="print docs/statistics.md's table from --json, run nothing")
    a = p.parse_args(argv)
    if a.markdown and a.json:
        print(markdown(json.loads(a.json.read_text())))
        return 0
    t0 = time.time()
    if SCREEN is None:
        print("screen + confirm: no screen rule plugged in (benchmarks/decision_quality.SCREEN): left out")
    names = [d.name for d in designs(SCREEN)]
    task_ids = [t for t, task in enumerate(tables()) if not a.tasks or task.name.split(",")[0] in a.tasks]
    design_ids = [d for d, name in enumerate(names) if not a.designs or any(x in name for x in a.designs)]
    if not task_ids or not design_ids:
        p.error(f"nothing to run: tasks {[t.name for t in tables()]}, designs {names}")
    jobs = [(t, world, d, a.min_effect, a.replays) for t in task_ids for world in a.worlds for d in design_ids]
    with multiprocessing.Pool(a.jobs) as pool:  # the replays of a world are the same for every design and --jobs
        rows = pool.map(_row, jobs)
    print(f"{'task':<24} {'world':<44} {'design':<32} {'P within':>8} {'regret':>7} {'share of Bechhofer':>18}  "
          f"most seeds of an arm (share of replays)")
    for r in rows:
        most = ", ".join(f"{n}: {v:.2f}" for n, v in r["longest_arm"].items())
        print(f"{r['task']:<24} {r['world']:<44} {r['design']:<32} {r['within']:>8.3f} {r['regret']:>7.4f} "
              f"{r['share']:>18.2f}  {most}")
    if a.json:
        a.json.write_text(json.dumps({"command": "python benchmarks/decision_quality.py " + " ".join(sys.argv[1:]),
                                      "min_effect": a.min_effect, "rows": rows,
                                      "wall_seconds": time.time() - t0}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
