"""Planted-truth worlds built from the committed tables: exact means, the tables' real residuals drawn i.i.d.

    python benchmarks/worlds.py          # lists the worlds and each table's residual spread

A rule can be judged only against a truth it never saw. Each world plants every arm's mean exactly and
draws each seed as one row of a committed 40-seed table's residuals (every arm's value on one seed minus
its 40-seed mean: real noise, real correlations between arms, ties included), **with replacement**: seeds
are i.i.d. draws from the table's empirical noise, so the world's truth is exactly the planted means (the
rows average to zero) and no replay is flattered by rows that cancel (drawn without replacement, 40 rows
sum to zero and a 12-seed study has less noise than a real one). The planted means are laid on the arms in
an order drawn each replay unless the world fixes it (Holm's least-favourable null names its arms).

Worlds (`WORLDS`; `world_means`), for a task of k arms and a min_effect `me`:
- all equal: a null for every call and exclusion;
- least favourable (+me plus a hair): one arm ahead of the rest by min_effect + HAIR, the only one within
  min_effect of the best: where a probability of being within min_effect is least kind;
- Holm's least-favourable null: one arm far ahead (its hypothesis certainly false, so Holm spends its
  first step on it), the baseline and the rest equal: the configuration where Holm's error is largest;
- unequal spreads (null): all equal, the arms' residual columns scaled by SPREADS (sd ratio 2.5), shuffled;
- ties on the reward grid: all equal at 64/128, every value rounded to the 1/128 grid of a held-out reward
  over 128 prompts (repeated paired differences, zero-spread pairs);
- one dominated: one arm 4 x min_effect behind, the rest equal;
- screen-marked dominated: the arms the task's real screen drops (preflight/screen_rule.drops on
  benchmarks/data/screen_points.json, the screen's measurements of the tables' own starting model) planted
  4 x min_effect behind, the rest equal: the world where the screen's features and the truth agree;
- as measured: the table's own 40-seed means, in the table's order.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from sequential import TABLES, Task, tasks_of  # noqa: E402

__all__ = ["World", "WORLDS", "world_means", "draw", "tables", "paired_sd", "auc_rows", "curves", "screen_drops",
           "SCREEN_DOMINATED", "HAIR", "GRID", "SPREADS", "ALL_EQUAL", "LFC",
           "HOLM_NULL", "UNEQUAL", "TIES", "DOMINATED", "AS_MEASURED"]

HAIR = 0.001  # reward units past min_effect: the best is the only arm within min_effect of it
GRID = 1 / 128  # a held-out reward over 128 prompts scored 0 or 1
SPREADS = (0.6, 0.8, 1.0, 1.25, 1.5)  # the unequal-spread world's per-arm scale of the residuals
ALL_EQUAL, LFC, HOLM_NULL, UNEQUAL, TIES, DOMINATED, AS_MEASURED = (
    "all equal", "least favourable (+min_effect plus a hair)", "Holm's least-favourable null", "unequal spreads (null)",
    "ties on the reward grid", "one dominated (-4 min_effect)", "as measured")
SCREEN_DOMINATED = "screen-marked dominated (-4 min_effect)"
WORLDS = (ALL_EQUAL, LFC, HOLM_NULL, UNEQUAL, TIES, DOMINATED, AS_MEASURED)  # the calibration worlds
SCREEN_POINTS = ROOT / "benchmarks" / "data" / "screen_points.json"


@dataclass
class World:
    """One replayed study's data: `values` arm -> {seed: value} (seeds 0..n-1, the order they run), its exact truth,
    the baseline (the arm a recipe would keep), the residual rows drawn (for replaying curves) and `other`, the
    effects table's other metric (an AUC whose planted means are all equal: any colour on it is false)."""

    values: dict[str, dict[int, float]]
    truth: dict[str, float]
    baseline: str
    rows: list[int]
    other: dict[str, dict[int, float]]

    @property
    def best(self) -> float:
        return max(self.truth.values())

    def within(self, arm: str, me: float) -> bool:
        """The arm is within min_effect of the best (strictly: an arm min_effect plus a hair behind is not)."""
        return self.best - self.truth[arm] < me - 1e-12


def world_means(name: str, task: Task, me: float) -> tuple[list[float], bool]:
    """(planted means in the task's arm order, whether they are shuffled over the arms each replay)."""
    k = len(task.arms)
    if name in (ALL_EQUAL, UNEQUAL):
        return [0.5] * k, False
    if name == TIES:
        return [64 * GRID] * k, False
    if name == LFC:
        return [0.5 + me + HAIR] + [0.5] * (k - 1), True
    if name == HOLM_NULL:  # the baseline (first) and the rest equal, one other arm far ahead
        return [0.5] + [0.5 + 10 * me] + [0.5] * (k - 2), False
    if name == DOMINATED:
        return [0.5 - 4 * me] + [0.5] * (k - 1), True
    if name == AS_MEASURED:
        seeds = task.seeds
        return [float(np.mean([task.values[a][s] for s in seeds])) for a in task.arms], False
    if name == SCREEN_DOMINATED:
        dropped = screen_drops(task)
        return [0.5 - 4 * me if a in dropped else 0.5 for a in task.arms], False
    raise ValueError(f"unknown world {name!r}; choose one of {WORLDS + (SCREEN_DOMINATED,)}")


