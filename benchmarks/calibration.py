"""World by world: does each stated probability come true, and does each family of statements keep its 5%?

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/calibration.py --json benchmarks/data/calibration.json \
        --figure docs/calibration.png                                     # about an hour, two worker processes
    python benchmarks/calibration.py --studies 60 --races 60                        # a quick look
    python benchmarks/calibration.py --json benchmarks/data/calibration.json --figure docs/calibration.png --redraw

On the planted worlds of benchmarks/worlds.py (exact means, the committed tables' real residuals drawn
i.i.d. with replacement), per task, world and number of seeds, the report's own answer
(stats/selection.select, stats/calls.page_calls) is scored against the exact truth:

- FWER of the calls: P(any false statement among the answer's better / worse / equivalent calls against the
  baseline and its exclusions from the as-good set): a better or worse call of the wrong sign or against an
  equal arm, an equivalent call where the truth differs by min_effect or more, an arm truly within
  min_effect of the best excluded;
- FWER of the table: P(any false colour in the effects table: the answer's metric, whose cells are the
  answer's calls, and a second metric (the trials' held-out AUC, planted all equal, so every colour on it
  is false), adjusted in the page's one family);
- the headline's probability (P(recommended within min_effect of the best), a model posterior): its mean
  against how often it came true, world by world. It is labelled a posterior on the page because it does
  not come true as a frequency in every world (this is where that is measured);
- the design's guarantee (Bechhofer's P(correct selection) at the indifference zone for the design that
  ran, at the spread measured): at the least-favourable configuration, its mean against how often the best
  mean was the best arm;
- the races: the elimination race (KN++, stats/elimination.py) and its stated guarantee (its confidence)
  at the least-favourable configuration against how often it picked the best, the mean seeds per arm it
  spent against Bechhofer's paired design reaching the same probability, its seeds on tied arms against a
  fixed 3-seed design's, and the FWER of the report's statements after it.
Every rate carries its Monte Carlo standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from worlds import ALL_EQUAL, AS_MEASURED, HOLM_NULL, LFC, TIES, WORLDS, World, draw, paired_sd, tables  # noqa: E402
from grpo_ablate.stats.calls import page_calls  # noqa: E402
from grpo_ablate.stats.elimination import simulate  # noqa: E402
from grpo_ablate.stats.model import fit  # noqa: E402
from grpo_ablate.stats.selection import bechhofer_seeds, select  # noqa: E402
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, WORSE  # noqa: E402
from grpo_ablate.records.race_record import ELIMINATION_LEVEL  # noqa: E402

__all__ = ["score_answer", "answer_world", "race_world", "se", "main"]

DRAWS = 2000  # the posterior's Monte Carlo draws per answer (error near 0.95: 0.005)
LEVEL = 0.05


def se(p: float, n: int) -> float:
    """The Monte Carlo standard error of a rate p over n replays."""
    return math.sqrt(max(p * (1 - p), 1e-12) / max(n, 1))


def _false_call(call: str, d: float, me: float) -> bool:
    return (call == BETTER and d <= 0) or (call == WORSE and d >= 0) or (call == EQUIVALENT and abs(d) >= me - 1e-12)


def score_answer(w: World, me: float, level: float = LEVEL, draws: int = DRAWS) -> dict[str, Any]:
    """The report's answer on one world's values, scored against its truth (module docstring)."""
    vals = w.values
    sel = select(vals, me, alpha=level, draws=draws, reference=w.baseline)
    other = fit(w.other)
    others = [(a, other.contrast(w.baseline, a)) for a in vals if a != w.baseline]
    ps = [d.two_sided_p() if d is not None else None for _, d in others]
    calls, adj = page_calls(vals, w.baseline, min_effect=me, level=level, others=ps)
    base = w.truth[w.baseline]
    false_calls = any(_false_call(c.call, w.truth[a] - base, me) for a, c in calls.items())
    false_excl = any(w.within(a, me) for a in sel.excluded)
    false_colour = any(p is not None and p < level for p in adj)  # the AUC is planted all equal
    means = sel.means
    argmax = max(sorted(means), key=lambda a: means[a])
    return {"calls": false_calls or false_excl, "table": false_calls or false_colour,
            "stated": sel.probability, "within": w.within(str(sel.recommended), me),
            "leader_stated": sel.pcs, "leader_within": w.within(str(sel.leader), me),
            "design": sel.design_pcs, "argmax_best": w.truth[argmax] == w.best}


def answer_world(task: Any, name: str, me: float, n: int, studies: int, rng: np.random.Generator,
                 level: float = LEVEL) -> dict[str, Any]:
    """The answer's rates over `studies` replays of one world (Holm's null: each other arm leading in turn)."""
    k = len(task.arms)
    outs = [score_answer(draw(task, name, me, n, rng, holm_arm=1 + i % (k - 1)), me, level) for i in range(studies)]

    def rate(key: str) -> float:
        return float(np.mean([o[key] for o in outs]))

    stated = [o["stated"] for o in outs if o["stated"] is not None]
    came = [o["within"] for o in outs if o["stated"] is not None]
    lead = [o["leader_stated"] for o in outs if o["leader_stated"] is not None]
    lead_came = [o["leader_within"] for o in outs if o["leader_stated"] is not None]
    design = [o["design"] for o in outs if o["design"] is not None]
    row = {"task": task.name, "world": name, "seeds": n, "studies": studies,
           "fwer_calls": rate("calls"), "fwer_table": rate("table"),
           "stated": float(np.mean(stated)) if stated else None, "came_true": float(np.mean(came)) if came else None,
           "leader_stated": float(np.mean(lead)) if lead else None,
           "leader_came_true": float(np.mean(lead_came)) if lead_came else None,
           "design_stated": float(np.mean(design)) if design else None, "argmax_best": rate("argmax_best"),
           "pairs": [[o["stated"], o["within"]] for o in outs if o["stated"] is not None]}
    row["se_fwer"] = se(max(row["fwer_calls"], row["fwer_table"], LEVEL), studies)
    return row


def race_world(task: Any, name: str, me: float, confidence: float, n0: int, cap: int, races: int,
               rng: np.random.Generator, answers: int = 0) -> dict[str, Any]:
    """The elimination race (KN++, stats/elimination.simulate, which replays `eliminate` stage for stage) on `races`
    replays of one world, capped at `cap` seeds per arm; `answers` of them also scored for the report's statements
    after the race (its calls at ELIMINATION_LEVEL on what each arm ran)."""
    k = len(task.arms)
    worlds = [draw(task, name, me, cap, rng) for _ in range(races)]
    x = np.array([[[w.values[a][i] for a in task.arms] for i in range(cap)] for w in worlds])
    ran, kept = simulate([0.0] * k, 1.0, delta=me, alpha=1 - confidence, n0=n0, max_seeds=cap, x=x)
    best = [task.arms.index(max(w.truth, key=lambda a: w.truth[a])) for w in worlds]
    picked = []
    for i, w in enumerate(worlds):
        if kept[i] >= 0:
            picked.append(task.arms[kept[i]])
        else:  # an equivalent set, or the cap: the best mean of the arms still in (their seeds all run)
            live = [a for j, a in enumerate(task.arms) if ran[i, j] == ran[i].max()]
            picked.append(max(live, key=lambda a: np.mean([w.values[a][s] for s in range(int(ran[i].max()))])))
    within = [w.within(p, me) for w, p in zip(worlds, picked)]
    false = []
    for i in range(min(answers, races)):
        w = worlds[i]
        seen = {a: {s: w.values[a][s] for s in range(int(ran[i, j]))} for j, a in enumerate(task.arms)}
        sub = World(seen, w.truth, w.baseline, w.rows, {a: {s: w.other[a][s] for s in seen[a]} for a in task.arms})
        false.append(score_answer(sub, me, ELIMINATION_LEVEL)["calls"])
    mean = float(ran.mean())
    return {"task": task.name, "world": name, "min_effect": me, "confidence": confidence, "n0": n0, "cap": cap,
            "races": races,
            "within": float(np.mean(within)), "selected_best": float(np.mean([kept[i] == best[i] for i in range(races)])),
            "stopped_one": float(np.mean(kept >= 0)), "mean_seeds": mean, "p90_seeds": float(np.percentile(ran.mean(axis=1), 90)),
            "fwer": float(np.mean(false)) if false else None, "answers": len(false)}


def _bechhofer(k: int, me: float, sd: float, p: float) -> int | None:
    if p <= 1 / k:
        return 1
    try:
        return bechhofer_seeds(k, me, sd, min(p, 0.999))
    except ValueError:
        return None


def figure(report: dict[str, Any], out: Path) -> None:
    """The calibration figure: per world, the headline's mean stated probability against how often it came true,
    and the design's guarantee at the least-favourable configuration (docs/statistics.md shows it)."""
    import matplotlib  # here: only the figure needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["answers"] if r["stated"] is not None]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4.4))
    marks = {w: m for w, m in zip(WORLDS, "osDv^<>")}
    colours = {w: f"C{i}" for i, w in enumerate(WORLDS)}
    for r in rows:
        ax[0].scatter(r["stated"], r["came_true"], marker=marks.get(r["world"], "o"), s=18 + 3 * r["seeds"],
                      alpha=0.75, color=colours.get(r["world"]), label=r["world"])
    ax[0].plot([0, 1], [0, 1], color="grey", lw=1)
    ax[0].fill_between([0, 1], [-0.03, 0.97], [0.03, 1.03], color="grey", alpha=0.15)
    ax[0].set(xlim=(0.3, 1.01), ylim=(0.0, 1.02), xlabel="stated P(recommended within min_effect) (mean)",
              ylabel="how often it came true", title="the headline: a model posterior (size: seeds)")
    handles, labels = ax[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    ax[0].legend(seen.values(), seen.keys(), fontsize=7, frameon=False, loc="lower right")
    lfc = [r for r in report["answers"] if r["world"] == LFC and r["design_stated"] is not None]
    ax[1].scatter([r["design_stated"] for r in lfc], [r["argmax_best"] for r in lfc], label="fixed design (Bechhofer)")
    races = [r for r in report["races"] if r["world"] == LFC]
    ax[1].scatter([r["confidence"] for r in races], [r["selected_best"] for r in races], marker="s",
                  label="elimination race (stated: its confidence)")
    ax[1].plot([0, 1], [0, 1], color="grey", lw=1)
    ax[1].fill_between([0, 1], [-0.03, 0.97], [0.03, 1.03], color="grey", alpha=0.15)
    ax[1].set(xlim=(0.3, 1.01), ylim=(0.3, 1.02), xlabel="stated P(correct selection) at the indifference zone",
              ylabel="how often the best was picked", title="the design's guarantee (least favourable)")
    ax[1].legend(fontsize=7, frameon=False, loc="lower right")
    fig.suptitle(f"{report['command']}", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def _answer_row(job: tuple[int, str, float, int, int]) -> dict[str, Any]:
    t, name, me, n, studies = job
    task = tables()[t]
    return answer_world(task, name, me, n, studies, np.random.default_rng([t, WORLDS.index(name), n]))


def _race_row(job: tuple[int, str, float, float, int, int, int]) -> dict[str, Any]:
    t, name, me, conf, n0, cap, races = job
    task = tables()[t]
    rng = np.random.default_rng([t, WORLDS.index(name), int(me * 1000), n0])
    r = race_world(task, name, me, conf, n0, cap, races, rng, answers=min(races, 100))
    k, sd = len(task.arms), paired_sd(task)
    if name == LFC:  # the yardstick: Bechhofer's fixed paired design at P 0.90 (the goal), and at the P reached
        b = _bechhofer(k, me, sd, 0.90)
        r.update(bechhofer=b, share=r["mean_seeds"] / b if b else None,
                 bechhofer_at_p=_bechhofer(k, me, sd, min(r["selected_best"], 0.99)))
    else:
        r.update(bechhofer=None, share=None, bechhofer_at_p=None)
    r["fixed3_ratio"] = r["mean_seeds"] / 3.0  # against a fixed 3-seed design's seeds per arm
    return r


def markdown(report: dict[str, Any]) -> str:
    """docs/statistics.md's two tables, from the json: the answer world by world, and the elimination race."""
    rows = report["answers"]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    seeds = sorted({r["seeds"] for r in rows})
    lo, hi = seeds[0], seeds[-1]
    out = [f"| world | task | FWER of the calls ({lo} / {hi} seeds) | FWER of the table ({lo} / {hi}) | headline "
           f"stated / came true ({lo} seeds) | ({hi} seeds) | design's guarantee stated / came true ({lo} / {hi}) |",
           "|---|---|---|---|---|---|---|"]
    for w in dict.fromkeys(r["world"] for r in rows):
        for t in tasks:
            a = {r["seeds"]: r for r in rows if r["task"] == t and r["world"] == w}
            design = (f"{a[lo]['design_stated']:.2f} / {a[lo]['argmax_best']:.2f}; "
                      f"{a[hi]['design_stated']:.2f} / {a[hi]['argmax_best']:.2f}" if w == LFC else "-")
            out.append(f"| {w} | {t.split(',')[0]} | {a[lo]['fwer_calls']:.3f} / {a[hi]['fwer_calls']:.3f} | "
                       f"{a[lo]['fwer_table']:.3f} / {a[hi]['fwer_table']:.3f} | {a[lo]['stated']:.2f} / "
                       f"{a[lo]['came_true']:.2f} | {a[hi]['stated']:.2f} / {a[hi]['came_true']:.2f} | {design} |")
    out += ["", "| task | min_effect / n0 | least favourable: P(best picked), stated at least 0.90 | mean seeds per arm "
            "(Bechhofer's for 0.90, share) | tied arms (all equal / on the grid): mean seeds per arm | as measured: P(within), "
            "mean seeds | FWER of the statements after the race (most over the worlds) |", "|---|---|---|---|---|---|---|"]
    races = report["races"]
    for t in tasks:
        for key in dict.fromkeys((r["min_effect"], r["n0"]) for r in races if r["task"] == t):
            b = {r["world"]: r for r in races if r["task"] == t and (r["min_effect"], r["n0"]) == key}
            lf, eq, ti, am = b[LFC], b[ALL_EQUAL], b[TIES], b[AS_MEASURED]
            fw = max(r["fwer"] or 0.0 for r in b.values())
            out.append(f"| {t.split(',')[0]} | {key[0]:g} / {key[1]} | {lf['selected_best']:.3f} | {lf['mean_seeds']:.1f} "
                       f"({lf['bechhofer']}, {lf['share']:.2f}) | {eq['mean_seeds']:.1f} / {ti['mean_seeds']:.1f} | "
                       f"{am['within']:.3f}, {am['mean_seeds']:.1f} | {fw:.3f} |")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--studies", type=int, default=200, help="replayed studies per task, world and seed count")
    p.add_argument("--races", type=int, default=300, help="replayed races per setting")
    p.add_argument("--seeds", type=int, nargs="+", default=[3, 12])
    p.add_argument("--jobs", type=int, default=2, help="worker processes")
    p.add_argument("--min-effect", type=float, default=0.05)
    p.add_argument("--race-min-effects", type=float, nargs="+", default=[0.05, 0.02])
    p.add_argument("--json", type=Path)
    p.add_argument("--figure", type=Path, help="draw the figure from --json (or this run) to this file")
    p.add_argument("--markdown", action="store_true", help="print docs/statistics.md's tables from --json, run nothing")
    p.add_argument("--redraw", action="store_true", help="draw --figure from --json, run nothing")
    a = p.parse_args()
    command = "python benchmarks/calibration.py " + " ".join(sys.argv[1:])
    if a.markdown and a.json:
        print(markdown(json.loads(a.json.read_text())))
        return 0
    if a.redraw and a.figure and a.json:
        figure(json.loads(a.json.read_text()), a.figure)
        return 0
    me, t0 = a.min_effect, time.time()
    report: dict[str, Any] = {"command": command, "min_effect": me, "answers": [], "races": []}
    tasks = tables()
    answer_jobs = [(t, name, me, n, a.studies) for t in range(len(tasks)) for name in WORLDS for n in a.seeds]
    stages = {0.05: ((3, 300), (5, 300)), 0.02: ((10, 900),)}  # (n0, cap): n0 about a tenth of Bechhofer's seeds
    race_jobs = [(t, name, rme, 0.9, n0, cap, a.races) for t in range(len(tasks)) for rme in a.race_min_effects
                 for n0, cap in stages.get(rme, ((5, 900),)) for name in (LFC, ALL_EQUAL, TIES, AS_MEASURED, HOLM_NULL)]
    with multiprocessing.Pool(a.jobs) as pool:  # each row draws from its own seed: the same figures for any --jobs
        report["answers"] = pool.map(_answer_row, answer_jobs)
        report["races"] = pool.map(_race_row, race_jobs)

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    print(f"== the answer, world by world (min_effect {me}; {a.studies} studies each; FWER se at 0.05: "
          f"{se(0.05, a.studies):.3f}) ==")
    print(f"  {'task':<24} {'world':<44} {'n':>2} {'FWER calls':>10} {'FWER table':>10} {'stated':>6} {'true':>6} "
          f"{'design':>6} {'best':>6}")
    for r in report["answers"]:
        print(f"  {r['task']:<24} {r['world']:<44} {r['seeds']:>2} {r['fwer_calls']:>10.3f} {r['fwer_table']:>10.3f} "
              f"{f(r['stated']):>6} {f(r['came_true']):>6} {f(r['design_stated']):>6} {r['argmax_best']:>6.3f}")
    print(f"\n== the elimination race (KN++, confidence 0.9; {a.races} races each; Bechhofer: its paired design's "
          f"seeds for P 0.90, share: mean seeds / them) ==")
    print(f"  {'task':<24} {'world':<44} {'me':>5} {'n0':>3} {'P within':>8} {'P best':>6} "
          f"{'mean n':>6} {'Bechhofer':>9} {'share':>5} {'FWER':>5}")
    for r in report["races"]:
        share = f"{r['share']:.2f}" if r["share"] is not None else "-"
        print(f"  {r['task']:<24} {r['world']:<44} {r['min_effect'] if 'min_effect' in r else '':>5} {r['n0']:>3} "
              f"{r['within']:>8.3f} {r['selected_best']:>6.3f} {r['mean_seeds']:>6.1f} {r['bechhofer'] or '-':>9} "
              f"{share:>5} {f(r['fwer']):>5}")
    report["wall_seconds"] = time.time() - t0
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))
    if a.figure:
        figure(report, a.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
