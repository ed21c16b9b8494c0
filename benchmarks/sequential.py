"""Which G, with a guarantee: each strategy's answer against a many-seed truth, and what it costs.

    python benchmarks/sequential.py                        # the committed tables (a few minutes)
    python benchmarks/sequential.py --studies 300 --min-effect 0.05
    nice -n 10 python benchmarks/sequential_table.py --seeds 40   # (re)build the 40-seed table first

The tables (benchmarks/data/, built by sequential_table.py) hold real trials: 5 arms (baseline
G=8 T=1; G=2; G=4; the schedule 2->8@50%; T=0.5) on `addition` and `addition_mixed` (30 steps,
40 seeds) and `addition_mixed` at 60 steps (12 seeds), each trial's held-out reward
(eval_final_reward) at the end. The truth is every seed's mean per arm (40 seeds where the table
has them): its best arm, and the sign of each arm's difference from the baseline.

A replayed study draws 12 of the table's seeds at random, in a random order (the order they
finish), and each strategy reads them:
- fixed n (3, 4, 6, 12): every arm on the first n seeds; the answer is the report's
  (stats/selection.select: the arm most likely within min_effect of the best; calls Holm-adjusted);
- fixed 12, old verdict: the round-3 answer (keep the baseline unless an arm's unadjusted 95%
  interval says better), for comparison;
- old racing: round 2's race, a paired one-sided t test repeated every round (kept here only);
  the old verdict on what it ran;
- anytime race: study/racing with design "anytime" (confidence sequences, stop when settled);
- group-sequential race: study/racing's default (Haybittle-Peto spending over the 11 looks,
  stop at P(within min_effect of the best) >= the target (0.95, the default; 0.9 and 0.8 show the
  frontier), one arm left, or 12 seeds).
Per strategy: P(its recommendation is within min_effect of the truth's best) ("within"), the
family-wise error of its calls ("FWER": a replay with any better/worse call of the wrong sign
against the truth, or an equivalent call where the truth differs by more than min_effect), the
median and 90th percentile compute as a fraction of a 12-seed study (trials run / (arms x 12)),
and the ratio of its mean compute to Bechhofer's indifference-zone design (the fewest seeds per
arm that pick the best with probability 0.95 when it leads by min_effect, at the table's pooled
per-arm sd). "agree": two independent 12-seed studies (disjoint seeds) give the same
recommendation ("same rec"), and the same calls too ("same answer").
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ablate.stats.calls import calls as holm_calls  # noqa: E402
from grpo_ablate.stats.selection import bechhofer_seeds, select  # noqa: E402
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE  # noqa: E402
from grpo_ablate.study.racing import RaceState, Rule, decide  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
TABLES = [DATA / "sequential_table.json", DATA / "sequential_table_mixed60.json"]
PLANNED = 12  # seeds in a replayed study


@dataclass
class Task:
    name: str
    arms: list[str]  # baseline first
    labels: dict[str, str]
    values: dict[str, dict[int, float]]

    @property
    def seeds(self) -> list[int]:
        return sorted(set.intersection(*(set(v) for v in self.values.values())))

    def truth(self) -> dict[str, float]:
        return {a: statistics.fmean(self.values[a][s] for s in self.seeds) for a in self.arms}


def tasks_of(table: dict) -> list[Task]:
    out = []
    for name in dict.fromkeys(r["task"] for r in table["rows"]):
        rows = [r for r in table["rows"] if r["task"] == name and r["outcome"] == "completed" and r["objective"] is not None]
        base = next(r["arm"] for r in rows if r["role"] == "baseline")
        arms = [base] + sorted({r["arm"] for r in rows} - {base})
        out.append(Task(f"{name}, {table['settings'].get('steps')} steps", arms, {r["arm"]: r["label"] for r in rows},
                        {a: {r["seed"]: float(r["objective"]) for r in rows if r["arm"] == a} for a in arms}))
    return out


@dataclass
class Outcome:
    recommended: str
    calls: dict[str, str]
    trials: int


def _values(task: Task, seen: dict[str, list[int]]) -> dict[str, dict[int, float]]:
    return {a: {s: task.values[a][s] for s in seen[a]} for a in task.arms if seen[a]}


def new_answer(task: Task, seen: dict[str, list[int]], me: float) -> tuple[str, dict[str, str]]:
    vals = _values(task, seen)
    sel = select(vals, me, draws=4000)
    c = holm_calls(vals, task.arms[0], min_effect=me) if task.arms[0] in vals else {}
    return str(sel.recommended), {a: x.call for a, x in c.items()}


def _interval_call(d: list[float], me: float) -> str:
    """One arm's unadjusted 95% paired t interval read with min_effect (the round-3 verdict)."""
    if len(d) < 2:
        return UNDECIDED
    x = np.asarray(d)
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    lo, hi = x.mean() - half, x.mean() + half
    return EQUIVALENT if -me <= lo and hi <= me else BETTER if lo > 0 else WORSE if hi < 0 else UNDECIDED


