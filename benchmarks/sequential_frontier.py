"""The frontier on the task where G matters: P(within min_effect of the best) against the seeds spent.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/sequential_frontier.py --json benchmarks/data/sequential_frontier_rare.json

benchmarks/sequential.py scores strategies at one planned size (12 seeds); this asks where the goal
(P(recommendation within 0.02 of the best) >= 0.90, at a median compute <= 50% of the best fixed
design reaching the same probability) could be reached on `addition_rare` (the committed 40-seed
table, benchmarks/data/sequential_table_rare.json), and what stands in the way. Four parts
(part 4 alone, keeping parts 1-3 of the file: add --only-elimination; 1 minute):

1. held-out truth, n = 3 ... 20 seeds: the report's answer (stats/selection.select) on n drawn
   seeds, scored against the mean of the 40 - n seeds it did not draw. Beside it a ceiling: an arm
   picked at random among those whose 40-seed means are tied with the best (G = 2, 4 and 8 are
   within 0.001 of each other, each mean with standard error 0.012), scored against the same truth.
   The ceiling falls as n grows because the truth keeps fewer seeds; the rule falls further because
   the split itself works against any choice among tied arms: their 40-seed totals are equal, so
   the arm that did best on the drawn seeds did worse on the rest (a held-out truth from the same
   40 seeds cannot score a choice among ties fairly).
2. planted "as measured": the arms' means set to the table's 40-seed means (exact truth), each seed's
   noise drawn from the table's residual covariance (every arm's value on a seed minus its 40-seed
   mean) and rounded to the 1/128 grid of a held-out reward, so ties come as real seeds make them
   (`gaussian_world` says why not the rows themselves), n = 3 ... 48.
3. the least-favourable configuration (one arm ahead by exactly min_effect; only it counts as
   within; the noise as in 2): the report's answer on a fixed n (12 ... 144 seeds),
   Bechhofer's paired fixed design reaching the same P(within) (stats/selection.bechhofer_pcs at
   the residual sd left once each seed's common effect is removed), and the group-sequential race
   (study/racing, Haybittle-Peto over one look per seed from 3, stopping at a stated P(within) of
   0.9 or 0.95) with 48 or 96 planned seeds: its median seeds per arm against Bechhofer's seeds
   for the P(within) it realised. Beside each race its FWER under the all-equal null (the same
   noise): P(any arm excluded or dropped, or any false better/worse/equivalent call).
4. the elimination race (racing.design: elimination; Kim & Nelson's procedure, stats/elimination.py)
   on the same least-favourable and all-equal worlds, capped at `--planned` seeds per arm, and on the
   held-out truth (the race on 20 drawn seeds of the table, scored against the other 20). A race is
   the procedure run once on the world's whole table, which replays exactly what the race reads
   seed by seed (tests/test_racing.py checks that); the answer is then the report's own on the seeds
   each arm ran (at race_record.ELIMINATION_LEVEL, 1%, the level the report holds it to). Reported: P(within 0.02) of the report's recommendation
   (and of the procedure's survivor), median and p90 seeds per arm, Bechhofer's seeds for the same
   P and the share, and the FWER of the report's statements (its eps-best exclusions and its
   better/worse/equivalent calls; an elimination is where seeds go, not a statement).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.stats import beta

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from sequential import DATA, Outcome, Task, World, answer, false_statement, run_race, tasks_of  # noqa: E402
from grpo_ablate.stats.elimination import eliminate  # noqa: E402
from grpo_ablate.stats.selection import bechhofer_pcs  # noqa: E402
from grpo_ablate.records.race_record import ELIMINATION_LEVEL  # noqa: E402
from grpo_ablate.study.racing import Rule  # noqa: E402

__all__ = ["held_out", "planted", "bechhofer_n", "elimination_race", "main"]

TABLE = DATA / "sequential_table_rare.json"
TARGET = 0.90
GRID = 1 / 128  # a held-out reward over 128 prompts scored 0 or 1
TIED = 0.002  # arms whose 40-seed means are this close to the best count as tied with it (G = 2, 4, 8 here)


def held_out(task: Task, n: int, me: float, studies: int, rng: random.Random) -> dict[str, float]:
    """The report's answer on n drawn seeds against the other seeds' mean, and the tied arms' ceiling."""
    seeds = task.seeds
    full = {a: statistics.fmean(task.values[a][s] for s in seeds) for a in task.arms}
    tied = [a for a in task.arms if max(full.values()) - full[a] < TIED]
    hits, gaps, ceiling = [], [], []
    for _ in range(studies):
        drawn = rng.sample(seeds, n)
        rest = [s for s in seeds if s not in drawn]
        truth = {a: statistics.fmean(task.values[a][s] for s in rest) for a in task.arms}
        rec = answer({a: {s: task.values[a][s] for s in drawn} for a in task.arms}, task.arms[0], me)[0]
        gap = max(truth.values()) - truth[rec]
        hits.append(gap < me - 1e-12)
        gaps.append(gap)
        # the ceiling: any of the arms tied over 40 seeds, at random, scored against the same truth
        ceiling.append(float(np.mean([max(truth.values()) - truth[a] < me - 1e-12 for a in tied])))
    return {"seeds": n, "truth_seeds": len(seeds) - n, "within": float(np.mean(hits)), "regret": float(np.mean(gaps)),
            "ceiling": float(np.mean(ceiling))}


