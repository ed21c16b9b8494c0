"""Arms that branch from one shared prefix against arms trained from scratch: which G, at what compute.

    nice -n 19 python benchmarks/branching.py --seeds 40     # train the branches (resumable; 40 seeds took 25 min on 1 shared core)
    python benchmarks/branching.py --from-table               # the figures from the committed tables, no training

Issue 39 asks whether a study whose arms branch from one shared prefix answers "which G" as often
within min_effect of the best as a study whose arms train from step 0, at half its compute or less.

The task is `addition_rare`, the task where G matters (issue 40), and the "full run" is the 60-step
run of the committed 40-seed table benchmarks/data/sequential_table_rare.json (G = 8, 2, 4, 16, 32 at
32 completions per step, constant learning rate 2e-4, no warmup; 128 held-out prompts scored greedily).
That table is reused whole, because its settings are the full run's: its 60-step rewards are the
truth (what each G gives when the whole run uses it), and its evaluation points at 20 and 40 steps
are exactly what from-scratch trials of 20 and 40 steps would score (the learning rate is constant,
so a shorter trial is the longer one's first steps; the held-out evaluation is greedy and does not
move training's random stream; checked on every seed: the rebuilt 20-step G=8 prefix scores what the
table's G=8 trial scored at step 20, and its G=8 branch what that trial scored at step 60). The full run has no warmup because the truth was trained without
one: "branching past a warmup" is tested here as branching past the run's first third (step 20).

What this script trains (benchmarks/data/branching.json, saved after every trial; an interrupted
build resumes where it stopped, seeds outermost): per seed, the baseline (G=8) prefix of 20 steps,
saved as a trainer checkpoint (model, optimizer, scheduler, RNG), then every G arm started from that
checkpoint (contract/spec.py StartFrom, trainer/build.py) and trained on to the full run's step 60,
scored at steps 20 (the branch point), 30, 40, 50 and 60. The trials are built the way the study builds them
(study/trial_spec.build_spec from the table's own study file) and run in one warm session.

Designs (compute in optimizer steps per seed; every arm generates 32 completions a step, so steps
are generated compute):
- scratch T: every arm trains T steps from step 0 (T = 20, 40, 60; 60 is the full run itself);
- branched +T': one 20-step prefix, then every arm T' steps from it (T' = 10, 20, 40; +40 ends where the
  full run ends): 20 + 5 x T'.

Scoring (common random numbers: every design sees the same seeds in a replay): a replayed study
draws k seeds; its answer is the package's selection (stats/selection.select) on those seeds. It is
scored against two truths, both over the seeds the replay did not draw: the full-run truth (the
60-step table's means: what the user's run gets from the answer) and the design's own truth (its
own measurement's means over the other seeds, as issue 40's benchmark does). "within": the answer's
truth is within min_effect of the truth's best; "regret": the mean gap. And per design, on all its
seeds, which G is best with its uncertainty (means with 95% intervals, P(best) by a bootstrap over
seeds, the package's eps-best set), so a design that changes the best G shows it, and each arm's
effect (arm minus G=8) under branching against from scratch at the same last step, paired over seeds.

Reading the page: a no-study control (always keep G=8) is scored beside the designs, and the truth's
own standard error is printed. On this table G = 2, 4 and 8 end the full run within 3/128 of each
other over 40 seeds, so "within 0.02" against a 28-seed held-out mean mostly measures that mean's
noise (and the control, which ignores the data, scores highest); the "wrong" column (answers that are
min_effect or more behind on all 40 seeds, i.e. G=16 or G=32, 0.077 and 0.13 behind) and the regret
are what separate the designs here.

    python benchmarks/branching.py --from-table --json benchmarks/data/branching_figures.json

The warmup mode (`--warmup W`, its own table benchmarks/data/branching_warmup.json, resumable the same way)
measures what the mode above cannot: a full run WITH a warmup. The full run is `--full` N steps (60) under
a cosine schedule whose first W steps warm the learning rate up to 2e-4 (transformers' `cosine`: linear
warmup, then cosine decay to zero at step N), every trial with `budget.lr_schedule: prefix` and
`budget.full_run.max_steps: N`, so step k has the full run's rate whatever the trial's length. Per seed it
trains every G over the whole full run from step 0 (the truth, scored at N; and every from-scratch design,
since a T-step trial is the full run's first T steps, scored at N/4, N/2 and 3N/4: from-scratch trials that
start inside the warmup), then the G=8 prefix of W steps (checkpointed) and every G branched from it to
step N, scored at W and at thirds of the branch. Designs: scratch N (the full run), 3N/4, N/2, N/4;
branched at W, +(N-W), +2(N-W)/3, +(N-W)/3. The scoring is the mode above's (`score`), with the truth's
seeds in the "wrong" column, and two checks printed: the prefix's score at W equals the full G=8 run's
at W, and the G=8 branch's at N equals the full run's at N (a branch of the same G is the run resumed).

    nice -n 19 python benchmarks/branching.py --warmup 15 --seeds 40 --k 12   # build and score (resumable; 40 seeds took 25 min on 1 shared core)
    python benchmarks/branching.py --warmup 15 --from-table --k 12 --json benchmarks/data/branching_warmup_figures.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpo_ablate.stats.selection import eps_best, select  # noqa: E402
from grpo_ablate.core.vocab import Outcome  # noqa: E402

__all__ = ["DATA", "TRUTH", "WARMUP_DATA", "Design", "scratch_design", "branched_design", "designs", "replay",
           "best_g", "score", "full_run_design", "warmup_designs", "warmup_figures", "build", "build_warmup", "figures",
           "main"]

DATA = Path(__file__).resolve().parent / "data" / "branching.json"
TRUTH = Path(__file__).resolve().parent / "data" / "sequential_table_rare.json"
TASK = "addition_rare"
GENERATIONS = [8, 2, 4, 16, 32]  # the table's arms, the baseline first
PER_STEP = 32  # completions per optimizer step, every arm
FULL = 60  # the full run's steps (the table's)
BRANCH = 20  # the branch point: the prefix's steps
BRANCH_STEPS = 40  # a branch's own steps, to the full run's end (scored every 10 steps)
BRANCH_POINTS = 3  # the branch's interior evaluation points: steps 30, 40, 50
EVAL_PROMPTS = 128
K = 12  # seeds in a replayed study (benchmarks/sequential.py's PLANNED)
MIN_EFFECTS = (0.02, 0.05)
DRAWS = 2000  # the selection's Monte Carlo draws per answer (its probability is not scored here)


# ------------------------------------------------------------------ designs (pure)


@dataclass(frozen=True)
class Design:
    """One way to run the study: each arm's reward per seed, and its compute in optimizer steps per seed."""

    name: str
    values: dict[str, dict[int, float]]  # arm -> {seed: held-out reward}
    steps_per_seed: int

    @property
    def seeds(self) -> list[int]:
        sets = [set(v) for v in self.values.values()]
        return sorted(set.intersection(*sets)) if sets else []


