"""An import inside a function says why it is there (issue 54 item 6): a reader sees a module's needs at its top,
so one that is deferred (a heavy library loaded only where it is used, an optional extra, a process that must set
its environment first) carries a comment on its line, on a line of its block, or just above the block."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_LINE = re.compile(r"\s*(from \S+ )?import ")


def _type_checking(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip |= {id(n) for n in ast.walk(child)}
    return skip


def unexplained(path: Path, root: Path = ROOT) -> list[str]:
    """`path:line: text` for each import inside a function with no comment beside or above its block."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    skip = _type_checking(tree)
    found: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found |= {n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip}
    out = []
    for lineno in sorted(found):
        first = lineno - 1
        while first > 0 and IMPORT_LINE.match(lines[first - 1]):
            first -= 1
        block = lines[first:lineno]
        above = lines[first - 1].strip() if first > 0 else ""
        if not any("#" in line for line in block) and not above.startswith("#"):
            out.append(f"{path.relative_to(root)}:{lineno}: {lines[lineno - 1].strip()}")
    return out


def test_every_deferred_import_says_why():
    bad = [v for p in sorted((ROOT / "grpo_ablate").rglob("*.py")) for v in unexplained(p)]
    assert not bad, "an import inside a function needs its reason beside it (or move it to the top):\n" + "\n".join(bad)


def test_the_check_sees_an_unexplained_import_and_accepts_a_reason(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    import json\n    return json\n\n\ndef g():\n    # lazy: heavy\n    import torch\n"
                   "    import trl\n    return torch, trl\n\n\ndef h():\n    import os  # the environment first\n")
    assert unexplained(src, tmp_path) == ["m.py:2: import json"]


def test_a_command_starts_without_scipy_or_torch():
    """`grpo-ablate` imports every command module to build its parser; none of them may load scipy (~0.6 s of CPU at
    every command's start, `grpo-ablate --help` 1.5 s -> 0.75 s) or torch: the statistics import scipy where they use it."""
    import subprocess
    import sys

    code = ("import sys, grpo_ablate.commands.cli; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'torch', 'transformers', 'trl', 'matplotlib'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