def gaussian_world(task: Task, cov: np.ndarray, means: list[float], n: int, rng: random.Random,
                   shuffle: bool = True) -> World:
    """n seeds of the planted means (shuffled over the arms) plus noise drawn from the table's residual
    covariance, each value rounded to GRID (held-out rewards are multiples of 1/128: ties as real seeds
    make them). The table's own rows cannot serve past a few seeds: drawn with replacement, two seeds
    repeat every arm's value at once (7% of 3-seed studies; the race then stopped at its first look on
    that alone under the all-equal null); drawn without, they sum to zero over the 40 seeds, so a world
    of 40 seeds would have no noise at all."""
    perm = list(task.arms)
    if shuffle:
        rng.shuffle(perm)
    truth = dict(zip(perm, means))
    noise = np.random.default_rng(rng.randrange(2**32)).multivariate_normal(np.zeros(len(task.arms)), cov, size=n)
    values = {a: {i: round((truth[a] + float(noise[i, j])) / GRID) * GRID for i in range(n)}
              for j, a in enumerate(task.arms)}
    return World(values, truth, task.arms[0])


def planted(task: Task, means: list[float], n: int, me: float, studies: int, rng: random.Random,
            shuffle: bool = True) -> dict[str, float]:
    """The report's answer on n seeds of a planted world: P(within), regret, FWER, mean stated probability."""
    cov = np.cov(task.residual_rows(), rowvar=False)
    hits, gaps, false, stated = [], [], [], []
    for _ in range(studies):
        w = gaussian_world(task, cov, means, n, rng, shuffle)
        rec, pcs, calls, excl = answer(w.values, w.baseline, me)
        gap = max(w.truth.values()) - w.truth[rec]
        hits.append(gap < me - 1e-12)
        gaps.append(gap)
        false.append(false_statement(w, Outcome(rec, pcs, calls, excl, 0), me))
        stated.append(pcs if pcs is not None else float("nan"))
    return {"seeds": n, "within": float(np.mean(hits)), "regret": float(np.mean(gaps)), "fwer": float(np.mean(false)),
            "stated": float(np.nanmean(stated))}


def race(task: Task, means: list[float], max_seeds: int, confidence: float, me: float, studies: int,
         rng: random.Random) -> dict[str, float]:
    """The group-sequential race on planted worlds of max_seeds seeds: P(within), FWER, seeds per arm."""
    cov = np.cov(task.residual_rows(), rowvar=False)
    k = len(task.arms)
    rule = Rule(min_effect=me, confidence=confidence, design="group_sequential", max_seeds=max_seeds, first=3)
    hits, false, per_arm = [], [], []
    for _ in range(studies):
        w = gaussian_world(task, cov, means, max_seeds, rng)
        out = run_race(w, rule)
        hits.append(max(w.truth.values()) - w.truth[out.recommended] < me - 1e-12)
        false.append(false_statement(w, out, me))
        per_arm.append(out.trials / k)
    return {"max_seeds": max_seeds, "confidence": confidence, "within": float(np.mean(hits)),
            "fwer": float(np.mean(false)), "median_seeds_per_arm": float(np.median(per_arm)),
            "p90_seeds_per_arm": float(np.percentile(per_arm, 90))}


