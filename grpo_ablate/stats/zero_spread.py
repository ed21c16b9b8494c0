"""The zero-spread law: the chance that a group of G samples of a binary reward all agree.

    python -c "from grpo_ablate.stats.zero_spread import zero_spread; print(zero_spread(8, 0.1))"

A group whose G rewards are all equal has no spread, so GRPO's normalised advantage is zero and
the group teaches nothing. For a prompt the model solves with probability p the chance is
p^G + (1-p)^G; over prompts of varying difficulty (p ~ Beta(a, b)) it is the expectation
E[p^G] + E[(1-p)^G]. One owner, one argument order (G first, then the pass rate or its Beta):
the report's curve, advise's prediction and the per-prompt G policy all read it here.
"""

from __future__ import annotations

import math

__all__ = ["zero_spread", "zero_spread_beta", "beta_moment"]


def zero_spread(g: float, p: float) -> float:
    """p^G + (1-p)^G: all G samples pass or all fail, at one pass rate p."""
    return p**g + (1 - p) ** g


def beta_moment(g: float, a: float, b: float) -> float:
    """E[p^G] for p ~ Beta(a, b): a product for whole G (exact, no special functions), else via log-beta."""
    if float(g).is_integer() and g >= 0:
        out = 1.0
        for k in range(int(g)):
            out *= (a + k) / (a + b + k)
        return out
    # lazy: the trial imports this module (trainer/g_policy.py); scipy only for a Beta law
    from scipy.special import betaln

    return math.exp(float(betaln(a + g, b) - betaln(a, b)))


def zero_spread_beta(g: float, a: float, b: float) -> float:
    """E[p^G + (1-p)^G] for p ~ Beta(a, b): the share of groups without spread over varied prompts."""
    return beta_moment(g, a, b) + beta_moment(g, b, a)
