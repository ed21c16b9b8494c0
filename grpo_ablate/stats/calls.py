"""Every arm against a reference in four words, with the family-wise error of the page held.

    python -c "from grpo_ablate.stats.calls import calls; \
print(calls({'base': {0: .6, 1: .62, 2: .61}, 'a': {0: .7, 1: .73, 2: .71}}, 'base', min_effect=0.05))"

better / worse: the two-sided p of the difference (the t test of stats/model.py's one model, each
contrast with its own variance; no test for an arm with fewer than model.MIN_SEEDS seeds), adjusted,
below `level`, on that side. equivalent: the two one-sided tests (TOST) of "|difference| >=
min_effect", their p (the larger of the two), adjusted, below `level`; checked first (a difference
the data supports but too small to act on is a tie). undecided otherwise.

One family: an arm's "no difference" and its "a difference of min_effect or more" cannot both be
true, so both kinds of call share one Holm family with Shaffer's count (stats/multiplicity.py): at
most one hypothesis per arm can be true, and the error over every better / worse / equivalent call
together is held at `level` (two families at `level` each could together err up to twice it). `page_calls` adds
the page's other statements (the effects table's colours on other metrics) as a second family
sharing the same level (multiplicity.split), so the page as a whole keeps it; the answer's calls get
ANSWER_SHARE of it while the other family has anything to test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from grpo_ablate.stats.model import WORDS, fit
from grpo_ablate.stats.multiplicity import split
from grpo_ablate.stats.seeds import MeanDifference
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE

__all__ = ["ArmCall", "calls", "page_calls", "method", "ANSWER_SHARE"]

ANSWER_SHARE = 0.8  # of the page's level, for the answer's calls while the effects table has other metrics to test


@dataclass(frozen=True)
class ArmCall:
    call: str
    p_adjusted: float | None  # adjusted p of "no difference"
    p_equivalence_adjusted: float | None  # adjusted TOST p of "not within min_effect"
    difference: MeanDifference | None

    def as_dict(self) -> dict[str, object]:
        return {"call": self.call, "p_adjusted": self.p_adjusted, "p_equivalence_adjusted": self.p_equivalence_adjusted}


def page_calls(values: Mapping[str, Mapping[int, float]], reference: str, *, min_effect: float, maximize: bool = True,
               level: float = 0.05, others: Sequence[float | None] = ()) -> tuple[dict[str, ArmCall], list[float | None]]:
    """({arm: its call against `reference`}, the adjusted p-values of `others`, in their order): the calls and the
    page's other statements (`others`: their unadjusted p-values) in one error budget (module docstring)."""
    model = fit(values)
    arms = [a for a in values if a != reference]
    diffs = {a: model.contrast(reference, a) for a in arms}
    p_diff = [d.two_sided_p() if d is not None else None for d in diffs.values()]
    p_eq = [max(d.one_sided_p(-min_effect, greater=True), d.one_sided_p(min_effect, greater=False))
            if d is not None and min_effect > 0 else None for d in diffs.values()]
    family = p_diff + p_eq
    labels = arms + arms  # an arm's two hypotheses cannot both be true (min_effect > 0)
    rest = list(others)
    if any(p is not None for p in rest):
        adjusted, rest_adj = split([family, rest], [ANSWER_SHARE, 1 - ANSWER_SHARE], [labels, None])
    else:
        adjusted, rest_adj = split([family], [1.0], [labels])[0], [None] * len(rest)
    m = len(arms)
    out = {}
    for n, (a, d) in enumerate(diffs.items()):
        pd, pe = adjusted[n], adjusted[m + n]
        call = UNDECIDED
        if d is not None and pe is not None and pe < level:
            call = EQUIVALENT
        elif d is not None and pd is not None and pd < level:
            call = BETTER if (d.mean > 0) == maximize else WORSE
        out[a] = ArmCall(call, pd, pe, d)
    return out, rest_adj


def calls(values: Mapping[str, Mapping[int, float]], reference: str, *, min_effect: float, maximize: bool = True,
          level: float = 0.05) -> dict[str, ArmCall]:
    """{arm: its call against `reference`} for every other arm in `values` ({arm: {seed: value}}), the calls one
    family at `level`."""
    return page_calls(values, reference, min_effect=min_effect, maximize=maximize, level=level)[0]


def method(values: Mapping[str, Mapping[int, float]]) -> str:
    """The words for the tests `calls` runs on `values`: "t tests of one model of arm and seed effects
    (paired over the shared seeds), ..." or the unpaired model's, as the design chose."""
    return "t tests of " + WORDS[fit(values).kind]
