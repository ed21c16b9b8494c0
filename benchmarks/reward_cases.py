"""Score the Open R1 reward case table with the math-verify this interpreter has (Open R1's own procedure).

    # the column the test suite checks the stand-ins against: the math-verify installed with grpo-ablate
    .venv/bin/python benchmarks/reward_cases.py --column accuracy
    # the column for the math-verify Open R1's recipes pin (0.5.2), from a throwaway environment
    python3 -m venv /tmp/mv052 && /tmp/mv052/bin/pip install math-verify==0.5.2
    PYTHONPATH=. /tmp/mv052/bin/python benchmarks/reward_cases.py --column accuracy_pinned --standins

Open R1's accuracy reward at the commit its GRPO recipes pin (TRL 0.18.0; src/open_r1/rewards.py),
as a procedure: the gold is parsed with math-verify's default extraction (LaTeX, then a plain
expression) and the first match; an empty parse gives None (TRL leaves it out of the reward sum);
the completion's text is parsed with LaTeX extraction only (basic LaTeX, units, equations and every
\\boxed{} normalised; no malformed operators, no nits; \\boxed first; nothing matched without an
anchor), the first match; the score is verify(gold, answer) as a float, None when verify raises.
Format and tag_count do not depend on math-verify: Open R1's regex and tag counts, written for
every case (a case whose value changes is listed).

`--column accuracy_early` scores Open R1's accuracy as it was before 4f5b21e (2025-04-01), the rule recipes
dated before then trained with (the February-2025 demo): the gold parsed with LaTeX extraction only, an
empty parse scores 1.0 (every completion: the example teaches nothing), the completion read as above, and
verify(answer, gold) (answer first), 0.0 when verify raises.

    .venv/bin/python benchmarks/reward_cases.py --column accuracy_early --standins

Writes the column into tests/fixtures/openr1_reward_cases.json (every case), the versions that
scored it under "scored_with", and "disagree": the cases whose `accuracy` and `accuracy_pinned`
differ. `--standins` also runs this package's stand-ins (grpo_ablate.trainer.rewards) in this
interpreter and prints every case where they differ from the column: none is the claim.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import sys
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parents[1] / "tests/fixtures/openr1_reward_cases.json"
_FORMAT = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.DOTALL | re.MULTILINE)
_TAGS = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")


def reference_accuracy(completion: str, gold: str) -> float | None:
    """Open R1's accuracy at its pin, as the module docstring describes it."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    gold_parsed = parse(gold, extraction_mode="first_match")
    if len(gold_parsed) == 0:
        return None
    reader = LatexExtractionConfig(
        normalization_config=NormalizationConfig(basic_latex=True, units=True, equations=True, boxed="all",
                                                 malformed_operators=False, nits=False),
        boxed_match_priority=0, try_extract_without_anchor=False)
    answer = parse(completion, extraction_config=[reader], extraction_mode="first_match")
    try:
        return float(verify(gold_parsed, answer))
    except Exception:  # noqa: BLE001 - Open R1 scores a verify failure as None
        return None


def reference_accuracy_early(completion: str, gold: str) -> float:
    """Open R1's accuracy before 2025-04-01, as the module docstring describes it."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    gold_parsed = parse(gold, extraction_mode="first_match", extraction_config=[LatexExtractionConfig()])
    if len(gold_parsed) == 0:
        return 1.0
    reader = LatexExtractionConfig(
        normalization_config=NormalizationConfig(basic_latex=True, units=True, equations=True, boxed="all",
                                                 malformed_operators=False, nits=False),
        boxed_match_priority=0, try_extract_without_anchor=False)
    answer = parse(completion, extraction_config=[reader], extraction_mode="first_match")
    try:
        return float(verify(answer, gold_parsed))
    except Exception:  # noqa: BLE001 - then, a verify failure scored 0.0
        return 0.0


def reference_format(completion: str) -> float:
    return 1.0 if _FORMAT.match(completion) else 0.0


def reference_tag_count(completion: str) -> float:
    return float(sum(0.25 for tag in _TAGS if completion.count(tag) == 1))


def _versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in ("math-verify", "latex2sympy2_extended")}


def _standin_differences(cases: list[dict[str, Any]], column: str) -> list[str]:
    from grpo_ablate.config.recipes import OPEN_R1_STAND_INS
    from grpo_ablate.config.recipes.registry import OPEN_R1_EARLY_ACCURACY
    from grpo_ablate.trainer.rewards import RewardContext, build_reward

    messages = [[{"role": "assistant", "content": c["completion"]}] for c in cases]
    out = []
    stand_ins = dict(OPEN_R1_STAND_INS)
    if column == "accuracy_early":
        stand_ins["accuracy"] = OPEN_R1_EARLY_ACCURACY
    for name, (stand_in, _) in stand_ins.items():
        _, func = build_reward(stand_in, RewardContext())
        got = func(prompts=["p"] * len(cases), completions=messages, solution=[c["solution"] for c in cases])
        want_key = column if name == "accuracy" else name
        out += [f"{name} {c['case']!r}: stand-in {g!r}, Open R1 {c[want_key]!r}"
                for c, g in zip(cases, got) if g != c[want_key] or type(g) is not type(c[want_key])]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--column", required=True, choices=["accuracy", "accuracy_pinned", "accuracy_early"])
    p.add_argument("--standins", action="store_true", help="also compare the package's stand-ins in this interpreter")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the column would change")
    args = p.parse_args(argv)
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = table["cases"]
    changed = []
    for c in cases:
        rule = reference_accuracy_early if args.column == "accuracy_early" else reference_accuracy
        score = rule(c["completion"], c["solution"])
        if c.get(args.column, "missing") != score:
            changed.append(c["case"])
        c[args.column] = score
        for name, rule in (("format", reference_format), ("tag_count", reference_tag_count)):
            value = rule(c["completion"])
            if c.get(name, "missing") != value or type(c.get(name)) is not float:
                changed.append(f"{c['case']} ({name})")
            c[name] = value
    table.setdefault("scored_with", {})[args.column] = _versions()
    if "accuracy" in cases[0] and "accuracy_pinned" in cases[0]:
        table["disagree"] = [c["case"] for c in cases if c["accuracy"] != c["accuracy_pinned"]]
    print(f"{args.column}: {len(cases)} cases scored with {_versions()}; {len(changed)} changed: {changed}")
    status = 0
    if args.standins:
        wrong = _standin_differences(cases, args.column)
        print(f"stand-ins vs {args.column}: {len(cases) * 3 - len(wrong)}/{len(cases) * 3} match" +
              "".join(f"\n  {w}" for w in wrong))
        status = 1 if wrong else 0
    if args.check:
        return 1 if changed else status
    TABLE.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
