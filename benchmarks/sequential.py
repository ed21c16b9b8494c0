"""Which G, how sure, at what cost: each strategy scored against a truth its replays never saw.

    python benchmarks/sequential.py                               # every committed table, min_effect 0.02
    python benchmarks/sequential.py --studies 400 --json out.json
    nice -n 19 python benchmarks/sequential_table.py --seeds 40   # (re)build a table first

The tables (benchmarks/data/, built by sequential_table.py) hold real trials, each trial's
held-out reward (eval_final_reward) at the end: `addition` and `addition_mixed` (5 arms, 30 steps,
40 seeds), `addition_mixed` at 60 steps (12 seeds: too few for a held-out truth, skipped), and
`addition_rare` (G = 2, 4, 8, 16, 32 at 32 completions per step, 60 steps: the task where G
matters). Two kinds of world, so the benchmark can fail:

- held-out truth: each replayed study draws 12 of the table's seeds (in a random order, the order
  they finish); the truth is every arm's mean over the seeds that replay did not draw (28 of 40),
  so no replay is scored against its own noise. The truth's own standard error is printed.
- planted means: the arms' means are set exactly (so the truth is exact) and each replayed seed
  is one of the table's real residual rows drawn with replacement (every arm's value on one seed minus
  its 40-seed mean: real noise, ties included, held-out rewards being multiples of 1/128), the planted
  means shuffled over the arms each replay. The world-by-world figures of issue 51 are
  benchmarks/calibration.py's. Configurations: "all equal" (a null), "least favourable" (one arm
  ahead by exactly min_effect: only it counts as within), "slippage" (one arm behind by
  2 x min_effect, the rest equal: a null for the others) and "one clearly best" (ahead by
  4 x min_effect).

Strategies: the report's answer (stats/selection.select, calls stats/calls) on a fixed n of seeds
(3, 6, 12); the plain argmax of 12 seeds' means (no statistics, for comparison); the
group-sequential race (study/racing, Haybittle-Peto, first look at 3 seeds, stopping at a stated
P(within) of 0.95 or 0.9, at most 12 seeds). Per strategy and world:
- within: P(its recommendation is within min_effect of the truth's best: a gap below min_effect);
- regret: the mean gap between the truth's best and the recommendation;
- FWER: P(any false statement in the report: a better/worse call of the wrong sign or against an
  equal arm, an equivalent call where the truth differs by more than min_effect, or an arm truly
  within min_effect of the best excluded from the eps-best set or dropped by the race);
- compute: median trials run as a fraction of a 12-seed study (arms x 12), and Bechhofer's fixed
  design reaching the same P(within) (its indifference zone at min_effect, at the residual sd left
  once each seed's common effect is removed: the paired design) as a fraction too;
- calibration: every replay's stated probability (the recommendation's P(within min_effect of the
  best)) binned against how often it came true, on the planted worlds (where the truth is exact).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ablate.stats.calls import calls as holm_calls  # noqa: E402
from grpo_ablate.stats.selection import bechhofer_pcs, select  # noqa: E402
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, WORSE  # noqa: E402
from grpo_ablate.records.race_record import RaceState, calls_level  # noqa: E402
from grpo_ablate.study.racing import Rule, decide  # noqa: E402

__all__ = ["Task", "tasks_of", "World", "Outcome", "planted_worlds", "replay", "score", "calibration", "main"]

DATA = Path(__file__).resolve().parent / "data"
TABLES = [DATA / "sequential_table.json", DATA / "sequential_table_rare.json"]
PLANNED = 12  # seeds in a replayed study
DRAWS = 4000  # the probability's Monte Carlo draws per answer (error near 0.95: 0.003)
BINS = ((0.0, 0.5), (0.5, 0.8), (0.8, 0.875), (0.875, 0.925), (0.925, 0.975), (0.975, 1.0001))


@dataclass
class Task:
    name: str
    arms: list[str]  # baseline first
    labels: dict[str, str]
    values: dict[str, dict[int, float]]
    prompt_se: float | None = None  # the held-out prompts' sampling error of one trial's reward (per-prompt rows)

    @property
    def seeds(self) -> list[int]:
        return sorted(set.intersection(*(set(v) for v in self.values.values())))

    def residual_rows(self) -> np.ndarray:
        """seeds x arms: each value minus its arm's mean over the table's seeds."""
        x = np.array([[self.values[a][s] for a in self.arms] for s in self.seeds])
        return x - x.mean(axis=0)


def tasks_of(table: dict) -> list[Task]:
    out = []
    for name in dict.fromkeys(r["task"] for r in table["rows"]):
        rows = [r for r in table["rows"] if r["task"] == name and r["outcome"] == "completed" and r["objective"] is not None]
        base = next(r["arm"] for r in rows if r["role"] == "baseline")
        arms = [base] + sorted({r["arm"] for r in rows} - {base})
        # a trial's reward is a mean over its held-out prompts: its sampling error over the prompts is
        # sd(per-prompt rewards) / sqrt(prompts), the part of the seed-to-seed spread the prompt set adds
        ses = [float(np.std(r["per_prompt"], ddof=1) / math.sqrt(len(r["per_prompt"])))
               for r in rows if r.get("per_prompt") and len(r["per_prompt"]) > 1]
        task = Task(f"{name}, {table['settings'].get('steps')} steps", arms, {r["arm"]: r["label"] for r in rows},
                    {a: {r["seed"]: float(r["objective"]) for r in rows if r["arm"] == a} for a in arms},
                    float(math.sqrt(np.mean(np.square(ses)))) if ses else None)
        out.append(task)
    return out


@dataclass
class World:
    """One replayed study's data: `values` arm -> {seed: value} in the order the seeds finish, and its truth."""

    values: dict[str, dict[int, float]]
    truth: dict[str, float]
    baseline: str


