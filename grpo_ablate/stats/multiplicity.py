"""Many comparisons at once: Holm's step-down adjustment, so a family's error stays at alpha.

    python -c "from grpo_ablate.stats.multiplicity import holm; print(holm([0.01, 0.04, 0.03]))"

A study compares every configuration with the baseline. Each test at 5% alone lets the chance of
at least one false better/worse call grow with the number of arms (0.16 with five equal arms,
measured). Holm (1979, "A simple sequentially rejective multiple test procedure", Scand. J.
Statist. 6) holds the family-wise error at alpha under any dependence between the tests and is
uniformly more powerful than Bonferroni: sort the m p-values, compare the i-th smallest with
alpha / (m - i + 1), stop at the first that fails. The adjusted p-value (the smallest family level
at which a hypothesis is rejected) is what the report prints beside each call.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["holm", "METHOD"]

METHOD = "Holm's step-down adjustment, family-wise error held at 5% over every comparison with the baseline"


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the input order; None (no test possible) stays None and is not counted."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))  # monotone: never below an earlier step's
        out[i] = running
    return out
