"""The built-in accuracy, format and tag_count score as Open R1's rewards of those names do.

Open R1's rules (open_r1/rewards.py): format is `re.match(r"^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$",
text, re.DOTALL | re.MULTILINE)`; tag_count gives 0.25 for each of "<think>\\n", "\\n</think>\\n", "\\n<answer>\\n"
and "\\n</answer>" present exactly once; accuracy parses the gold with math-verify's LaTeX extraction and the
whole completion with LaTeX-only extraction (\\boxed first), and scores 1.0 when the gold cannot be parsed.
The reference below is that rule, written as a regex here, and every case is scored by both.
"""

from __future__ import annotations

import re

import pytest

from grpo_ablate.trainer.rewards import RewardContext, build_reward

OPEN_R1_FORMAT = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.DOTALL | re.MULTILINE)

CASES = [
    "<think>I add.</think> <answer>42</answer>",  # issue 28: the old built-in gave 1.0, Open R1 gives 0.0
    "<think>\nI add.\n</think>\n<answer>\n42\n</answer>",
    "<think>\nI add.\n</think>\n<answer>\n42\n</answer>\n",  # MULTILINE: $ matches before the last newline
    "<think>\nI add.\n</think>\n<answer>\n42\n</answer>\nand more",  # ... and before any newline
    " <think>\nI add.\n</think>\n<answer>\n42\n</answer>",  # nothing before <think>
    "<think>\na\n</think>\n<think>\nb\n</think>\n<answer>\n1\n</answer>",
    "<think>\nonly thinking\n</think>",
    "",
]


def _score(name: str, completions, **columns):
    _, func = build_reward(name, RewardContext())
    return func(prompts=["p"] * len(completions), completions=completions, **columns)


def _open_r1_tag_count(text: str) -> float:
    return sum(0.25 for piece in ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>") if text.count(piece) == 1)


def test_format_scores_every_case_as_open_r1s_regex():
    assert _score("format", CASES) == [1.0 if OPEN_R1_FORMAT.match(c) else 0.0 for c in CASES]
    assert _score("format", CASES[:2]) == [0.0, 1.0]


def test_tag_count_scores_every_case_as_open_r1s_rule():
    assert _score("tag_count", CASES) == [_open_r1_tag_count(c) for c in CASES]
    assert _score("tag_count", [CASES[0]]) == [0.0]  # no tag has its newlines


def test_conversational_completions_are_scored_on_their_text():
    msg = [{"role": "assistant", "content": CASES[1]}]
    assert _score("format", [msg]) == [1.0] and _score("tag_count", [msg]) == [1.0]


def test_accuracy_reads_latex_anywhere_in_the_completion_as_open_r1_does():
    pytest.importorskip("math_verify")
    gold = ["$\\frac{63}{400}$"] * 5
    completions = [
        "Thinking... so the answer is $\\boxed{\\frac{63}{400}}$ and I am done",  # outside any tag: found
        "<think>\nx\n</think>\n<answer>\n$\\frac{63}{400}$\n</answer>",
        "<answer>\n0.1575\n</answer>",  # no LaTeX: Open R1 extracts nothing, 0.0
        "$\\boxed{\\frac{64}{400}}$",
    ]
    assert _score("accuracy", completions, solution=gold[:4]) == [1.0, 1.0, 0.0, 0.0]


def test_a_gold_latex_cannot_parse_scores_one_as_open_r1s_does():
    pytest.importorskip("math_verify")
    assert _score("accuracy", ["$\\boxed{1}$", "anything"], solution=["\\frac{", "\\frac{"]) == [1.0, 1.0]


def test_a_plain_gold_answer_is_compared_where_open_r1_would_skip_it():
    """A plain `answer` column ("42"): Open R1 scores every completion 1.0; the built-in compares."""
    pytest.importorskip("math_verify")
    out = _score("accuracy", ["<answer>42</answer>", "<answer>41</answer>", "$\\boxed{42}$"], answer=["42"] * 3)
    assert out == [1.0, 0.0, 1.0]