def _at_step(curve: Sequence[Sequence[float]], step: int, per_step: int) -> float | None:
    """The reward a curve of [[completions, reward], ...] holds at exactly `step` optimizer steps."""
    for done, reward in curve:
        if int(done) == step * per_step:
            return float(reward)
    return None


def scratch_design(table: Mapping[str, Any], steps: int, arms: int = len(GENERATIONS)) -> Design:
    """Every arm trained `steps` from step 0, read from the full-run table (its final reward at the full run's length)."""
    values: dict[str, dict[int, float]] = {}
    full = int(table["settings"]["steps"])
    for r in table["rows"]:
        if r["outcome"] != "completed" or r["objective"] is None:
            continue
        v = float(r["objective"]) if steps == full else _at_step(r["curve"], steps, PER_STEP)
        if v is not None:
            values.setdefault(r["arm"], {})[int(r["seed"])] = v
    return Design(f"scratch, {steps} steps", values, arms * steps)


def branched_design(rows: Sequence[Mapping[str, Any]], prefix: int, steps: int, arms: int = len(GENERATIONS)) -> Design:
    """Every arm trained `steps` from one `prefix`-step baseline checkpoint per seed: the branch rows' reward at prefix + steps."""
    values: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["kind"] != "branch" or r["outcome"] != "completed":
            continue
        v = next((float(x) for s, x in r["curve"] if int(s) == prefix + steps), None)
        if v is not None:
            values.setdefault(r["arm"], {})[int(r["seed"])] = v
    return Design(f"branched at {prefix}, +{steps} steps", values, prefix + arms * steps)


def designs(table: Mapping[str, Any], branch_rows: Sequence[Mapping[str, Any]]) -> list[Design]:
    """The benchmark's designs: scratch 60 (the full run), 40 and 20; branched at 20, +40 (to the full run's end), +20 and +10."""
    out = [scratch_design(table, s) for s in (FULL, 40, 20)]
    out += [branched_design(branch_rows, BRANCH, s) for s in (40, 20, 10)]
    return out


# ------------------------------------------------------------------ scoring (pure)


def _means(values: Mapping[str, Mapping[int, float]], seeds: Sequence[int]) -> dict[str, float]:
    return {a: statistics.fmean(v[s] for s in seeds) for a, v in values.items()}


def _answer(values: Mapping[str, Mapping[int, float]], seen: Sequence[int], me: float) -> str:
    sel = select({a: {s: v[s] for s in seen} for a, v in values.items()}, me, draws=DRAWS)
    assert sel.recommended is not None
    return str(sel.recommended)


