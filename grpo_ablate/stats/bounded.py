"""A 95% interval for the mean of a bounded quantity that stays inside its bounds, by a method made for them.

    python -c "from grpo_ablate.stats.bounded import bounded_interval; \
print(bounded_interval([0.965, 0.961, 0.953, 0.894], 0.0, 1.0))"

A held-out reward of the built-in tasks is a share of prompts answered right: it lies in [0, 1]. Student's
t interval of a few seeds near the top runs past 1 (the demo's G=2: 0.87 to 1.02), and cutting it at 1
only hides that its normal model is wrong there. The interval here is Waudby-Smith & Ramdas's hedged
betting interval ("Estimating means of bounded random variables by betting", JRSSB 86(1), 2024, Section 4,
bets tuned to the fixed number of seeds; stats/sequential.betting_cs): it assumes nothing but the bounds
and independent seeds, holds its 95% for any distribution on them, and is inside the bounds by
construction. With few seeds it is wider than t's (it does not lean on normality); its coverage is
checked by simulation in tests/test_stats.py.
"""

from __future__ import annotations

from typing import Sequence

from grpo_ablate.stats.sequential import betting_cs

__all__ = ["bounded_interval"]


def bounded_interval(values: Sequence[float], low: float, high: float, level: float = 0.95) -> tuple[float, float] | None:
    """The betting interval for the mean of `values`, each in [low, high]; None below two values (module docstring)."""
    if high <= low:
        raise ValueError(f"`low < high` must hold, but got (low={low}, high={high})")
    xs = [min(max(float(x), low), high) for x in values]
    if len(xs) < 2:
        return None
    half = (high - low) / 2
    centre = low + half
    iv = betting_cs([x - centre for x in xs], half, alpha=1 - level, horizon=len(xs))[-1]
    return max(low, iv.low + centre), min(high, iv.high + centre)