def _eliminated(w: World, me: float, confidence: float, n0: int) -> tuple[Outcome, str | None]:
    """The elimination race on the world's table: the report's answer on what each arm ran, and the survivor."""
    order = list(w.values[w.baseline])
    e = eliminate(w.values, delta=me, alpha=1.0 - confidence, n0=n0, order=order)
    ran = {a: (e.eliminated[a][1] if a in e.eliminated else (e.seeds if e.stopped else len(order))) for a in w.values}
    seen = {a: {s: w.values[a][s] for s in order[:ran[a]]} for a in w.values}
    rec, pcs, calls, excl = answer(seen, w.baseline, me, ELIMINATION_LEVEL)  # the level the report holds it to
    return Outcome(rec, pcs, calls, excl, sum(ran.values())), e.selected


def elimination_race(task: Task, means: list[float] | None, planned: int, confidence: float, n0: int, me: float,
                     studies: int, rng: random.Random) -> dict[str, float]:
    """The elimination race on planted worlds of `planned` seeds (means None: the held-out truth, 20 drawn
    seeds of the table, scored against the other 20): P(within), regret, FWER, seeds per arm."""
    cov = np.cov(task.residual_rows(), rowvar=False)
    k = len(task.arms)
    hits, survivor, gaps, false, per_arm, stated = [], [], [], [], [], []
    for _ in range(studies):
        if means is None:
            drawn = rng.sample(task.seeds, planned)
            rest = [s for s in task.seeds if s not in drawn]
            w = World({a: {s: task.values[a][s] for s in drawn} for a in task.arms},
                      {a: statistics.fmean(task.values[a][s] for s in rest) for a in task.arms}, task.arms[0])
        else:
            w = gaussian_world(task, cov, means, planned, rng)
        out, sel = _eliminated(w, me, confidence, n0)
        best = max(w.truth.values())
        gaps.append(best - w.truth[out.recommended])
        hits.append(gaps[-1] < me - 1e-12)
        survivor.append(sel is not None and best - w.truth[sel] < me - 1e-12)
        false.append(false_statement(w, out, me))
        per_arm.append(out.trials / k)
        stated.append(out.stated if out.stated is not None else float("nan"))
    return {"planned": planned, "confidence": confidence, "n0": n0, "within": float(np.mean(hits)),
            "survivor_within": float(np.mean(survivor)), "regret": float(np.mean(gaps)),
            "fwer": float(np.mean(false)), "stated": float(np.nanmean(stated)),
            "median_seeds_per_arm": float(np.median(per_arm)), "p90_seeds_per_arm": float(np.percentile(per_arm, 90))}


