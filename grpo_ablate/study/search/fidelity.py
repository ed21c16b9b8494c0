"""Multi-fidelity by generated compute: pruners compare trials at the same completions, not steps.

    study: {pruner: median}     # or hyperband; each report's step is completions generated so far

A G=16 trial and a G=2 trial generate the same completions per optimizer step only when their
generation batches match; reusing a larger generation batch over several steps shifts when
completions are generated. So every trial reports at shared checkpoints: multiples of a
quantum of completions (at least the largest generation batch), and the step Optuna sees is
the checkpoint itself. A pruner then judges every trial at the same compute.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["ComputeClock", "quantum", "CHECKPOINTS"]

CHECKPOINTS = 10  # checkpoints per trial when its compute budget is known


def quantum(largest_batch: int, budget: int | None, checkpoints: int = CHECKPOINTS) -> int:
    """Completions between two checkpoints: a whole number of the largest generation batch."""
    largest_batch = max(1, int(largest_batch))
    if not budget:
        return largest_batch
    return largest_batch * max(1, math.ceil(budget / checkpoints / largest_batch))


class ComputeClock:
    """Counts a trial's generated completions; says which checkpoints a new row has crossed."""

    def __init__(self, every: int) -> None:
        self.every = max(1, int(every))
        self.completions = 0
        self.next = self.every

    def advance(self, row: Mapping[str, Any]) -> list[int]:
        n = row.get("completions")
        if isinstance(n, (int, float)) and n > 0:
            self.completions += int(n)
        crossed = []
        while self.completions >= self.next:
            crossed.append(self.next)
            self.next += self.every
        return crossed

    def crossed_at(self, completions: int) -> list[int]:
        """The same from a cumulative count (the benchmark's table rows hold cumulative counts)."""
        return self.advance({"completions": completions - self.completions})