def replay(design: Design, truth: Design, k: int, me: float, replays: int, seed: int = 0,
           pool: Sequence[int] | None = None) -> dict[str, Any]:
    """`replays` studies of k seeds under `design`, each scored against the seeds it did not see.

    Seeds are drawn from `pool` (by default the seeds both designs have) with one generator per
    (k, seed): every design replayed with the same arguments and pool sees the same seeds in the same
    replay (common random numbers), so two designs' rates differ by their answers, not by their draws.
    The full-run truth is the truth's mean over all its seeds the replay did not see; the design's
    own truth its own mean over its other seeds. Returns the rates against the full-run truth
    ("within", "regret") and against the design's own truth ("own_within", "own_regret"), "wrong":
    how often the answer is min_effect or more behind the best on all the truth's seeds (not held
    out: it reads the seen seeds too, so it is sound only where those gaps are many standard errors
    wide; the page prints them), each replay's answer and gaps ("answers"), and the compute of a
    k-seed study in optimizer steps.
    """
    shared = set(design.seeds) & set(truth.seeds)
    seeds = sorted(shared if pool is None else set(pool))
    if not set(seeds) <= shared:
        raise ValueError(f"{design.name}: the pool has seeds the design or the truth lacks: {sorted(set(seeds) - shared)}")
    if len(seeds) <= k:
        raise ValueError(f"{design.name}: {len(seeds)} seeds shared with the truth; a replay of {k} needs more "
                         f"so the truth has seeds the replay did not see")
    arms = sorted(design.values)
    if set(arms) != set(truth.values):
        raise ValueError(f"{design.name}: arms {arms} differ from the truth's {sorted(truth.values)}")
    rng = random.Random(f"{k}-{seed}")
    answers = []
    for _ in range(replays):
        seen = rng.sample(seeds, k)
        full = _means(truth.values, [s for s in truth.seeds if s not in seen])
        own = _means(design.values, [s for s in design.seeds if s not in seen])
        rec = _answer(design.values, seen, me)
        answers.append({"seen": seen, "answer": rec, "gap": max(full.values()) - full[rec],
                        "own_gap": max(own.values()) - own[rec]})
    gaps = np.array([a["gap"] for a in answers])
    own_gaps = np.array([a["own_gap"] for a in answers])
    whole = _means(truth.values, truth.seeds)
    behind = np.array([max(whole.values()) - whole[a["answer"]] for a in answers])
    return {"design": design.name, "k": k, "min_effect": me, "replays": replays,
            "within": float(np.mean(gaps < me - 1e-12)), "regret": float(np.mean(gaps)),
            "own_within": float(np.mean(own_gaps < me - 1e-12)), "own_regret": float(np.mean(own_gaps)),
            "wrong": float(np.mean(behind >= me - 1e-12)),
            "steps": k * design.steps_per_seed, "answers": answers}


def fixed_answer(arm: str, truth: Design, seens: Sequence[Sequence[int]], me: float) -> dict[str, Any]:
    """The control that needs no study: always answer `arm` (the baseline), scored on the replays' held-out seeds.

    Where it is within min_effect as often as a design, the benchmark cannot tell that design from
    keeping the default (issue 40's point about a guarantee that cannot fail)."""
    gaps = []
    for seen in seens:
        full = _means(truth.values, [s for s in truth.seeds if s not in seen])
        gaps.append(max(full.values()) - full[arm])
    g = np.array(gaps)
    whole = _means(truth.values, truth.seeds)
    return {"within": float(np.mean(g < me - 1e-12)), "regret": float(np.mean(g)),
            "wrong": float(max(whole.values()) - whole[arm] >= me - 1e-12)}


def truth_error(truth: Design, held: int) -> dict[str, float]:
    """The held-out truth's own noise: the standard error of the paired difference between the two best arms
    (on all the truth's seeds) when it is a mean over `held` seeds. A gap smaller than a few of these is
    the truth's noise, not a wrong answer."""
    means = _means(truth.values, truth.seeds)
    first, second = sorted(means, key=lambda a: -means[a])[:2]
    d = np.array([truth.values[first][s] - truth.values[second][s] for s in truth.seeds])
    return {"arms": [first, second], "sd": float(d.std(ddof=1)), "held": held, "se": float(d.std(ddof=1) / math.sqrt(held))}


def paired_difference(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], me: float) -> dict[str, float]:
    """within(a) - within(b) over the same replays (same seeds), with its standard error over replays.

    The replays share the table's 40 seeds, so they are not independent draws of the world: the
    error is the Monte Carlo error of the replays, not the uncertainty of a new table (the page says so).
    """
    if len(a) != len(b) or any(x["seen"] != y["seen"] for x, y in zip(a, b)):
        raise ValueError("the two designs were not replayed on the same seeds")
    d = np.array([float(x["gap"] < me - 1e-12) - float(y["gap"] < me - 1e-12) for x, y in zip(a, b)])
    return {"difference": float(d.mean()), "se": float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan}


def best_g(design: Design, me: float, boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Which arm is best on all the design's seeds, and how sure: means with 95% t intervals, P(best) by a
    bootstrap over whole seeds (every arm of a resampled seed kept together: the arms share it), and the
    package's eps-best set at `me` (arms not excluded from being within me of the best)."""
    seeds = design.seeds
    arms = sorted(design.values)
    x = np.array([[design.values[a][s] for a in arms] for s in seeds])
    n = len(seeds)
    means = x.mean(axis=0)
    half = sps.t.ppf(0.975, n - 1) * x.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.full(len(arms), math.nan)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(boot, n))
    winners = np.argmax(x[picks].mean(axis=1), axis=1)
    p_best = np.bincount(winners, minlength=len(arms)) / boot
    keep, _ = eps_best({a: {s: design.values[a][s] for s in seeds} for a in arms}, me)
    return {"design": design.name, "seeds": n, "best": arms[int(np.argmax(means))],
            "arms": {a: {"mean": float(m), "ci95": float(h), "p_best": float(p)} for a, m, h, p in zip(arms, means, half, p_best)},
            "eps_best": sorted(keep, key=lambda a: -means[arms.index(a)])}


