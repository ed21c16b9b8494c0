"""The built-in accuracy, format and tag_count score as Open R1's rewards of those names do.

Open R1's rules (open_r1/rewards.py): format is `re.match(r"^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$",
text, re.DOTALL | re.MULTILINE)`; tag_count gives 0.25 for each of "<think>\\n", "\\n</think>\\n", "\\n<answer>\\n"
and "\\n</answer>" present exactly once; accuracy parses the gold with math-verify's LaTeX extraction and the
whole completion with LaTeX-only extraction (\\boxed first). The built-in `accuracy` differs on plain golds (it is
for a study's own data); a recipe naming Open R1's `accuracy` gets `open_r1_accuracy_reward`, checked against
Open R1's own scores below.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest

from grpo_ablate.config import load_study
from grpo_ablate.config.recipes import OPEN_R1_STAND_INS
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


def test_the_builtin_accuracy_compares_a_plain_gold_answer():
    """A plain `answer` column ("42"): the built-in `accuracy` (for a study's own data) reads the <answer> tag;
    Open R1's reward would score the tagged plain 42 as 0.0 (its stand-in, below, does)."""
    pytest.importorskip("math_verify")
    out = _score("accuracy", ["<answer>42</answer>", "<answer>41</answer>", "$\\boxed{42}$"], answer=["42"] * 3)
    assert out == [1.0, 0.0, 1.0]


CASES_TABLE = json.loads((Path(__file__).parent / "fixtures/openr1_reward_cases.json").read_text(encoding="utf-8"))


def test_the_stand_ins_score_every_case_as_open_r1s_own_functions():
    """Open R1's scores (computed by its functions at the TRL 0.18 pin, fixtures/openr1_reward_cases.json) for LaTeX,
    plain numbers, intervals, inequalities, unparseable, empty, letter and word golds and format layouts: the
    stand-ins a recipe gets without open_r1 match every one, None included."""
    pytest.importorskip("math_verify")
    cases = CASES_TABLE["cases"]
    assert len(cases) >= 45
    installed = importlib.metadata.version("math-verify")
    column = next(col for col, v in CASES_TABLE["scored_with"].items() if v["math-verify"] == installed)
    messages = [[{"role": "assistant", "content": c["completion"]}] for c in cases]
    for name, (stand_in, _) in OPEN_R1_STAND_INS.items():
        _, func = build_reward(stand_in, RewardContext())
        got = func(prompts=["p"] * len(cases), completions=messages, solution=[c["solution"] for c in cases])
        key = column if name == "accuracy" else name
        wrong = [(c["case"], c[key], g) for c, g in zip(cases, got) if g != c[key] or type(g) is not type(c[key])]
        assert wrong == [], name
    scores = {c["case"]: c["accuracy"] for c in cases}
    # the cases: a tagged plain 42 is 0.0 for Open R1, an unparseable, empty or letter gold is None
    assert scores["plain gold 42, plain tagged"] == 0.0 and scores["letter gold A"] is None
    assert scores["empty gold"] is None and scores["unparseable gold"] is None


def test_the_table_holds_the_pinned_math_verify_s_scores_beside_the_installed_one_s():
    """Open R1's recipes install math-verify 0.5.2; the suite runs the installed one. Both columns are Open R1's
    procedure (benchmarks/reward_cases.py); `disagree` names the cases they score differently (none, measured)."""
    scored = CASES_TABLE["scored_with"]
    assert scored["accuracy_pinned"]["math-verify"] == "0.5.2"
    assert scored["accuracy"]["math-verify"] != "0.5.2"  # else the two columns say the same thing twice
    cases = CASES_TABLE["cases"]
    assert all("accuracy" in c and "accuracy_pinned" in c for c in cases)
    assert CASES_TABLE["disagree"] == [c["case"] for c in cases if c["accuracy"] != c["accuracy_pinned"]]


def test_a_recipe_naming_accuracy_gets_the_stand_in_without_open_r1(tmp_path):
    recipe = Path(__file__).parent / "fixtures/open-r1/qwen2.5-math-7b-grpo-config_simple_rl.yaml"
    study = tmp_path / "s.yaml"
    study.write_text(f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'o'}, seeds: [0]}}\n"
                     f"trainer_from: {recipe}\nsearch: {{num_generations: [8, 16]}}\n")
    loaded = load_study(study)
    assert loaded.rewards[0].name == OPEN_R1_STAND_INS["accuracy"][0]
    assert any("stands in for Open R1's open_r1.rewards:accuracy_reward" in w for w in loaded.warnings)


def test_a_recipe_dated_before_april_2025_gets_that_date_s_accuracy_rule(tmp_path):
    """Open R1's accuracy changed on 2025-04-01: before, an unparseable gold (plain 42, a letter, an empty cell) scored
    1.0 for every completion and verify ran answer-first. A recipe dated before gets that rule's stand-in, which
    matches the table's `accuracy_early` column (benchmarks/reward_cases.py) on every case."""
    pytest.importorskip("math_verify")
    from grpo_ablate.config.recipes.registry import OPEN_R1_EARLY_ACCURACY

    cases = CASES_TABLE["cases"]
    _, func = build_reward(OPEN_R1_EARLY_ACCURACY[0], RewardContext())
    got = func(prompts=["p"] * len(cases), completions=[[{"role": "assistant", "content": c["completion"]}] for c in cases],
               solution=[c["solution"] for c in cases])
    assert [(c["case"], g) for c, g in zip(cases, got)] == [(c["case"], c["accuracy_early"]) for c in cases]
    early = {c["case"]: c["accuracy_early"] for c in cases}
    assert early["plain gold 42, boxed wrong"] == 1.0 and early["letter gold A"] == 1.0 and early["empty gold"] == 1.0
    recipe = Path(__file__).parent / "fixtures/open-r1/qwen2.5-math-7b-grpo-config_simple_rl.yaml"
    study = tmp_path / "s.yaml"
    base = (f"study: {{name: s, sampler: ablation, output_dir: {tmp_path / 'o'}, seeds: [0]}}\n"
            f"trainer_from: {recipe}\nsearch: {{num_generations: [8, 16]}}\n")
    study.write_text(base + "recipe_date: 2025-03-01\n")
    assert load_study(study).rewards[0].name == OPEN_R1_EARLY_ACCURACY[0]
    study.write_text(base + "recipe_date: 2025-04-02\n")
    assert load_study(study).rewards[0].name == OPEN_R1_STAND_INS["accuracy"][0]