def screen_drops(task: Task) -> set[str]:
    """The task's arms the real screen drops (preflight/screen_rule.drops on its measured points; the baseline
    protected as the screen protects it): empty when the task has no screen measurements."""
    from grpo_ablate.preflight.screen_rule import Point, drops  # here: only the screen's worlds need it

    if not SCREEN_POINTS.exists():
        return set()
    found = json.loads(SCREEN_POINTS.read_text())["tasks"].get(task.name.split(",")[0])
    if not found:
        return set()
    fields = set(Point.__dataclass_fields__)
    points = [Point(**{k: v for k, v in r.items() if k in fields}) for r in found["rows"] if r["key"] in task.arms]
    return set(drops(points)) & set(task.arms)


def draw(task: Task, name: str, me: float, n: int, rng: np.random.Generator,
         holm_arm: int = 1, baseline: int = 0, spreads: Sequence[float] | None = None) -> World:
    """One replay of world `name` with n seeds: rows drawn i.i.d. from the task's residuals (module docstring).
    `holm_arm`: which arm leads in Holm's least-favourable null; `baseline`: which arm is the baseline (the
    table's own, arm 0, unless given); `spreads`: each arm's residuals scaled by this (in the task's arm order;
    the unequal-spread world draws SPREADS in a shuffled order)."""
    means, shuffle = world_means(name, task, me)
    k = len(task.arms)
    if name == HOLM_NULL:
        if holm_arm == baseline:
            raise ValueError(f"Holm's least-favourable null needs the leading arm ({holm_arm}) to differ from the "
                             f"baseline ({baseline})")
        means = [0.5] * k
        means[holm_arm] = 0.5 + 10 * me
    order = rng.permutation(k) if shuffle else np.arange(k)
    planted = {task.arms[j]: means[order[j]] for j in range(k)}
    res = task.residual_rows()
    if name == UNEQUAL:
        res = res * np.array(SPREADS)[rng.permutation(k)][None, :]
    if spreads is not None:
        res = res * np.asarray(spreads, dtype=float)[None, :]
    rows = rng.integers(0, len(res), n)
    x = np.array([planted[a] for a in task.arms])[None, :] + res[rows]
    if name == TIES:
        x = np.round(x / GRID) * GRID
    values = {a: {i: float(x[i, j]) for i in range(n)} for j, a in enumerate(task.arms)}
    auc = 0.5 + auc_rows(task)[rows]
    other = {a: {i: float(auc[i, j]) for i in range(n)} for j, a in enumerate(task.arms)}
    return World(values, planted, task.arms[baseline], [int(r) for r in rows], other)


def _rows(path_rows: list[dict], task: Task) -> dict[tuple[str, int], dict]:
    return {(r["arm"], r["seed"]): r for r in path_rows if r["outcome"] == "completed" and r["objective"] is not None
            and r["arm"] in task.arms}


def curves(task: Task) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """(arm, seed) -> the trial's held-out reward curve [(completions, reward)], from the task's table."""
    return {key: [(float(x), float(y)) for x, y in r["curve"]] for key, r in _TABLE_ROWS[task.name].items()}


def seconds(task: Task) -> dict[str, float]:
    """arm -> its trials' mean training seconds (what a trial of it costs, measured on the table's machine)."""
    rows = _TABLE_ROWS[task.name]
    return {a: float(np.mean([r["seconds"] for (arm, _), r in rows.items() if arm == a and r.get("seconds")]))
            for a in task.arms}


def auc_rows(task: Task) -> np.ndarray:
    """seeds x arms: each trial's held-out reward averaged over its evaluation points after the start (an AUC, the
    effects table's other metric in these worlds) minus its arm's mean: its own real residuals."""
    rows = _TABLE_ROWS[task.name]
    x = np.array([[float(np.mean([y for _, y in rows[(a, s)]["curve"][1:]])) for a in task.arms] for s in task.seeds])
    return x - x.mean(axis=0)


_TABLE_ROWS: dict[str, dict[tuple[str, int], dict]] = {}


def tables(paths: list[Path] | None = None) -> list[Task]:
    """The committed 40-seed tasks (benchmarks/data), in table order."""
    out = []
    for path in paths or TABLES:
        if path.exists():
            table = json.loads(path.read_text())
            for t in tasks_of(table):
                if len(t.seeds) >= 40:
                    _TABLE_ROWS[t.name] = _rows([r for r in table["rows"] if t.name.split(",")[0] == r["task"]], t)
                    out.append(t)
    return out


def paired_sd(task: Task) -> float:
    """The residual sd left once each seed's common effect is removed (what Bechhofer's paired design reads)."""
    res = task.residual_rows()
    within = res - res.mean(axis=1, keepdims=True)
    k = res.shape[1]
    return float(math.sqrt((within**2).sum() / ((len(res) - 1) * (k - 1))))


def main() -> int:
    for task in tables():
        res = task.residual_rows()
        print(f"{task.name}: {len(task.arms)} arms x {len(task.seeds)} seeds, per-arm residual sd "
              + ", ".join(f"{task.labels[a]} {s:.3f}" for a, s in zip(task.arms, res.std(axis=0, ddof=1)))
              + f"; paired sd {paired_sd(task):.3f}")
    print("worlds: " + "; ".join(WORLDS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