def old_answer(task: Task, seen: dict[str, list[int]], me: float) -> tuple[str, dict[str, str]]:
    base = task.arms[0]
    calls = {}
    for a in task.arms[1:]:
        common = [s for s in seen[a] if s in seen[base]]
        calls[a] = _interval_call([task.values[a][s] - task.values[base][s] for s in common], me)
    better = [a for a, c in calls.items() if c == BETTER]
    rec = max(better, key=lambda a: statistics.fmean(task.values[a][s] for s in seen[a])) if better else base
    return rec, calls


def run_fixed(task: Task, order: list[int], me: float, n: int, old: bool = False) -> Outcome:
    seen = {a: order[:n] for a in task.arms}
    rec, calls = (old_answer if old else new_answer)(task, seen, me)
    return Outcome(rec, calls, n * len(task.arms))


def _paired_worse_p(leader: list[float], other: list[float]) -> float:
    """Round 2's drop test: one-sided paired t p-value that `other` is worse than `leader`."""
    d = [a - b for a, b in zip(leader, other)]
    if len(d) < 2:
        return 1.0
    if statistics.pstdev(d) == 0.0:
        return 0.0 if d[0] > 0 else 1.0
    p = float(stats.ttest_rel(leader, other, alternative="greater").pvalue)
    return p if math.isfinite(p) else 1.0


def run_old_race(task: Task, order: list[int], me: float, first: int = 2) -> Outcome:
    live, used, seen = list(task.arms), first, {a: [] for a in task.arms}
    trials = 0
    while True:
        for a in live:
            for s in order[:used]:
                if s not in seen[a]:
                    seen[a].append(s)
                    trials += 1
        shared = order[:used]
        leader = max(live, key=lambda a: statistics.fmean(task.values[a][s] for s in shared))
        live = [a for a in live if a == leader or _paired_worse_p([task.values[leader][s] for s in shared],
                                                                  [task.values[a][s] for s in shared]) >= 0.05]
        if len(live) <= 1 or used >= len(order):
            break
        used += 1
    rec, calls = old_answer(task, seen, me)
    return Outcome(rec, calls, trials)


def run_race(task: Task, order: list[int], rule: Rule) -> Outcome:
    """study/racing.decide round by round over `order`, then the report's answer on what ran."""
    base = task.arms[0]
    state = RaceState(0, list(task.arms))
    seen: dict[str, list[int]] = {a: [] for a in task.arms}
    used, trials = rule.first, 0
    while True:
        for a in state.live:
            for s in order[:used]:
                if s not in seen[a]:
                    seen[a].append(s)
                    trials += 1
        state = decide(state, _values(task, seen), maximize=True, seeds_left=used < len(order), rule=rule,
                       baseline=base)
        if state.decided:
            break
        used += 1
    if rule.design == "anytime":
        rec, _ = new_answer(task, seen, rule.min_effect)
        return Outcome(rec, {a: state.calls.get(a, UNDECIDED) for a in task.arms[1:]}, trials)
    rec, calls = new_answer(task, seen, rule.min_effect)  # the last look's answer is the report's
    return Outcome(state.leader or rec, calls, trials)


def false_call(task: Task, calls: dict[str, str], truth: dict[str, float], me: float) -> bool:
    base = truth[task.arms[0]]
    for a, c in calls.items():
        d = truth[a] - base
        if (c == BETTER and d <= 0) or (c == WORSE and d >= 0) or (c == EQUIVALENT and abs(d) > me):
            return True
    return False