@dataclass
class Outcome:
    recommended: str
    stated: float | None  # the recommendation's stated P(within min_effect of the best)
    calls: dict[str, str]
    excluded: set[str]  # arms the answer (or the race, on the way) excluded from the eps-best set
    trials: int


def held_out_world(task: Task, rng: random.Random) -> World:
    seeds = task.seeds
    order = rng.sample(seeds, PLANNED)
    rest = [s for s in seeds if s not in order]
    truth = {a: statistics.fmean(task.values[a][s] for s in rest) for a in task.arms}
    return World({a: {s: task.values[a][s] for s in order} for a in task.arms}, truth, task.arms[0])


def planted_worlds(me: float) -> dict[str, Callable[[int], list[float]]]:
    """name -> planted means of k arms (before shuffling)."""
    return {"all equal": lambda k: [0.5] * k,
            "least favourable (best +min_effect)": lambda k: [0.5 + me] + [0.5] * (k - 1),
            "slippage (one -2 min_effect)": lambda k: [0.5 - 2 * me] + [0.5] * (k - 1),
            "one clearly best (+4 min_effect)": lambda k: [0.5 + 4 * me] + [0.5] * (k - 1)}


def planted_world(task: Task, res: np.ndarray, means: list[float], rng: random.Random) -> World:
    rows = [rng.randrange(len(res)) for _ in range(PLANNED)]  # i.i.d., with replacement (benchmarks/worlds.py says why)
    perm = list(task.arms)
    rng.shuffle(perm)
    truth = dict(zip(perm, means))
    values = {a: {i: float(truth[a] + res[r, j]) for i, r in enumerate(rows)} for j, a in enumerate(task.arms)}
    return World(values, truth, task.arms[0])


def _seen(world: World, n: int) -> dict[str, dict[int, float]]:
    return {a: dict(list(v.items())[:n]) for a, v in world.values.items()}


def answer(vals: dict[str, dict[int, float]], baseline: str, me: float,
           level: float = 0.05) -> tuple[str, float | None, dict[str, str], set[str]]:
    """The report's answer: recommendation, stated probability, calls, exclusions (at family-wise `level`)."""
    sel = select(vals, me, draws=DRAWS, alpha=level)
    c = holm_calls(vals, baseline, min_effect=me, level=level)
    return str(sel.recommended), sel.pcs, {a: x.call for a, x in c.items()}, set(sel.excluded)


def run_fixed(world: World, me: float, n: int) -> Outcome:
    vals = _seen(world, n)
    rec, pcs, calls, excl = answer(vals, world.baseline, me)
    return Outcome(rec, pcs, calls, excl, n * len(vals))


def run_argmax(world: World, me: float, n: int) -> Outcome:
    vals = _seen(world, n)
    rec = max(sorted(vals), key=lambda a: statistics.fmean(vals[a].values()))
    return Outcome(rec, None, {}, set(), n * len(vals))


