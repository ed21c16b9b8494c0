"""No dead public names: everything a module exports (`__all__`) is used by someone.

A name in `__all__` that nothing reads (not its own module, not another module, not a test or a
benchmark) is a promise nobody keeps: the reader wonders who relies on it and the next change
must keep it working. Five were found by hand in round 5 (`batch_is_searched`, `prefix_cell`,
`DESIGNS`, `ENCODINGS`, `Temperatures`); this keeps them from coming back. Read from the source,
imports nothing. A use is the name read in its own module (not its definition, not `__all__`), or
the word anywhere in another file of the package, tests/ or benchmarks/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _exported(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _read_in_module(tree: ast.Module, name: str) -> bool:
    """The module itself reads `name` (a load of it, or a string annotation that names it)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != name \
                and re.search(rf"\b{re.escape(name)}\b", node.value) and ("|" in node.value or "[" in node.value
                                                                         or node.value.isidentifier()):
            return True  # "FeasibleSpace | None", "list[Arm]"
    return False


def test_every_exported_name_is_used_somewhere():
    package = sorted((ROOT / "grpo_ablate").rglob("*.py"))
    others = package + sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py"))
    texts = {p: p.read_text() for p in others}
    words = {p: set(re.findall(r"\w+", t)) for p, t in texts.items()}
    dead = []
    for path in package:
        tree = ast.parse(texts[path])
        for name in _exported(tree):
            if any(name in w for p, w in words.items() if p != path) or _read_in_module(tree, name):
                continue
            dead.append(f"{path.relative_to(ROOT)}: {name}")
    assert not dead, "exported and never used (remove them, or use them):\n  " + "\n  ".join(dead)
