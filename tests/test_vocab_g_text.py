"""G is read from text in one place: the study-file loader (grpo_ablate/config/).

Everywhere else a G travels as a value (an int or a schedule object) or as data
(schedule.generations_data): Optuna attributes, spec.json, summary.json and advise.json store a
schedule's numbers, and a categorical param's text is looked up in the study's feasible space.
This test reads the package and the benchmarks and fails on any other use of the text parser.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARSER = "parse_generations"
LOADER = ROOT / "grpo_ablate" / "config"  # the study-file loader: it alone turns text into a G
DEFINED_IN = ROOT / "grpo_ablate" / "schedule.py"
GONE = {"parse_pair_label", "from_key"}  # text-to-G readers that no longer exist anywhere


def _names(tree: ast.AST) -> list[tuple[str, int]]:
    """Every name the module uses or imports, with its line (a call, an attribute, an alias)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append((node.id, node.lineno))
        elif isinstance(node, ast.Attribute):
            out.append((node.attr, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.FunctionDef):
            out.append((node.name, node.lineno))
    return out


def _uses(files: list[Path], wanted: set[str]) -> list[str]:
    hits = []
    for path in files:
        for name, line in _names(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if name in wanted:
                hits.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return hits


def _sources() -> list[Path]:
    return sorted([*(ROOT / "grpo_ablate").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])


def test_only_the_loader_reads_g_from_text():
    outside = [p for p in _sources() if p != DEFINED_IN and LOADER not in p.parents]
    hits = _uses(outside, {PARSER})
    assert not hits, ("G is parsed from text outside the study-file loader (grpo_ablate/config/); carry it as a "
                      "value or as schedule.generations_data, or look a label up in the study's space:\n"
                      + "\n".join(hits))


def test_the_loader_does_read_it_and_the_old_readers_are_gone():
    assert _uses(sorted(LOADER.rglob("*.py")), {PARSER}), "the loader no longer reads G: this test guards nothing"
    assert not _uses(_sources(), GONE)


def test_the_check_sees_a_call_an_import_and_an_attribute(tmp_path):
    """The walker finds the three ways a module can reach the parser, so a clean result means something."""
    bad = tmp_path / "bad.py"
    bad.write_text("from grpo_ablate.core.schedule import parse_generations\n"
                   "import grpo_ablate.core.schedule as s\n"
                   "x = s.parse_generations('4->8@40%')\n"
                   "y = parse_generations('8')\n")
    lines = sorted(line for name, line in _names(ast.parse(bad.read_text())) if name == PARSER)
    assert lines == [1, 3, 4]