def run_race(world: World, rule: Rule) -> Outcome:
    """study/racing.decide round by round, then the report's answer on what ran, its calls and exclusions
    at the level the race's last look spent (5% when it ran to the planned seeds)."""
    arms = list(world.values)
    order = list(world.values[arms[0]])
    state = RaceState(0, list(arms))
    seen: dict[str, dict[int, float]] = {a: {} for a in arms}
    used, trials = rule.first, 0
    while True:
        for a in state.live:
            for s in order[:used]:
                if s not in seen[a]:
                    seen[a][s] = world.values[a][s]
                    trials += 1
        state = decide(state, {a: v for a, v in seen.items() if v}, maximize=True, seeds_left=used < len(order),
                       rule=rule, baseline=world.baseline)
        if state.decided:
            break
        used += 1
    # the report holds its calls to the level the race's last look spent (race_record.calls_level)
    rec, pcs, calls, excl = answer({a: v for a, v in seen.items() if v}, world.baseline, rule.min_effect,
                                   calls_level(state.as_dict()))
    return Outcome(rec, pcs, calls, excl | {d.arm for d in state.dropped}, trials)


def false_statement(world: World, out: Outcome, me: float) -> bool:
    t, base = world.truth, world.truth[world.baseline]
    best = max(t.values())
    for a, c in out.calls.items():
        d = t[a] - base
        if (c == BETTER and d <= 0) or (c == WORSE and d >= 0) or (c == EQUIVALENT and abs(d) > me + 1e-12):
            return True
    return any(best - t[a] <= me + 1e-12 for a in out.excluded)


def score(worlds: list[World], outs: list[Outcome], me: float, k: int) -> dict[str, float]:
    gaps = [max(w.truth.values()) - w.truth[o.recommended] for w, o in zip(worlds, outs)]
    comp = [o.trials / (k * PLANNED) for o in outs]
    within = [g < me - 1e-12 for g in gaps]
    return {"within": float(np.mean(within)), "regret": float(np.mean(gaps)),
            "fwer": float(np.mean([false_statement(w, o, me) for w, o in zip(worlds, outs)])),
            "median": float(np.median(comp)), "p90": float(np.percentile(comp, 90))}


def calibration(pairs: list[tuple[float, bool]]) -> list[dict[str, float]]:
    """Stated probability vs realized frequency, per bin of BINS: n, mean stated, realized, its standard error."""
    out = []
    for lo, hi in BINS:
        inside = [(p, w) for p, w in pairs if lo <= p < hi]
        if not inside:
            continue
        realized = float(np.mean([w for _, w in inside]))
        out.append({"bin": [lo, min(hi, 1.0)], "n": len(inside), "stated": float(np.mean([p for p, _ in inside])),
                    "realized": realized, "se": math.sqrt(max(realized * (1 - realized), 1e-9) / len(inside))})
    return out


def bechhofer_share(k: int, me: float, sd: float, target: float) -> float | None:
    """Seeds per arm of Bechhofer's fixed design reaching `target`, as a share of a 12-seed study."""
    if target <= 1.0 / k:
        return 0.0
    lo, hi = 0, 400  # the PCS grows with the seeds: bisect for the fewest that reach the target
    if bechhofer_pcs(k, hi, me, sd) < target:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if bechhofer_pcs(k, mid, me, sd) >= target else (mid, hi)
    return hi / PLANNED


def replay(worlds: list[World], me: float, k: int) -> tuple[list[dict], list[tuple[float, bool]]]:
    """Every strategy over `worlds`: their rows, and (stated, came true) of every answer that stated one."""
    def gs(target: float) -> Rule:
        return Rule(min_effect=me, confidence=target, design="group_sequential", max_seeds=PLANNED, first=3)

    strategies: list[tuple[str, Callable[[World], Outcome]]] = [
        *[(f"fixed {n} seeds", partial(run_fixed, me=me, n=n)) for n in (3, 6, 12)],
        ("argmax of 12 seeds' means", partial(run_argmax, me=me, n=PLANNED)),
        *[(f"group-sequential race, stop at {t:g}", partial(run_race, rule=gs(t))) for t in (0.95, 0.9)],
    ]
    rows, pairs = [], []
    for name, fn in strategies:
        outs = [fn(w) for w in worlds]
        row = {"strategy": name, **score(worlds, outs, me, k)}
        rows.append(row)
        for w, o in zip(worlds, outs):
            if o.stated is not None:
                pairs.append((o.stated, max(w.truth.values()) - w.truth[o.recommended] < me - 1e-12))
    return rows, pairs


