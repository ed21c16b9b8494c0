"""Stop when the answer is known: how much of a full study each strategy spends, and how often it agrees.

    python benchmarks/sequential.py                       # replays the committed table (seconds)
    python benchmarks/sequential.py --orders 500 --min-effect 0.02 0.05
    nice -n 10 python benchmarks/sequential_table.py      # (re)build the table of real trials first

The table (benchmarks/data/sequential_table.json, built by sequential_table.py) holds real trials
of both built-in tasks: 5 arms (baseline G=8 T=1; G=2; G=4; the schedule 2->8@50%; T=0.5) x 12
seeds, each with its held-out reward at every evaluation point. Per task, the truth is the full
study's verdict: every arm on all 12 seeds, looked at once, so each arm's call against the
baseline rests on the fixed-sample 95% paired t interval read with study.min_effect (the rule
report/verdict.py applies to a study that did not race), and the recommended arm (the best mean
among arms called better, else the baseline). The confidence sequence's own calls at all 12
seeds are printed beside it.

Strategies, each replayed over many seed orders (the order the seeds would have run in):
- fixed 4 seeds: every arm on 4 seeds, calls from a fixed-sample 95% paired t interval (the demo);
- today's racing: 2 seeds, then one seed per round to arms a repeated paired t-test has not
  dropped; calls from the fixed-sample t interval at the end;
- anytime racing: racing with the one rule and stop-when-settled (study/racing.decide);
- anytime racing + within-trial stop: the same, and a trial of an arm already called worse than
  the leader at an earlier evaluation point (the rule applied to the shared points' rewards) is
  stopped at that point (it costs its share of the completions). Offered only as a measurement:
  see the "caught up" count printed first.
Per strategy: median and 90th-percentile compute (fraction of the full study's completions),
"agree": agreement with the truth (same recommended arm and the same call on every arm),
"agreeCS": the same against the full study read with the confidence sequence at all 12 seeds
(did stopping early change what the same rule says at the end?), "same arm": the recommended arm
alone, "best out": how often the truly best arm (best full-study mean) was dropped, "false +":
how often an arm was called better where the truth does not call it better.

Measured 2026-12-01 on the shared 2-core CPU (tables committed; 200 seed orders; min_effect 0.02):

    addition, 30 steps                        median  p90  agree agreeCS same arm best out false +
    fixed 4 seeds                              0.33   0.33  0.00   0.38    0.02     0.00    0.01
    today's racing (t-test 0.95, 2 first)      0.65   0.77  0.17   0.04    0.78     0.01    0.00
    anytime racing + min_effect + stop         0.97   0.98  0.00   1.00    0.00     0.00    0.00
    anytime racing + stop + within-trial stop  0.90   0.92  0.00   0.07    0.00     0.00    0.00
    (addition_mixed: every arm within noise at 30 and 60 steps; anytime racing spends 1.00)

Read: the seed-to-seed spread (sd 0.05-0.08) is as large as the arm differences, so the anytime
rule settles only the one large difference (T=0.5 on addition) within 12 seeds and the race runs
the rest to the last seed; <= 30 % of the compute at >= 95 % agreement is out of reach here.
Fixed-sample truth and anytime calls differ at 12 seeds because the CS is wider (t* 3.68 vs 2.20).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE, classify  # noqa: E402
from grpo_ablate.study.racing import Drop, RaceState, Rule, decide  # noqa: E402
from sequential_table import DATA, load  # noqa: E402


@dataclass
class Task:
    name: str
    arms: list[str]  # arm keys, baseline first
    labels: dict[str, str]
    values: dict[str, dict[int, float]]  # arm -> seed -> objective
    curves: dict[str, dict[int, list[float]]]  # arm -> seed -> reward at each evaluation point
    completions: list[float]  # share of the trial's completions at each evaluation point

    @property
    def seeds(self) -> list[int]:
        return sorted(set.intersection(*(set(v) for v in self.values.values())))


def tasks_of(table: dict[str, Any]) -> list[Task]:
    out = []
    for name in dict.fromkeys(r["task"] for r in table["rows"]):
        rows = [r for r in table["rows"] if r["task"] == name and r["outcome"] == "completed" and r["objective"] is not None]
        base = next(r["arm"] for r in rows if r["role"] == "baseline")
        arms = [base] + sorted({r["arm"] for r in rows} - {base})
        values = {a: {r["seed"]: float(r["objective"]) for r in rows if r["arm"] == a} for a in arms}
        curves = {a: {r["seed"]: [float(v) for _, v in r["curve"]] for r in rows if r["arm"] == a} for a in arms}
        first = next(r for r in rows if r["curve"])
        total = first["curve"][-1][0] or 1
        out.append(Task(name, arms, {r["arm"]: r["label"] for r in rows}, values, curves,
                        [c / total for c, _ in first["curve"]]))
    return out


def fixed_call(diffs: list[float], min_effect: float) -> str:
    """The fixed-sample paired 95% t interval, read with the same words (what the report showed before)."""
    if len(diffs) < 2:
        return UNDECIDED
    d = np.asarray(diffs)
    sd = d.std(ddof=1)
    half = stats.t.ppf(0.975, d.size - 1) * sd / np.sqrt(d.size) if sd > 0 else 0.0
    lo, hi = d.mean() - half, d.mean() + half
    if -min_effect <= lo and hi <= min_effect:
        return EQUIVALENT
    return BETTER if lo > 0 else WORSE if hi < 0 else UNDECIDED


def paired(task: Task, arm: str, ref: str, seeds: list[int], values: dict[str, dict[int, float]] | None = None) -> list[float]:
    v = values or task.values
    return [v[arm][s] - v[ref][s] for s in seeds if s in v[arm] and s in v[ref]]


def recommend(task: Task, calls: dict[str, str], seen: dict[str, list[int]]) -> str:
    base = task.arms[0]
    better = [a for a in task.arms[1:] if calls.get(a) == BETTER]
    if not better:
        return base
    return max(better, key=lambda a: statistics.fmean(task.values[a][s] for s in seen[a]))


def truth(task: Task, min_effect: float, sequential: bool = False) -> tuple[dict[str, str], str, str]:
    """The full study's verdict: all seeds, looked at once, so the fixed-sample interval (report/verdict's
    rule for a study that did not race); `sequential`: the confidence sequence at the last seed instead."""
    seeds = task.seeds
    if sequential:
        calls = {a: classify(paired(task, a, task.arms[0], seeds), min_effect=min_effect).call for a in task.arms[1:]}
    else:
        calls = {a: fixed_call(paired(task, a, task.arms[0], seeds), min_effect) for a in task.arms[1:]}
    best = max(task.arms, key=lambda a: statistics.fmean(task.values[a][s] for s in seeds))
    return calls, recommend(task, calls, {a: seeds for a in task.arms}), best


@dataclass
class Outcome:
    calls: dict[str, str]
    recommended: str
    compute: float  # share of the full study's completions
    dropped: set[str]


def run_fixed(task: Task, order: list[int], min_effect: float, n: int = 4) -> Outcome:
    seeds = order[:n]
    calls = {a: fixed_call(paired(task, a, task.arms[0], seeds), min_effect) for a in task.arms[1:]}
    return Outcome(calls, recommend(task, calls, {a: seeds for a in task.arms}), n / len(order), set())


def run_race(task: Task, order: list[int], rule: Rule, within: bool = False, first: int = 2) -> Outcome:
    """A race as study/racing.decide runs it, round by round over `order`.

    within: after each round, an arm (not the leader, not the baseline) whose rewards at an earlier
    shared evaluation point the rule already calls worse than the leader's is dropped there: this
    round's trial of it stops at that point (it costs that share of its completions, and its final
    value is never seen).
    """
    base = task.arms[0]
    state = RaceState(0, list(task.arms))
    seen: dict[str, list[int]] = {a: [] for a in task.arms}
    cost = 0.0
    used = first
    while True:
        new = order[:first] if state.round == 0 else [order[used - 1]]
        for a in state.live:
            for s in new:
                if s not in seen[a]:
                    seen[a].append(s)
                    cost += 1.0
        values = {a: {s: task.values[a][s] for s in seen[a]} for a in task.arms}
        state = decide(state, {a: values[a] for a in set(state.live) | {base}}, maximize=True, seeds_left=used < len(order),
                       rule=rule, baseline=base if rule.kind == "anytime" else None)
        if within and state.leader is not None and not state.decided:
            for a in list(state.live):
                if a in (state.leader, base):
                    continue
                common = [s for s in seen[a] if s in seen[state.leader]]
                for k in range(1, len(task.completions) - 1):  # the shared points before the end
                    d = [task.curves[a][s][k] - task.curves[state.leader][s][k] for s in common]
                    if rule.call(d, True) == WORSE:
                        fresh = [s for s in new if s in seen[a]]
                        cost -= (1.0 - task.completions[k]) * len(fresh)
                        seen[a] = [s for s in seen[a] if s not in fresh]
                        state.live.remove(a)
                        state.dropped.append(Drop(a, state.round, f"behind at point {k}", None, tuple(common)))
                        state.calls[a] = rule.call(paired(task, a, base, seen[a]), True)
                        break
            state.decided = len(state.live) <= 1 or not any(a not in state.settled for a in state.live)
        if state.decided:
            break
        used += 1
    if rule.kind == "anytime":
        calls = {a: state.calls.get(a, UNDECIDED) for a in task.arms[1:]}
    else:
        calls = {a: fixed_call(paired(task, a, base, seen[a]), rule.min_effect) for a in task.arms[1:]}
    total = len(task.arms) * len(order)
    return Outcome(calls, recommend(task, calls, seen), cost / total, {d.arm for d in state.dropped})


def caught_up(task: Task, rule: Rule) -> tuple[int, int, list[str]]:
    """3b: over all seeds, arms the rule calls worse than the final leader at an earlier evaluation point,
    and how many of those are not worse at the end (caught up)."""
    seeds = task.seeds
    leader = max(task.arms, key=lambda a: statistics.fmean(task.values[a][s] for s in seeds))
    behind, back, notes = 0, 0, []
    for a in task.arms:
        if a == leader:
            continue
        final = classify([task.values[a][s] - task.values[leader][s] for s in seeds], min_effect=rule.min_effect).call
        for k in range(1, len(task.completions) - 1):
            d = [task.curves[a][s][k] - task.curves[leader][s][k] for s in seeds]
            if classify(d, min_effect=rule.min_effect).call == WORSE:
                behind += 1
                if final != WORSE:
                    back += 1
                    notes.append(f"{task.labels[a]} behind at point {k} ({task.completions[k]:.0%}), {final} at the end")
                break
    return behind, back, notes


def summarise(name: str, outs: list[Outcome], calls: dict[str, str], rec: str, best: str,
              same_rule: tuple[dict[str, str], str]) -> str:
    comp = sorted(o.compute for o in outs)
    agree = np.mean([o.recommended == rec and o.calls == calls for o in outs])
    agree_cs = np.mean([o.recommended == same_rule[1] and o.calls == same_rule[0] for o in outs])
    same_arm = np.mean([o.recommended == rec for o in outs])
    dropped_best = np.mean([best in o.dropped for o in outs])
    false_better = np.mean([any(c == BETTER and calls.get(a) != BETTER for a, c in o.calls.items()) for o in outs])
    return (f"  {name:<44} {statistics.median(comp):>6.2f} {np.percentile(comp, 90):>6.2f} {agree:>6.2f} {agree_cs:>7.2f} "
            f"{same_arm:>8.2f} {dropped_best:>8.2f} {false_better:>8.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", type=Path, nargs="+", default=[DATA, DATA.with_name("sequential_table_mixed60.json")])
    p.add_argument("--orders", type=int, default=300, help="seed orders replayed per strategy")
    p.add_argument("--min-effect", type=float, nargs="+", default=[0.02, 0.05, 0.1])
    a = p.parse_args()
    tasks = []
    for path in a.table:
        if not path.exists():
            print(f"table {path}: missing (skipped)")
            continue
        table = load(path)
        print(f"table {path.name}: {len(table['rows'])} trials, settings {table.get('settings')}")
        tasks += [(f"{t.name}, {table['settings'].get('steps')} steps", t) for t in tasks_of(table)]
    for title, task in tasks:
        seeds = task.seeds
        print(f"\n== {title}: {len(task.arms)} arms x {len(seeds)} seeds (complete) ==")
        for arm in task.arms:
            v = [task.values[arm][s] for s in seeds]
            print(f"  {task.labels[arm]:<28} mean {statistics.fmean(v):.3f}  sd {statistics.stdev(v):.3f}"
                  f"{'  (baseline)' if arm == task.arms[0] else ''}")
        for me in a.min_effect:
            calls, rec, best = truth(task, me)
            anytime = Rule(min_effect=me, stop_when_settled=True)
            b, back, notes = caught_up(task, anytime)
            seq_calls, seq_rec, _ = truth(task, me, sequential=True)
            print(f"\n  min_effect {me}: the CS at all {len(seeds)} seeds: "
                  f"{', '.join(f'{task.labels[x]} {c}' for x, c in seq_calls.items())}")
            print(f"  min_effect {me}: truth {', '.join(f'{task.labels[x]} {c}' for x, c in calls.items())}; "
                  f"recommended {task.labels[rec]}; best mean {task.labels[best]}")
            print(f"  3b: {b} arm(s) called worse than the final leader at an earlier evaluation point; {back} caught up"
                  + (f" ({'; '.join(notes)})" if notes else ""))
            rng = random.Random(0)
            orders = [rng.sample(seeds, len(seeds)) for _ in range(a.orders)]
            strategies: list[tuple[str, Callable[[list[int]], Outcome]]] = [
                ("full study (all seeds)", lambda o: Outcome(calls, rec, 1.0, set())),
                ("fixed 4 seeds", lambda o: run_fixed(task, o, me)),
                ("today's racing (t-test 0.95, 2 first)", lambda o: run_race(task, o, Rule(min_effect=me, kind="t-test"))),
                ("anytime racing + min_effect + stop", lambda o: run_race(task, o, anytime)),
                ("anytime racing, stop, 90% CS", lambda o: run_race(task, o, Rule(min_effect=me, confidence=0.9,
                                                                                      stop_when_settled=True))),
                ("anytime racing + stop + within-trial stop", lambda o: run_race(task, o, anytime, within=True)),
            ]
            print(f"  {'strategy (' + str(a.orders) + ' seed orders)':<44} {'median':>6} {'p90':>6} {'agree':>6} {'agreeCS':>7} "
                  f"{'same arm':>8} {'best out':>8} {'false +':>8}")
            for name, fn in strategies:
                print(summarise(name, [fn(o) for o in orders], calls, rec, best, (seq_calls, seq_rec)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
