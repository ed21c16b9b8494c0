"""The Optuna-state boundary: only trial_record.py (reads) and study/ledger.py (writes) touch a trial's
or a study's attributes or spell an attribute's name; everything else goes through their typed
readers (trial_record.trial_dir, outcome, study_attrs, ...). A rename is then made in one place, and a
reader cannot drift from the writer (issue 44 part 3).

The package is held to all of it. Tests and benchmarks read the same way; what they may do that
the package may not is build a fixture study by hand (`set_user_attr`, `create_trial(user_attrs=...)`),
naming each attribute by trial_record's constant, never by a literal.

Read from the source with `ast`, as the layering test is: nothing is imported but trial_record.
"""

from __future__ import annotations

import ast
from pathlib import Path

from grpo_ablate.records import trial_record

ROOT = Path(__file__).resolve().parents[1]
OWNERS = {"grpo_ablate/records/trial_record.py", "grpo_ablate/study/ledger.py"}
EXEMPT = {  # files that name the raw fields for another reason than a trial's record
    "grpo_ablate/storage/journal.py": "validates the journal file's own entry keys (Optuna's log format)",
    "tests/test_storage.py": "the journal repair round-trips arbitrary attributes, as Optuna stores them",
    "tests/test_journal_properties.py": "a property test of the journal storage with arbitrary attributes",
    "tests/test_record_boundary.py": "this test names what it looks for",
}
READS = {"user_attrs", "system_attrs"}
WRITES = {"set_user_attr", "set_system_attr"}
OWNER_MODULES = {"grpo_ablate.records.trial_record", "grpo_ablate.study.ledger"}
# the attribute-name constants (OUTCOME, TRIAL_DIR, CONFIG, ...) and the names they hold; roles are values, and
# the Optuna param names (*_PARAM, which trial_record also spells) are params, not attributes
NAMES = {n for n in trial_record.__all__ if n.isupper() and isinstance(getattr(trial_record, n), str)
         and not n.endswith(("_ROLE", "_PARAM"))}
LITERALS = {getattr(trial_record, n) for n in NAMES}


def _files() -> list[Path]:
    return sorted(p for d in ("grpo_ablate", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py"))


def _owner_aliases(tree: ast.AST) -> set[str]:
    """Local names bound to trial_record or the ledger (`from grpo_ablate.records import trial_record as record`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in OWNER_MODULES}
        elif isinstance(node, ast.Import):
            out |= {a.asname for a in node.names if a.name in OWNER_MODULES and a.asname}
    return out


def _literal_keys(node: ast.AST) -> list[str]:
    """Attribute names written as literals: `set_user_attr("outcome", ...)`, `user_attrs={"cell": ...}`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES and node.args:
        first = node.args[0]
        return [first.value] if isinstance(first, ast.Constant) and first.value in LITERALS else []
    if isinstance(node, ast.keyword) and node.arg in READS and isinstance(node.value, ast.Dict):
        return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and k.value in LITERALS]
    return []


def violations(path: Path, *, fixtures: bool) -> list[str]:
    """Each raw access in the file, "line: what"; `fixtures`: hand-built fixture writes are allowed."""
    tree = ast.parse(path.read_text())
    aliases = _owner_aliases(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", getattr(getattr(node, "value", None), "lineno", 0))
        found += [f"{line}: literal {k!r}" for k in _literal_keys(node)]
        if isinstance(node, ast.Attribute) and (node.attr in READS or (node.attr in WRITES and not fixtures)):
            found.append(f"{line}: .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in READS and not fixtures:
            found.append(f"{line}: {node.arg}=")
        elif not fixtures and isinstance(node, ast.Constant) and node.value in READS | WRITES:
            found.append(f"{line}: {node.value!r}")
        elif (not fixtures and isinstance(node, ast.Attribute) and node.attr in NAMES
              and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append(f"{line}: {node.value.id}.{node.attr}")
        elif not fixtures and isinstance(node, ast.ImportFrom) and node.module in OWNER_MODULES:
            found += [f"{line}: imports {a.name}" for a in node.names if a.name in NAMES]
    return found


def test_only_trial_record_and_the_ledger_touch_optuna_attributes():
    bad = {}
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        if rel in OWNERS or rel in EXEMPT:
            continue
        if found := violations(path, fixtures=not rel.startswith("grpo_ablate/")):
            bad[rel] = found
    assert not bad, ("read a trial's or study's attributes through grpo_ablate/records/trial_record.py (write them through "
                     f"study/ledger.py); raw access or attribute names elsewhere: {bad}")


def test_the_lint_sees_each_kind_of_access(tmp_path):
    src = tmp_path / "x.py"
    src.write_text("from grpo_ablate.records import trial_record as record\nfrom grpo_ablate.study.ledger import CELL\n"
                   "t.user_attrs.get(record.TRIAL_DIR)\nopt.create_trial(user_attrs={'outcome': 'oom'})\n"
                   "getattr(t, 'system_attrs')\ntrial.set_user_attr(record.OUTCOME, 'oom')\n"
                   "trial.set_user_attr('cell', 'x')\nrecord.trial_dir(t)\n")
    found = {v.split(": ", 1)[1] for v in violations(src, fixtures=False)}
    assert found == {"imports CELL", ".user_attrs", "record.TRIAL_DIR", "user_attrs=", "literal 'outcome'",
                     "'system_attrs'", ".set_user_attr", "record.OUTCOME", "literal 'cell'"}, found
    # a fixture may write by the constants, never read, never spell a name
    found = {v.split(": ", 1)[1] for v in violations(src, fixtures=True)}
    assert found == {".user_attrs", "literal 'outcome'", "literal 'cell'"}, found