def effect_change(a: Design, b: Design, baseline: str) -> dict[str, dict[str, float]]:
    """Per arm: its effect (arm minus baseline, paired over seeds) under `a` and under `b`, and the change
    a - b with a 95% t interval paired over the seeds both have (a seed's branch and its from-scratch
    trial share the seed, so the pairing removes what the seed does to both)."""
    seeds = sorted(set(a.seeds) & set(b.seeds))
    out: dict[str, dict[str, float]] = {}
    if len(seeds) < 3:
        return out
    for arm in sorted(a.values):
        if arm == baseline:
            continue
        ea = np.array([a.values[arm][s] - a.values[baseline][s] for s in seeds])
        eb = np.array([b.values[arm][s] - b.values[baseline][s] for s in seeds])
        d = ea - eb
        half = float(sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
        out[arm] = {"effect_a": float(ea.mean()), "effect_b": float(eb.mean()), "change": float(d.mean()),
                    "ci95": half, "seeds": len(seeds)}
    return out


def figures(table: Mapping[str, Any], branch: Mapping[str, Any], k: int = K, replays: int = 400) -> dict[str, Any]:
    """Every design replayed at every min_effect, the paired differences against the full run, and the best G of each."""
    labels = {r["arm"]: r["label"] for r in table["rows"]}
    base = next(r["arm"] for r in table["rows"] if r["role"] == "baseline")
    out = score(designs(table, branch.get("rows", [])), labels, base, k, replays,
                [(f"branched at {BRANCH}, +40 steps", f"scratch, {FULL} steps"),
                 (f"branched at {BRANCH}, +20 steps", "scratch, 40 steps")])  # the same last step
    out["seconds"] = _seconds(table, branch)
    out["reproduced"] = _reproduced(table, branch.get("rows", []))
    out["branch"], out["full"] = BRANCH, FULL
    return out


def score(ds: Sequence[Design], labels: Mapping[str, str], base: str, k: int, replays: int,
          same_end: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The page's figures for designs whose first is the full run (the truth): each design with enough seeds
    replayed at every min_effect beside the no-study control, each branched design paired with each
    from-scratch one, each design's best G, and G's effects compared for the (branched, scratch) pairs
    of `same_end` (designs that end at the same step)."""
    truth = ds[0]
    have = [d for d in ds if len(set(d.seeds) & set(truth.seeds)) > k and set(d.values) == set(truth.values)]
    out: dict[str, Any] = {"k": k, "replays": replays, "labels": dict(labels), "rows": [], "paired": [], "best": [],
                           "truth_seeds": len(truth.seeds)}
    pool = sorted(set.intersection(*(set(d.seeds) for d in have)))  # every design draws the same seeds
    out["pool"] = len(pool)
    out["truth_error"] = truth_error(truth, len(truth.seeds) - k)
    for me in MIN_EFFECTS:
        reps = {d.name: replay(d, truth, k, me, replays, pool=pool) for d in have}
        control = fixed_answer(base, truth, [a["seen"] for a in reps[truth.name]["answers"]], me)
        out["rows"].append({"design": f"no study: keep the baseline ({labels[base].split(',')[0]})", "k": 0,
                            "min_effect": me, "replays": replays, **control, "own_within": None, "own_regret": None,
                            "steps": 0, "share_of_full": 0.0, "answer_counts": {base: replays}})
        for d in have:
            row = {key: v for key, v in reps[d.name].items() if key != "answers"}
            row["share_of_full"] = d.steps_per_seed / truth.steps_per_seed
            row["answer_counts"] = {a: sum(1 for x in reps[d.name]["answers"] if x["answer"] == a) for a in sorted(d.values)}
            out["rows"].append(row)
        scratch = [d for d in have if d.name.startswith("scratch")]
        for d in have:
            if d in scratch:
                continue
            for other in scratch:  # each branched design against each from-scratch one, on the same replays
                out["paired"].append({"design": d.name, "against": other.name, "min_effect": me,
                                      "share": d.steps_per_seed / other.steps_per_seed,
                                      **paired_difference(reps[d.name]["answers"], reps[other.name]["answers"], me)})
    for d in have:
        out["best"].append(best_g(d, MIN_EFFECTS[0]))
    named = {d.name: d for d in have}
    out["changes"] = []
    for branched, scratch_name in same_end:
        if branched in named and scratch_name in named:
            out["changes"].append({"design": branched, "against": scratch_name,
                                   "arms": effect_change(named[branched], named[scratch_name], base)})
    return out


def full_run_design(rows: Sequence[Mapping[str, Any]], steps: int, arms: int = len(GENERATIONS)) -> Design:
    """Every arm trained `steps` from step 0: the warmup table's full-run rows (kind "full") read at step `steps`.

    Under `budget.lr_schedule: prefix` a trial of `steps` steps is the full run's first `steps` steps
    (the schedule is the full run's; the held-out evaluation is greedy and leaves training's random
    stream alone), so its score is the full run's at that step."""
    values: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["kind"] != "full" or r["outcome"] != "completed":
            continue
        v = next((float(x) for s, x in r["curve"] if int(s) == steps), None)
        if v is not None:
            values.setdefault(r["arm"], {})[int(r["seed"])] = v
    return Design(f"scratch, {steps} steps", values, arms * steps)


def warmup_designs(rows: Sequence[Mapping[str, Any]], warmup: int, full: int) -> list[Design]:
    """The warmup mode's designs: from scratch for the full run (the truth) and its quarters (from step 0,
    through the warmup), and branched at the warmup's end for the rest of the run and its thirds."""
    out = [full_run_design(rows, full)] + [full_run_design(rows, full * q // 4) for q in (3, 2, 1)]
    rest = full - warmup
    out += [branched_design(rows, warmup, rest * q // 3) for q in (3, 2, 1)]
    return out


def warmup_figures(table: Mapping[str, Any], k: int, replays: int = 400) -> dict[str, Any]:
    """The warmup mode's page: `score` on warmup_designs, with the checks that the branched runs are the full run's."""
    st = table["settings"]
    warmup, full = int(st["branch"]), int(st["full_run"])
    rows = table["rows"]
    labels = {r["arm"]: r["label"] for r in rows}
    base = next(r["arm"] for r in rows if r["kind"] == "prefix")
    rest = full - warmup
    same = [(f"branched at {warmup}, +{rest * q // 3} steps", f"scratch, {warmup + rest * q // 3} steps") for q in (3, 2, 1)]
    out = score(warmup_designs(rows, warmup, full), labels, base, k, replays, same)
    out["branch"], out["full"], out["settings"] = warmup, full, dict(st)
    per_seed: dict[str, dict[int, float]] = {}
    for r in rows:
        if r.get("seconds") is not None:
            side = "full" if r["kind"] == "full" else "branched"
            per_seed.setdefault(side, {})[r["seed"]] = per_seed.get(side, {}).get(r["seed"], 0.0) + float(r["seconds"])
    count = {(side, s): sum(1 for r in rows if r["seed"] == s and (r["kind"] == "full") == (side == "full"))
             for side in ("full", "branched") for s in {r["seed"] for r in rows}}
    arms = len({r["arm"] for r in rows})
    whole = {side: [v for s, v in per_seed.get(side, {}).items() if count[(side, s)] == arms + (side != "full")]
             for side in ("full", "branched")}
    out["seconds"] = {"full_per_seed": statistics.median(whole["full"]) if whole["full"] else None,
                      "branched_per_seed": statistics.median(whole["branched"]) if whole["branched"] else None}
    ref = {r["seed"]: r["curve"] for r in rows if r["kind"] == "full" and r["arm"] == base and r["outcome"] == "completed"}
    rep = {"prefix_equal": 0, "prefix_total": 0, "resume_equal": 0, "resume_total": 0}
    for r in rows:
        if r["seed"] not in ref or r["outcome"] != "completed" or r["kind"] == "full":
            continue
        at = dict((int(s), x) for s, x in ref[r["seed"]])
        mine = dict((int(s), x) for s, x in r["curve"])
        if r["kind"] == "prefix":
            rep["prefix_total"] += 1
            rep["prefix_equal"] += int(mine.get(warmup) is not None and mine.get(warmup) == at.get(warmup))
        elif r["arm"] == base:
            rep["resume_total"] += 1
            rep["resume_equal"] += int(mine.get(full) is not None and mine.get(full) == at.get(full))
    out["reproduced"] = rep
    return out


def _seconds(table: Mapping[str, Any], branch: Mapping[str, Any]) -> dict[str, float | None]:
    """Measured seconds per seed (medians): the full run's 5 trials (the table, built at another time and load) and
    the branched design's prefix + 5 branches."""
    full = [r["seconds"] for r in table["rows"] if r.get("seconds") is not None]
    rows = branch.get("rows", [])
    per_seed: dict[int, float] = {}
    for r in rows:
        if r.get("seconds") is not None:
            per_seed[r["seed"]] = per_seed.get(r["seed"], 0.0) + float(r["seconds"])
    whole = [v for s, v in per_seed.items() if sum(1 for r in rows if r["seed"] == s) == 1 + len(GENERATIONS)]
    # medians: a session's first trial carries its start-up
    return {"full_per_seed": statistics.median(full) * len(GENERATIONS) if full else None,
            "branched_per_seed": statistics.median(whole) if whole else None}


def _reproduced(table: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How often the prefix's reward at step 20 equals the table's baseline at step 20 (the same trial, rebuilt),
    and the branched baseline's at step 40 the table's at 40 (a branch of the same G is the run resumed)."""
    base = next((r["arm"] for r in table["rows"] if r["role"] == "baseline"), None)
    ref = {r["seed"]: r["curve"] for r in table["rows"] if r["arm"] == base}
    out = {"prefix_equal": 0, "prefix_total": 0, "resume_equal": 0, "resume_total": 0}
    for r in rows:
        if r["seed"] not in ref or r["outcome"] != "completed":
            continue
        if r["kind"] == "prefix":
            out["prefix_total"] += 1
            out["prefix_equal"] += int(r["objective"] == _at_step(ref[r["seed"]], BRANCH, PER_STEP))
        elif r["arm"] == base:
            end = next((x for s, x in r["curve"] if s == BRANCH + BRANCH_STEPS), None)
            out["resume_total"] += 1
            out["resume_equal"] += int(end == _at_step(ref[r["seed"]], BRANCH + BRANCH_STEPS, PER_STEP))
    return out


# ------------------------------------------------------------------ training (the real trainer)


def settings() -> dict[str, Any]:
    return {"task": TASK, "generations": GENERATIONS, "full_run": FULL, "branch": BRANCH, "branch_steps": BRANCH_STEPS,
            "eval_prompts": EVAL_PROMPTS, "per_step": PER_STEP, "truth": TRUTH.name}


def load(path: Path = DATA) -> dict[str, Any]:
    """The table at `path` (an empty one when there is none yet): sequential_table's reader, this table's default."""
    from sequential_table import load as load_table

    return load_table(path)


def _save(table: dict[str, Any], path: Path) -> None:
    from sequential_table import _save as save_table  # one writer of these tables (whole, then renamed into place)

    save_table(table, path)


def _record(table: dict[str, Any], path: Path, kind: str, cell: Any, folder: Path, result: Any,
            seconds: float) -> dict[str, Any]:
    """One trained trial's row (its held-out curve and per-prompt outcomes), added to the table and saved at
    once (a stopped build resumes after it); a failure's reason and log tail are printed."""
    evals = _evals(folder)
    row = {"kind": kind, "task": TASK, "arm": cell.arm.key, "label": cell.arm.label, "seed": cell.seed,
           "outcome": result.outcome.value, "objective": (result.metrics or {}).get("eval_final_reward"),
           "curve": [[e["step"], e["reward"]] for e in evals],
           "per_prompt": evals[-1].get("per_prompt") if evals else None, "seconds": round(seconds, 1)}
    table["rows"].append(row)
    _save(table, path)
    print(f"{time.strftime('%H:%M:%S')} {kind} {cell.arm.label} seed {cell.seed}: {row['outcome']} "
          f"curve={[(s, round(r, 3)) for s, r in row['curve']]} ({row['seconds']} s)", flush=True)
    if result.outcome is not Outcome.COMPLETED:
        print(result.reason, (result.log_tail or "")[-2000:], flush=True)
    return row


def _evals(folder: Path) -> list[dict[str, Any]]:
    from grpo_ablate.core.vocab import EVAL_FILE

    f = folder / EVAL_FILE
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.exists() else []


def build(seeds: int, path: Path = DATA, work: Path = ROOT / ".cache" / "branching") -> dict[str, Any]:
    """Train what the table lacks, seeds outermost, saving after every trial (module docstring)."""
    import yaml

    from grpo_ablate.config import load_study
    from grpo_ablate.launch import WarmSession
    from grpo_ablate.plan.cells import study_plan
    from grpo_ablate.study.setup import library_versions
    from grpo_ablate.study.trial_spec import build_spec
    from grpo_ablate.contract.spec import StartFrom
    from sequential_table import study_text

    table = load(path)
    if table.get("settings") != settings():
        if table["rows"]:
            print(f"settings changed ({table.get('settings')} -> {settings()}): rebuilding", flush=True)
        table = {"settings": settings(), "versions": library_versions(), "rows": []}
    done = {(r["kind"], r["arm"], r["seed"]) for r in table["rows"]}
    work.mkdir(parents=True, exist_ok=True)
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def study(steps: int, points: int):
        text = study_text(TASK, steps, EVAL_PROMPTS, points, seeds, GENERATIONS, [1.0])
        text["study"]["checkpoint_steps"] = None  # the prefix saves its one checkpoint itself (below)
        f = work / f"study-{steps}.yaml"
        f.write_text(yaml.safe_dump(text))
        s = load_study(f)
        return s, study_plan(s)

    prefix_study, prefix_plan = study(BRANCH, 0)
    branch_study, branch_plan = study(BRANCH_STEPS, BRANCH_POINTS)  # the branch's own steps: build_spec adds BRANCH

    def record(kind: str, cell: Any, folder: Path, result: Any, seconds: float) -> dict[str, Any]:
        return _record(table, path, kind, cell, folder, result, seconds)

    with WarmSession() as session:
        for seed in range(seeds):
            arms = [c for c in branch_plan if c.seed == seed]
            if all(("branch", c.arm.key, seed) in done for c in arms):
                continue
            base = next(c for c in prefix_plan if c.seed == seed and c.role == "baseline")
            pfolder = work / f"seed{seed:03d}" / "prefix"
            checkpoint = pfolder / "trainer" / f"checkpoint-{BRANCH}"
            if not (checkpoint / "trainer_state.json").is_file():  # a build killed mid-seed trains its prefix again
                shutil.rmtree(pfolder, ignore_errors=True)
                spec = build_spec(prefix_study, base, pfolder, env)
                spec = dataclasses.replace(spec, trainer={**spec.trainer, "save_strategy": "steps", "save_steps": BRANCH})
                t0 = time.monotonic()
                result = session.run(spec)
                seconds = time.monotonic() - t0
                if ("prefix", base.arm.key, seed) not in done:
                    record("prefix", base, pfolder, result, seconds)
                if result.outcome is not Outcome.COMPLETED or not checkpoint.is_dir():
                    print(f"seed {seed}: the prefix did not leave {checkpoint}; its branches are skipped", flush=True)
                    continue
            for cell in arms:
                if ("branch", cell.arm.key, seed) in done:
                    continue
                folder = work / f"seed{seed:03d}" / cell.arm.key.replace("|", "_")
                shutil.rmtree(folder, ignore_errors=True)
                # scored over the branch's own completions: at its start (the branch point), every 10 steps, and its end
                spec = build_spec(branch_study, cell, folder, env, start_from=StartFrom(str(checkpoint), BRANCH))
                t0 = time.monotonic()
                result = session.run(spec)
                record("branch", cell, folder, result, time.monotonic() - t0)
                shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(work / f"seed{seed:03d}", ignore_errors=True)
    return table


# ------------------------------------------------------------------ the warmup mode (--warmup W)


WARMUP_DATA = Path(__file__).resolve().parent / "data" / "branching_warmup.json"
WARMUP_FULL = 60  # the warmup mode's full run: N steps, the first W of them warmup
WARMUP_SCHEDULE = "cosine"  # linear warmup to the peak rate over W steps, then cosine decay to zero at step N


def warmup_settings(warmup: int, full: int = WARMUP_FULL) -> dict[str, Any]:
    return {"task": TASK, "generations": GENERATIONS, "full_run": full, "warmup_steps": warmup, "branch": warmup,
            "lr_scheduler_type": WARMUP_SCHEDULE, "learning_rate": 2.0e-4, "eval_prompts": EVAL_PROMPTS,
            "per_step": PER_STEP}


def warmup_study_text(warmup: int, full: int, steps: int, points: int, seeds: int) -> dict[str, Any]:
    """The warmup mode's study file: sequential_table's settings with the full run's schedule (`WARMUP_SCHEDULE`
    over `full` steps, `warmup` of them warmup) and `budget.lr_schedule: prefix`, so a trial of `steps`
    steps, or a branch ending at step `full`, has the full run's learning rate at every step."""
    from sequential_table import study_text

    text = study_text(TASK, steps, EVAL_PROMPTS, points, seeds, GENERATIONS, [1.0])
    text["trainer"].update({"lr_scheduler_type": WARMUP_SCHEDULE, "warmup_steps": warmup})
    text["budget"].update({"lr_schedule": "prefix", "full_run": {"max_steps": full}})
    text["study"]["checkpoint_steps"] = None  # the prefix saves its one checkpoint itself (build_warmup)
    return text


def build_warmup(seeds: int, warmup: int, full: int = WARMUP_FULL, path: Path = WARMUP_DATA,
                 work: Path = ROOT / ".cache" / "branching-warmup") -> dict[str, Any]:
    """Train what the warmup table lacks, seeds outermost, saving after every trial.

    Per seed: every G trained the full run from step 0 (kind "full": the truth, and every from-scratch
    design, whose T-step trial is this run's first T steps under `lr_schedule: prefix`), scored at
    steps 0, full/4, full/2, 3 full/4 and full; the G=8 prefix of `warmup` steps (kind "prefix",
    checkpointed); every G branched from it to step `full` (kind "branch"), scored at the branch point
    and at thirds of the branch."""
    import yaml

    from grpo_ablate.config import load_study
    from grpo_ablate.launch import WarmSession
    from grpo_ablate.plan.cells import study_plan
    from grpo_ablate.study.setup import library_versions
    from grpo_ablate.study.trial_spec import build_spec
    from grpo_ablate.contract.spec import StartFrom

    if not 0 < warmup < full:
        raise ValueError(f"--warmup {warmup}: give a warmup of at least 1 step and fewer than the full run's {full}")
    want = warmup_settings(warmup, full)
    table = load(path)
    if table.get("settings") != want:
        if table["rows"]:
            print(f"settings changed ({table.get('settings')} -> {want}): rebuilding", flush=True)
        table = {"settings": want, "versions": library_versions(), "rows": []}
    done = {(r["kind"], r["arm"], r["seed"]) for r in table["rows"]}
    work.mkdir(parents=True, exist_ok=True)
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def study(name: str, steps: int, points: int):
        f = work / f"study-{name}.yaml"
        f.write_text(yaml.safe_dump(warmup_study_text(warmup, full, steps, points, seeds)))
        s = load_study(f)
        return s, study_plan(s)

    full_study, full_plan = study("full", full, 3)
    prefix_study, prefix_plan = study("prefix", warmup, 0)
    branch_study, branch_plan = study("branch", full - warmup, 2)  # the branch's own steps: it ends at step `full`

    def record(kind: str, cell: Any, folder: Path, result: Any, seconds: float) -> None:
        _record(table, path, kind, cell, folder, result, seconds)
        done.add((kind, cell.arm.key, cell.seed))

    def train(kind: str, study_: Any, cell: Any, folder: Path, **kw: Any) -> Any:
        shutil.rmtree(folder, ignore_errors=True)
        spec = build_spec(study_, cell, folder, env, **kw)
        if kind == "prefix":
            spec = dataclasses.replace(spec, trainer={**spec.trainer, "save_strategy": "steps", "save_steps": warmup})
        t0 = time.monotonic()
        result = session.run(spec)
        record(kind, cell, folder, result, time.monotonic() - t0)
        return result

    with WarmSession() as session:
        for seed in range(seeds):
            here = work / f"seed{seed:03d}"
            for cell in (c for c in full_plan if c.seed == seed):
                if ("full", cell.arm.key, seed) not in done:
                    train("full", full_study, cell, here / ("full-" + cell.arm.key.replace("|", "_")))
                    shutil.rmtree(here / ("full-" + cell.arm.key.replace("|", "_")), ignore_errors=True)
            arms = [c for c in branch_plan if c.seed == seed]
            if all(("branch", c.arm.key, seed) in done for c in arms):
                shutil.rmtree(here, ignore_errors=True)
                continue
            base = next(c for c in prefix_plan if c.seed == seed and c.role == "baseline")
            pfolder = here / "prefix"
            checkpoint = pfolder / "trainer" / f"checkpoint-{warmup}"
            if not (checkpoint / "trainer_state.json").is_file():  # a build killed mid-seed trains its prefix again
                if ("prefix", base.arm.key, seed) in done:  # keep one prefix row per seed: drop the old one
                    table["rows"] = [r for r in table["rows"] if (r["kind"], r["arm"], r["seed"]) != ("prefix", base.arm.key, seed)]
                result = train("prefix", prefix_study, base, pfolder)
                if result.outcome is not Outcome.COMPLETED or not checkpoint.is_dir():
                    print(f"seed {seed}: the prefix did not leave {checkpoint}; its branches are skipped", flush=True)
                    continue
            for cell in arms:
                if ("branch", cell.arm.key, seed) not in done:
                    folder = here / cell.arm.key.replace("|", "_")
                    train("branch", branch_study, cell, folder, start_from=StartFrom(str(checkpoint), warmup))
                    shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(here, ignore_errors=True)
    return table


# ------------------------------------------------------------------ the page


def _print(fig: dict[str, Any]) -> None:
    secs = fig["seconds"]
    print(f"replays: {fig['replays']} studies of {fig['k']} seeds each, truth over the seeds each did not see")
    b, n = fig["branch"], fig["full"]
    if secs["full_per_seed"] and secs["branched_per_seed"]:
        print(f"measured seconds per seed: full run's 5 trials {secs['full_per_seed']:.0f} s, "
              f"branched (prefix + 5 branches of {n - b}) {secs['branched_per_seed']:.0f} s")
    rep = fig["reproduced"]
    print(f"rebuilt prefix equals the full run's baseline at step {b}: {rep['prefix_equal']}/{rep['prefix_total']}; "
          f"branched baseline equals it at step {n}: {rep['resume_equal']}/{rep['resume_total']}")
    te = fig["truth_error"]
    print(f"the full-run truth's own noise: {fig['labels'][te['arms'][0]].split(',')[0]} minus "
          f"{fig['labels'][te['arms'][1]].split(',')[0]} (its two best arms) over {te['held']} held-out seeds has a "
          f"standard error of {te['se']:.4f}; replays draw from the {fig['pool']} seeds every design has")
    print()
    print("| design | steps per seed | share of full-run trials | min_effect | within (full-run truth) | regret | "
          f"within (own truth) | wrong (>= min_effect behind on all {fig['truth_seeds']} seeds) | answers |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in fig["rows"]:
        counts = ", ".join(f"{fig['labels'][a].split(',')[0]}: {n}" for a, n in r["answer_counts"].items() if n)
        own = "" if r["own_within"] is None else f"{r['own_within']:.3f}"
        print(f"| {r['design']} | {r['steps'] // r['k'] if r['k'] else 0} | {r['share_of_full']:.2f} | {r['min_effect']:g} | "
              f"{r['within']:.3f} | {r['regret']:.4f} | {own} | {r['wrong']:.3f} | {counts} |")
    print()
    for p in fig["paired"]:
        print(f"within({p['design']}) - within({p['against']}) at {p['min_effect']:g}: {p['difference']:+.3f} "
              f"(replay error {p['se']:.3f}) at {p['share']:.2f} of its compute")
    print()
    for b in fig["best"]:
        arms = sorted(b["arms"].items(), key=lambda kv: -kv[1]["mean"])
        text = "; ".join(f"{fig['labels'][a].split(',')[0]} {v['mean']:.3f}±{v['ci95']:.3f} (P best {v['p_best']:.2f})"
                         for a, v in arms)
        eps = ", ".join(fig["labels"][a].split(",")[0] for a in b["eps_best"])
        print(f"{b['design']} ({b['seeds']} seeds): {text}; within {MIN_EFFECTS[0]} of the best: {{{eps}}}")
    for c in fig["changes"]:
        print()
        print(f"G's effect (arm minus the baseline) under {c['design']} vs {c['against']}, paired over seeds:")
        for a, v in c["arms"].items():
            print(f"  {fig['labels'][a].split(',')[0]}: {v['effect_a']:+.3f} vs {v['effect_b']:+.3f}, change "
                  f"{v['change']:+.3f} ± {v['ci95']:.3f} (95%, {v['seeds']} seeds)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--seeds", type=int, default=40, help="seeds to train (0..N-1; the truth table has 40)")
    p.add_argument("--from-table", action="store_true", help="score the committed tables only, train nothing")
    p.add_argument("--out", type=Path, default=DATA)
    p.add_argument("--replays", type=int, default=400)
    p.add_argument("--k", type=int, default=K, help="seeds in a replayed study")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--warmup", type=int, default=None, metavar="W",
                   help=f"the warmup mode: a full run of --full steps whose first W are warmup ({WARMUP_SCHEDULE}), "
                        f"branched at step W; its own table ({WARMUP_DATA.name} unless --out)")
    p.add_argument("--full", type=int, default=WARMUP_FULL, help="the warmup mode's full run in steps")
    a = p.parse_args(argv)
    if a.warmup is not None:
        out = a.out if a.out != DATA else WARMUP_DATA
        if not a.from_table:
            build_warmup(a.seeds, a.warmup, a.full, out)
        fig = warmup_figures(load(out), a.k, a.replays)
    else:
        if not a.from_table:
            build(a.seeds, a.out)
        fig = figures(json.loads(TRUTH.read_text()), load(a.out), a.k, a.replays)
    _print(fig)
    if a.json:
        a.json.write_text(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