def bechhofer_n(k: int, me: float, sd: float, target: float) -> int | None:
    """The fewest seeds per arm of Bechhofer's fixed design reaching `target` (None: not below 2000)."""
    if target <= 1.0 / k:
        return 1
    lo, hi = 0, 2000
    if bechhofer_pcs(k, hi, me, sd) < target:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if bechhofer_pcs(k, mid, me, sd) >= target else (mid, hi)
    return hi


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", type=Path, default=TABLE)
    p.add_argument("--studies", type=int, default=200, help="replayed studies per fixed-size point")
    p.add_argument("--race-studies", type=int, default=100, help="replayed races per race setting (and per null)")
    p.add_argument("--min-effect", type=float, default=0.02)
    p.add_argument("--planned", type=int, default=256, help="the elimination race's planned seeds per arm")
    p.add_argument("--elimination-races", type=int, default=400, help="replayed elimination races per setting")
    p.add_argument("--only-elimination", action="store_true",
                   help="run part 4 only, keeping parts 1-3 of --json (part 4 draws from its own seed either way)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    me = a.min_effect
    task = tasks_of(json.loads(a.table.read_text()))[0]
    k, seeds = len(task.arms), task.seeds
    res = task.residual_rows()
    within_seed = res - res.mean(axis=1, keepdims=True)
    sd_paired = float(math.sqrt((within_seed**2).sum() / ((len(seeds) - 1) * (k - 1))))
    full = {x: statistics.fmean(task.values[x][s] for s in seeds) for x in task.arms}
    rng = random.Random(0)
    if a.only_elimination:
        out = json.loads(a.json.read_text()) if a.json and a.json.exists() else {}
        out["elimination"] = elimination_part(task, me, a.planned, a.elimination_races, sd_paired, random.Random(1))
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))
        return 0
    out: dict = {"task": task.name, "min_effect": me, "seeds": len(seeds), "sd_paired": sd_paired,
                 "means": {task.labels[x]: full[x] for x in task.arms}}
    print(f"== {task.name}: {k} arms x {len(seeds)} seeds, min_effect {me}, target P(within) {TARGET} ==")
    for x in task.arms:
        print(f"  {task.labels[x]:<22} 40-seed mean {full[x]:.4f}")

    print(f"\n1. held-out truth ({a.studies} studies per n): the report's answer vs the tied arms' ceiling")
    print(f"    {'seeds':>5} {'truth':>5} {'within':>6} {'regret':>7} {'ceiling':>7}")
    out["held_out"] = []
    for n in (3, 4, 6, 8, 12, 16, 20):
        r = held_out(task, n, me, a.studies, rng)
        out["held_out"].append(r)
        print(f"    {n:>5} {r['truth_seeds']:>5} {r['within']:>6.3f} {r['regret']:>7.4f} {r['ceiling']:>7.3f}", flush=True)

    print(f"\n2. planted as measured (the 40-seed means exact; the residual covariance, on the 1/128 grid; {a.studies} studies)")
    print(f"    {'seeds':>5} {'within':>6} {'regret':>7} {'FWER':>6} {'stated':>6}")
    out["as_measured"] = []
    measured = [full[x] for x in task.arms]
    for n in (3, 4, 6, 8, 12, 24, 48):
        r = planted(task, measured, n, me, a.studies, rng, shuffle=False)
        out["as_measured"].append(r)
        print(f"    {n:>5} {r['within']:>6.3f} {r['regret']:>7.4f} {r['fwer']:>6.3f} {r['stated']:>6.3f}", flush=True)

    lfc = [0.5 + me] + [0.5] * (k - 1)
    print(f"\n3. least favourable (best +{me}; paired residual sd {sd_paired:.3f}); Bechhofer: seeds per arm of the "
          f"fixed design reaching the same P(within)")
    print(f"    fixed n ({a.studies} studies):")
    print(f"    {'seeds':>5} {'within':>6} {'regret':>7} {'FWER':>6} {'stated':>6} {'Bechhofer n':>11}")
    out["lfc_fixed"] = []
    for n in (12, 24, 48, 96, 144):
        r = planted(task, lfc, n, me, a.studies, rng)
        r["bechhofer_n"] = bechhofer_n(k, me, sd_paired, r["within"])
        out["lfc_fixed"].append(r)
        print(f"    {n:>5} {r['within']:>6.3f} {r['regret']:>7.4f} {r['fwer']:>6.3f} {r['stated']:>6.3f} "
              f"{r['bechhofer_n'] or '-':>11}", flush=True)
    print(f"    group-sequential race ({a.race_studies} races per setting; FWER also under the all-equal null):")
    print(f"    {'planned':>7} {'stop at':>7} {'within':>6} {'FWER':>6} {'median n':>8} {'p90 n':>6} "
          f"{'Bechhofer n':>11} {'share':>6} {'null FWER':>9} {'null median n':>13}")
    out["lfc_race"] = []
    for max_seeds in (48, 96):
        for conf in (0.9, 0.95):
            r = race(task, lfc, max_seeds, conf, me, a.race_studies, rng)
            b = bechhofer_n(k, me, sd_paired, r["within"])
            null = race(task, [0.5] * k, max_seeds, conf, me, a.race_studies, rng)
            r.update(bechhofer_n=b, share=(r["median_seeds_per_arm"] / b) if b else None, null_fwer=null["fwer"],
                     null_median_seeds_per_arm=null["median_seeds_per_arm"])
            out["lfc_race"].append(r)
            share = f"{r['share']:.2f}" if r["share"] is not None else "-"
            print(f"    {max_seeds:>7} {conf:>7g} {r['within']:>6.3f} {r['fwer']:>6.3f} {r['median_seeds_per_arm']:>8.1f} "
                  f"{r['p90_seeds_per_arm']:>6.1f} {b or '-':>11} {share:>6} {null['fwer']:>9.3f} "
                  f"{null['median_seeds_per_arm']:>13.1f}", flush=True)
    out["bechhofer_target"] = {str(t): bechhofer_n(k, me, sd_paired, t) for t in (0.8, 0.9, 0.95)}
    print("\n  Bechhofer's paired fixed design at the least-favourable configuration: "
          + ", ".join(f"P {t} needs {n} seeds per arm" for t, n in out["bechhofer_target"].items()))
    out["elimination"] = elimination_part(task, me, a.planned, a.elimination_races, sd_paired, random.Random(1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


def elimination_part(task: Task, me: float, planned: int, studies: int, sd_paired: float,
                     rng: random.Random) -> list[dict]:
    """Part 4: the elimination race (module docstring) at the least-favourable configuration, under the
    all-equal null, and on the held-out truth; the goal's test printed for each setting."""
    k = len(task.arms)
    lfc = [0.5 + me] + [0.5] * (k - 1)
    print(f"\n4. the elimination race (Kim & Nelson; {studies} races per setting, planned {planned} seeds per arm): "
          f"the report's answer on what ran")
    print("    within: the report's pick; KN pick: the procedure stopped and its survivor is within; P low: the")
    print("    realised within's one-sided 95% lower bound, at which Bechhofer's seeds are counted (share = median / them;")
    print("    at P: the same at the realised within itself); goal: within >= 0.90 and share <= 0.5")
    print(f"    {'world':<17} {'conf':>4} {'n0':>3} {'within':>6} {'KN pick':>7} {'regret':>7} {'FWER':>6} "
          f"{'stated':>6} {'median n':>8} {'p90 n':>6} {'P low':>5} {'Bechhofer n':>11} {'share':>6} {'at P':>5}  goal")
    rows = []
    for conf, n0 in ((0.8, 20), (0.8, 30), (0.9, 20), (0.9, 30)):
        for world, means, n in (("least favourable", lfc, planned), ("all equal", [0.5] * k, planned),
                                ("held-out (20/20)", None, 20)):
            r = elimination_race(task, means, n, conf, n0, me, studies, rng)
            r["world"] = world
            if world == "least favourable":
                # Bechhofer at the realised P's one-sided 95% lower bound (Clopper-Pearson): a realised 1.000
                # of a few hundred races does not mean Bechhofer would need infinitely many seeds
                hits = round(r["within"] * studies)
                low = float(beta.ppf(0.05, hits, studies - hits + 1)) if hits else 0.0
                b = bechhofer_n(k, me, sd_paired, low)
                at = bechhofer_n(k, me, sd_paired, r["within"]) if r["within"] < 1 else None
                r.update(within_low=low, bechhofer_n=b, share=(r["median_seeds_per_arm"] / b) if b else None,
                         bechhofer_n_at_point=at, share_at_point=(r["median_seeds_per_arm"] / at) if at else None)
                r["goal"] = bool(r["within"] >= TARGET and r["share"] is not None and r["share"] <= 0.5)
            rows.append(r)
            share = f"{r['share']:.2f}" if r.get("share") is not None else "-"
            point = f"{r['share_at_point']:.2f}" if r.get("share_at_point") is not None else "-"
            goal = ("reached" if r["goal"] else "not reached") if "goal" in r else ""
            print(f"    {world:<17} {conf:>4g} {n0:>3} {r['within']:>6.3f} {r['survivor_within']:>7.3f} "
                  f"{r['regret']:>7.4f} {r['fwer']:>6.3f} {r['stated']:>6.3f} {r['median_seeds_per_arm']:>8.1f} "
                  f"{r['p90_seeds_per_arm']:>6.1f} {r.get('within_low', float('nan')):>5.3f} {r.get('bechhofer_n') or '-':>11} {share:>6} {point:>5}  {goal}", flush=True)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