def pooled_sd(task: Task) -> float:
    return math.sqrt(statistics.fmean(statistics.variance([task.values[a][s] for s in task.seeds]) for a in task.arms))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", type=Path, nargs="+", default=TABLES)
    p.add_argument("--studies", type=int, default=300, help="replayed studies per strategy")
    p.add_argument("--min-effect", type=float, default=0.05)
    p.add_argument("--json", type=Path, help="write the figures here as well")
    a = p.parse_args()
    me = a.min_effect
    report: list[dict] = []
    for path in a.table:
        if not path.exists():
            print(f"table {path}: missing (skipped)")
            continue
        for task in tasks_of(json.loads(path.read_text())):
            seeds, truth = task.seeds, task.truth()
            best = max(truth, key=truth.get)  # type: ignore[arg-type]
            good = {x for x in task.arms if truth[best] - truth[x] <= me}
            sd = pooled_sd(task)
            k = len(task.arms)
            bech = bechhofer_seeds(k, me, sd, 0.95)
            print(f"\n== {task.name}: {k} arms x {len(seeds)} seeds (truth: their means); min_effect {me} ==")
            for x in task.arms:
                v = [task.values[x][s] for s in seeds]
                print(f"  {task.labels[x]:<26} mean {truth[x]:.3f}  sd {statistics.stdev(v):.3f}"
                      f"{'  (baseline)' if x == task.arms[0] else ''}{'  best' if x == best else ''}"
                      f"{'  within min_effect' if x in good and x != best else ''}")
            print(f"  pooled per-arm sd {sd:.3f}; Bechhofer's design for P(correct) 0.95 at min_effect: {bech} seeds "
                  f"per arm ({bech / PLANNED:.2f} of a 12-seed study)")
            rng = random.Random(0)
            draws = [rng.sample(seeds, min(PLANNED, len(seeds))) for _ in range(a.studies)]
            def gs(target: float) -> Rule:
                return Rule(min_effect=me, confidence=target, design="group_sequential", max_seeds=PLANNED, first=2)

            anytime = Rule(min_effect=me, confidence=0.95, design="anytime", stop_when_settled=True)
            strategies: list[tuple[str, Callable[[list[int]], Outcome]]] = [
                *[(f"fixed {n} seeds", (lambda n: lambda o: run_fixed(task, o, me, n))(n)) for n in (3, 4, 6, 12)],
                ("fixed 12 seeds, old verdict", lambda o: run_fixed(task, o, me, 12, old=True)),
                ("old racing (repeated t-test)", lambda o: run_old_race(task, o, me)),
                ("anytime race", lambda o: run_race(task, o, anytime)),
                *[(f"group-sequential race, PCS {t:g}", (lambda t: lambda o: run_race(task, o, gs(t)))(t))
                  for t in (0.95, 0.9, 0.8)],
            ]
            print(f"  {'strategy (' + str(a.studies) + ' studies)':<32} {'within':>6} {'FWER':>6} {'median':>6} "
                  f"{'p90':>6} {'x Bechhofer':>11}")
            rows = []
            for name, fn in strategies:
                outs = [fn(o) for o in draws]
                comp = [o.trials / (k * PLANNED) for o in outs]
                within = float(np.mean([o.recommended in good for o in outs]))
                fwer = float(np.mean([false_call(task, o.calls, truth, me) for o in outs]))
                ratio = float(np.mean(comp)) / (bech / PLANNED)
                row = {"task": task.name, "strategy": name, "within": within, "fwer": fwer,
                       "median": float(np.median(comp)), "p90": float(np.percentile(comp, 90)), "x_bechhofer": ratio}
                rows.append(row)
                print(f"  {name:<32} {within:>6.3f} {fwer:>6.3f} {row['median']:>6.2f} {row['p90']:>6.2f} {ratio:>11.2f}",
                      flush=True)
            agree = {}
            if len(seeds) >= 2 * PLANNED:
                pairs = [rng.sample(seeds, 2 * PLANNED) for _ in range(a.studies)]
                for label, old in (("new answer", False), ("old verdict", True)):
                    both = [(run_fixed(task, q[:PLANNED], me, PLANNED, old), run_fixed(task, q[PLANNED:], me, PLANNED, old))
                            for q in pairs]
                    same_rec = float(np.mean([x.recommended == y.recommended for x, y in both]))
                    same = float(np.mean([x.recommended == y.recommended and x.calls == y.calls for x, y in both]))
                    agree[label] = {"same_rec": same_rec, "same_answer": same}
                    print(f"  two independent 12-seed studies, {label}: same recommendation {same_rec:.2f}, "
                          f"same recommendation and calls {same:.2f}")
            else:
                print(f"  two independent 12-seed studies: not measurable ({len(seeds)} seeds in the table)")
            report.append({"task": task.name, "seeds": len(seeds), "truth": {task.labels[x]: truth[x] for x in task.arms},
                           "best": task.labels[best], "pooled_sd": sd, "bechhofer_seeds": bech, "rows": rows,
                           "agree": agree})
    if a.json:
        a.json.write_text(json.dumps({"min_effect": me, "studies": a.studies, "tasks": report}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