def _print_rows(rows: list[dict], bech: Callable[[float], float | None]) -> None:
    print(f"    {'strategy':<36} {'within':>6} {'regret':>7} {'FWER':>6} {'median':>6} {'p90':>5} {'Bechhofer':>9}")
    for r in rows:
        b = bech(r["within"])
        r["bechhofer_share"] = b
        print(f"    {r['strategy']:<36} {r['within']:>6.3f} {r['regret']:>7.4f} {r['fwer']:>6.3f} {r['median']:>6.2f} "
              f"{r['p90']:>5.2f} {'-' if b is None else f'{b:.2f}':>9}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", type=Path, nargs="+", default=TABLES)
    p.add_argument("--studies", type=int, default=300, help="replayed studies per world")
    p.add_argument("--min-effect", type=float, default=0.02)
    p.add_argument("--json", type=Path, help="write the figures here as well")
    a = p.parse_args()
    me = a.min_effect
    report: list[dict] = []
    planted_pairs: list[tuple[float, bool]] = []
    for path in a.table:
        if not path.exists():
            print(f"table {path}: missing (skipped)")
            continue
        for task in tasks_of(json.loads(path.read_text())):
            seeds, k = task.seeds, len(task.arms)
            if len(seeds) < PLANNED + 8:
                print(f"\n== {task.name}: {len(seeds)} seeds, too few for a held-out truth (skipped) ==")
                continue
            res = task.residual_rows()
            sd = float(math.sqrt((res**2).sum() / ((len(seeds) - 1) * k)))
            # Bechhofer's paired design: the spread left once each seed's common effect is removed
            within_seed = res - res.mean(axis=1, keepdims=True)
            sd_paired = float(math.sqrt((within_seed**2).sum() / ((len(seeds) - 1) * (k - 1))))
            means = {a: statistics.fmean(task.values[a][s] for s in seeds) for a in task.arms}
            print(f"\n== {task.name}: {k} arms x {len(seeds)} seeds; min_effect {me}; {a.studies} studies per world ==")
            top = max(means.values())
            for x in task.arms:
                v = [task.values[x][s] for s in seeds]
                se = statistics.stdev(v) / math.sqrt(len(v))
                print(f"  {task.labels[x]:<26} mean {means[x]:.3f} (se {se:.3f}, over {len(v)} seeds)  sd "
                      f"{statistics.stdev(v):.3f}{'  (baseline)' if x == task.arms[0] else ''}"
                      f"{'  best' if means[x] == top else ''}")
            if task.prompt_se is not None:
                print(f"  prompt noise: one trial's reward over its {len(json.loads(path.read_text())['rows'][0]['per_prompt'])} "
                      f"held-out prompts has sampling error {task.prompt_se:.3f} (rms over trials), of the "
                      f"seed-to-seed residual sd {sd:.3f}")
            rng = random.Random(0)
            print(f"  residual sd {sd:.3f} per arm, {sd_paired:.3f} once each seed's common effect is removed "
                  f"(Bechhofer's paired design uses the latter)")
            entry: dict = {"task": task.name, "seeds": len(seeds), "arms": k, "sd": sd, "sd_paired": sd_paired, "prompt_se": task.prompt_se,
                           "means": {task.labels[x]: means[x] for x in task.arms}, "worlds": {}}

            bech = partial(bechhofer_share, k, me, sd_paired)

            worlds = [held_out_world(task, rng) for _ in range(a.studies)]
            gap_se = statistics.fmean(
                math.sqrt(2) * sd / math.sqrt(len(seeds) - PLANNED) for _ in (0,))
            print(f"  held-out truth (the {len(seeds) - PLANNED} seeds a replay did not draw; a difference of two "
                  f"arms' truths has standard error {gap_se:.3f}):")
            rows, _ = replay(worlds, me, k)
            _print_rows(rows, bech)
            entry["worlds"]["held-out truth"] = {"rows": rows, "truth_gap_se": gap_se}
            for wname, plant in planted_worlds(me).items():
                worlds = [planted_world(task, res, plant(k), rng) for _ in range(a.studies)]
                print(f"  planted: {wname} (residual sd {sd:.3f})")
                rows, pairs = replay(worlds, me, k)
                _print_rows(rows, bech)
                planted_pairs += pairs
                entry["worlds"][wname] = {"rows": rows, "calibration": calibration(pairs)}
            report.append(entry)
    cal = calibration(planted_pairs)
    print("\n== calibration on every planted world: the stated P(within min_effect of the best) vs how often it came true ==")
    print(f"    {'bin':<13} {'n':>6} {'stated':>7} {'realized':>8} {'se':>6}")
    for c in cal:
        print(f"    [{c['bin'][0]:.3f}, {c['bin'][1]:.3f}) {c['n']:>6} {c['stated']:>7.3f} {c['realized']:>8.3f} "
              f"{c['se']:>6.3f}")
    if a.json:
        a.json.write_text(json.dumps({"min_effect": me, "studies": a.studies, "planted": PLANNED, "tasks": report,
                                      "calibration": cal}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
