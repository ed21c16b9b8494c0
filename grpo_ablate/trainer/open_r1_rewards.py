r"""Open R1's accuracy reward by date, for recipes that name `accuracy` where `open_r1` is not installed: the rule
from 4f5b21e (2025-04-01) on, and the one before it (the February-2025 demo's). config/recipes/registry.py picks
one by the recipe's date; tests/fixtures/openr1_reward_cases.json holds Open R1's own scores for both.

    python -c 'from grpo_ablate.trainer.open_r1_rewards import open_r1_accuracy_reward as r; \
print(r([r"\boxed{2}", r"\boxed{3}"], solution=["2", "2"]))'    # [1.0, 0.0]

Both need math-verify (`pip install 'grpo-ablate[math]'`). The study names them as
`grpo_ablate.trainer.rewards:open_r1_accuracy_reward[_early]` (trainer/rewards.py re-exports them), so a
study file or a stored study written before this module existed resolves to the same functions.
"""

from __future__ import annotations

from typing import Any, Sequence

from .text import plain_text

__all__ = ["open_r1_accuracy_reward", "open_r1_accuracy_reward_early"]


def _open_r1_readers():
    """Open R1's two math-verify readers at its TRL 0.18 pin: the gold with math-verify's own defaults (LaTeX, then a
    bare expression: "42" and "x > 2" parse), a completion with LaTeX only, \\boxed{} tried first and nothing
    matched without an anchor (a bare 42 in the text is not an answer)."""
    try:
        from latex2sympy2_extended import NormalizationConfig  # optional: the `math` extra
        from math_verify import LatexExtractionConfig, parse, verify
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the stand-in for Open R1's accuracy reward needs math-verify: pip install 'grpo-ablate[math]'") from exc
    strict = NormalizationConfig(basic_latex=True, units=True, malformed_operators=False, nits=False, boxed="all")
    completion_reader = [LatexExtractionConfig(normalization_config=strict, boxed_match_priority=0,
                                               try_extract_without_anchor=False)]
    return parse, verify, completion_reader


def open_r1_accuracy_reward(completions: Sequence[Any], solution: Sequence[Any] | None = None,
                            **_: Any) -> list[float | None]:
    """Open R1's accuracy reward (open_r1/rewards.py at the TRL 0.18 pin its recipes use), for recipes naming
    `accuracy` where open_r1 is not installed: 1.0 / 0.0 as math-verify finds the completion's answer equal
    to the gold one, checked as verify(gold, answer) (gold first: verify is not symmetric); None, which TRL
    leaves out of the reward sum, when the gold does not parse (a letter, a word, an empty cell) or
    verify raises. tests/fixtures/openr1_reward_cases.json holds Open R1's own scores, matched 100%."""
    if solution is None:
        raise ValueError("needs a `solution` column in the dataset, as Open R1's accuracy reward does")
    parse, verify, completion_reader = _open_r1_readers()
    out: list[float | None] = []
    for completion, gold in zip(completions, solution, strict=True):
        gold_parsed = parse(str(gold), extraction_mode="first_match")
        if not gold_parsed:
            out.append(None)
            continue
        answer = parse(plain_text(completion), extraction_config=completion_reader, extraction_mode="first_match")
        try:
            out.append(1.0 if verify(gold_parsed, answer) else 0.0)
        except Exception:  # math-verify's own failure on this pair: no score, as in Open R1
            out.append(None)
    return out


def open_r1_accuracy_reward_early(completions: Sequence[Any], solution: Sequence[Any] | None = None,
                                  **_: Any) -> list[float]:
    """Open R1's accuracy reward before 4f5b21e (2025-04-01), for recipes dated before it (the February-2025 demo
    trained with it): the gold parsed with LaTeX extraction only, the completion as later (LaTeX only, \\boxed
    first, nothing without an anchor), verify(answer, gold) (answer first, as it was then); 1.0 for every
    completion where the gold does not parse (a plain "42", a letter, an empty cell: the group has no spread and
    trains nothing), 0.0 where verify raises. tests/fixtures/openr1_reward_cases.json's `accuracy_early` column
    holds that procedure's scores (benchmarks/reward_cases.py), matched case by case."""
    if solution is None:
        raise ValueError("needs a `solution` column in the dataset, as Open R1's accuracy reward does")
    parse, verify, completion_reader = _open_r1_readers()
    from math_verify import LatexExtractionConfig  # installed with the readers above (the `math` extra)

    out: list[float] = []
    for completion, gold in zip(completions, solution, strict=True):
        gold_parsed = parse(str(gold), extraction_mode="first_match", extraction_config=[LatexExtractionConfig()])
        if not gold_parsed:
            out.append(1.0)
            continue
        answer = parse(plain_text(completion), extraction_config=completion_reader, extraction_mode="first_match")
        try:
            out.append(float(verify(answer, gold_parsed)))
        except Exception:  # noqa: BLE001 - then, a verify failure scored 0.0
            out.append(0.0)
    return out
