"""Many statements on one page, one error budget: Holm's step-down, Shaffer's count, and a split between families.

    python -c "from grpo_ablate.stats.multiplicity import holm; print(holm([0.01, 0.04, 0.03]))"

A study compares every configuration with the baseline, and its page colours every metric. Each
test at 5% alone lets the chance of at least one false statement grow with the number of tests
(0.16 with five equal arms, measured; 0.066-0.087 over the effects table's metrics).

- `holm`: Holm (1979, "A simple sequentially rejective multiple test procedure", Scand. J. Statist.
  6) holds the family-wise error at alpha under any dependence: sort the m p-values, compare the
  i-th smallest with alpha / (number that may still be true), stop at the first that fails. Where
  hypotheses come in groups of which at most one can be true (an arm's "no difference" and its
  "a difference of min_effect or more" cannot both hold), the number that may still be true is the
  number of groups with a hypothesis left: Shaffer's (1986, JASA 81) refinement, never less
  powerful than Holm and still exact in its error bound. The adjusted p-value (the smallest family
  level at which a hypothesis is rejected) is what the report prints.
- `split`: several families share one alpha, each a weight of it, each tested by `holm` within;
  a family all of whose hypotheses are rejected passes its weight on to the others, in proportion
  to theirs. It is the sequentially rejective graphical procedure of Bretz, Maurer, Brannath &
  Posch (2009, Stat. Med. 28) with those edges, so every statement across the families together
  keeps the family-wise error at alpha. The page uses it to hold the answer's calls and the effects
  table's colours to one 5%.
"""

from __future__ import annotations

from typing import Hashable, Sequence

__all__ = ["holm", "split", "PAGE_METHOD"]

PAGE_METHOD = ("one family-wise 5% over every call and colour on the page: the answer's calls (better / worse and "
               "equivalent, Holm with Shaffer's count) and the effects table's other metrics (Holm) share it, 80% and "
               "20%, a family that is wholly rejected passing its share to the other (Bretz et al. 2009)")


def holm(p_values: Sequence[float | None], groups: Sequence[Hashable] | None = None) -> list[float | None]:
    """Holm-adjusted p-values in the input order; None (no test possible) stays None and is not counted.

    `groups`: a label per hypothesis; hypotheses with one label cannot be true together (Shaffer's count:
    the divisor at each step is the number of labels with a hypothesis left). None: every hypothesis its own.
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    label = list(groups) if groups is not None else list(range(len(p_values)))
    left: dict[Hashable, int] = {}
    for _, i in tested:
        left[label[i]] = left.get(label[i], 0) + 1
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for p, i in tested:
        running = max(running, min(1.0, len(left) * p))  # monotone: never below an earlier step's
        out[i] = running
        left[label[i]] -= 1
        if not left[label[i]]:
            del left[label[i]]
    return out


def _levels(adjusted: Sequence[Sequence[float | None]], weights: Sequence[float], alpha: float) -> list[float]:
    """Each family's level at alpha once wholly rejected families have passed their weight on."""
    w = list(weights)
    done = [False] * len(w)
    while True:
        passed = False
        for f, adj in enumerate(adjusted):
            if done[f]:
                continue
            ps = [p for p in adj if p is not None]
            if all(p <= w[f] * alpha for p in ps):  # wholly rejected (or nothing tested): pass the weight on
                rest = [g for g in range(len(w)) if g != f and not done[g]]
                total = sum(weights[g] for g in rest)
                for g in rest:
                    w[g] += w[f] * (weights[g] / total if total > 0 else 1 / len(rest))
                done[f], passed = True, True
        if not passed:
            return [wf * alpha for wf in w]


def split(families: Sequence[Sequence[float | None]], weights: Sequence[float],
          groups: Sequence[Sequence[Hashable] | None] | None = None) -> list[list[float | None]]:
    """Adjusted p-values (the smallest overall level at which each hypothesis is rejected) of the families sharing
    one alpha in proportion to `weights`, `holm` within each (`groups[f]`: Shaffer's labels of family f)."""
    if len(families) != len(weights) or not families or any(x < 0 for x in weights) or sum(weights) <= 0:
        raise ValueError(f"one non-negative weight per family, summing above 0, got {list(weights)}")
    total = sum(weights)
    share = [x / total for x in weights]
    within = [holm(fam, (groups or [None] * len(families))[f]) for f, fam in enumerate(families)]
    if len(families) == 1:
        return within
    out: list[list[float | None]] = []
    for f, adj in enumerate(within):
        row: list[float | None] = []
        for p in adj:
            if p is None:
                row.append(None)
                continue
            lo, hi = 0.0, 1.0
            if p > _levels(within, share, 1.0)[f]:
                row.append(1.0)
                continue
            for _ in range(60):  # the rejection region grows with alpha: bisect for its edge
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if p <= _levels(within, share, mid)[f] else (mid, hi)
            row.append(min(1.0, hi))
        out.append(row)
    return out
