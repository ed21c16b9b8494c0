"""Every arm against a reference in four words, with the family-wise error held (Holm).

    python -c "from grpo_ablate.stats.calls import calls; \
print(calls({'base': {0: .6, 1: .62, 2: .61}, 'a': {0: .7, 1: .73, 2: .71}}, 'base', min_effect=0.05))"

better / worse: Holm-adjusted two-sided p of the difference (the t test of stats/model.py's one
model, the model the selection's probability reads; no test for an arm with fewer than
model.MIN_SEEDS seeds) below `level`, on that side. equivalent: the two one-sided tests (TOST) of "|difference| >=
min_effect", their p (the larger of the two) Holm-adjusted over the arms, below `level`; checked
first (a difference the data supports but too small to act on is a tie). undecided otherwise.
The better/worse calls are one family and the equivalence calls another, each held at `level`
(stats/multiplicity.py); the report names the method beside the adjusted p-values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from grpo_ablate.stats.multiplicity import holm
from grpo_ablate.stats.model import WORDS, fit
from grpo_ablate.stats.seeds import MeanDifference
from grpo_ablate.stats.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE

__all__ = ["ArmCall", "calls", "method"]


@dataclass(frozen=True)
class ArmCall:
    call: str
    p_adjusted: float | None  # Holm-adjusted p of "no difference"
    p_equivalence_adjusted: float | None  # Holm-adjusted TOST p of "not within min_effect"
    difference: MeanDifference | None

    def as_dict(self) -> dict[str, object]:
        return {"call": self.call, "p_adjusted": self.p_adjusted, "p_equivalence_adjusted": self.p_equivalence_adjusted}


def calls(values: Mapping[str, Mapping[int, float]], reference: str, *, min_effect: float, maximize: bool = True,
          level: float = 0.05) -> dict[str, ArmCall]:
    """{arm: its call against `reference`} for every other arm in `values` ({arm: {seed: value}})."""
    model = fit(values)
    arms = [a for a in values if a != reference]
    diffs = {a: model.contrast(reference, a) for a in arms}
    p_diff = holm([d.two_sided_p() if d is not None else None for d in diffs.values()])
    p_eq = holm([max(d.one_sided_p(-min_effect, greater=True), d.one_sided_p(min_effect, greater=False))
                 if d is not None else None for d in diffs.values()])
    out = {}
    for (a, d), pd, pe in zip(diffs.items(), p_diff, p_eq):
        call = UNDECIDED
        if d is not None and pe is not None and pe < level:
            call = EQUIVALENT
        elif d is not None and pd is not None and pd < level:
            call = BETTER if (d.mean > 0) == maximize else WORSE
        out[a] = ArmCall(call, pd, pe, d)
    return out


def method(values: Mapping[str, Mapping[int, float]]) -> str:
    """The words for the tests `calls` runs on `values`: "t tests of one model of arm and seed effects
    (paired over the shared seeds), ..." or the unpaired model's, as the design chose."""
    return "t tests of " + WORDS[fit(values).kind]
