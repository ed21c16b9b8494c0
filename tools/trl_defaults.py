"""GRPOConfig's field defaults per TRL release, read from the released wheels' source (never imported).

    python tools/trl_defaults.py                       # TRL 0.18.0 (Open R1's pin) and the installed TRL
    python tools/trl_defaults.py --release 0.18.0=4.52.3 --release 1.16.0=5.25.0

Each release is `TRL=TRANSFORMERS`: the TRL wheel and the transformers wheel it ran with (GRPOConfig
subclasses TrainingArguments, so the defaults it does not override are that transformers' own). Both
wheels come from PyPI (`pip download --no-deps`); the script parses `trl/trainer/grpo_config.py`, the
TRL base classes it inherits from, and `transformers/training_args.py` with `ast`, so no torch, no
matching Python and no import side effects are needed, and any past release can be read.

A field's default is its dataclass default (or its default_factory's value). Where a class's
`__post_init__` fills a None default at its top level (`self.bf16 = not self.fp16 if self.bf16 is None
else self.bf16`), the table also holds the value it resolves to from the other defaults.

Writes grpo_ablate/trl_facts/trl_defaults.json, read by grpo_ablate/trl_facts/releases.py.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "grpo_ablate" / "trl_facts" / "trl_defaults.json"
OPEN_R1_PIN = "0.18.0=4.52.3"  # Open R1's setup.py: trl[vllm]==0.18.0, transformers==4.52.3

# Where a base class named in an import lives, when it is not in the module's own package.
_EXTERNAL = {"TrainingArguments": ("transformers", "transformers/training_args.py")}
_UNSET = object()


def _download(package: str, version: str, folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps", "-q",
                    "-d", str(folder)], check=True)
    name = package.replace("-", "_")
    found = sorted(folder.glob(f"{name}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip download {package}=={version} left no wheel in {folder}")
    return found[0]


def _literal(node: ast.expr) -> Any:
    """A default's value where the source states one; a {"expr": source} note where it is computed."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return {"expr": ast.unparse(node)}


def _field_default(value: ast.expr | None) -> Any:
    if value is None:
        return _UNSET
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field":
        kw = {k.arg: k.value for k in value.keywords if k.arg}
        if "default" in kw:
            return _literal(kw["default"])
        factory = kw.get("default_factory")
        if isinstance(factory, ast.Lambda):
            return _literal(factory.body)
        if isinstance(factory, ast.Name) and factory.id in ("list", "dict"):
            return [] if factory.id == "list" else {}
        return _UNSET if factory is None else {"expr": ast.unparse(factory)}
    return _literal(value)


def _post_init_fills(cls: ast.ClassDef) -> dict[str, ast.expr]:
    """Top-level `self.x = A if self.x is None else self.x` and `if self.x is None: self.x = A` in __post_init__."""
    fills: dict[str, ast.expr] = {}
    for fn in cls.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "__post_init__"):
            continue
        for st in fn.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.IfExp):
                name = _self_attr(st.targets[0])
                test = st.value.test
                if name and _is_none_test(test, name) and _self_attr(st.value.orelse) == name:
                    fills[name] = st.value.body
            elif isinstance(st, ast.If) and not st.orelse and len(st.body) == 1 and isinstance(st.body[0], ast.Assign):
                inner = st.body[0]
                name = _self_attr(inner.targets[0]) if len(inner.targets) == 1 else None
                if name and _is_none_test(st.test, name):
                    fills[name] = inner.value
    return fills


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _is_none_test(test: ast.expr, name: str) -> bool:
    return (isinstance(test, ast.Compare) and _self_attr(test.left) == name and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None)


def _evaluate(node: ast.expr, values: dict[str, Any]) -> Any:
    """A fill expression over the other defaults: constants, self.<field>, not/and/or/==/!=. Raises ValueError."""
    if isinstance(node, ast.Constant):
        return node.value
    name = _self_attr(node)
    if name is not None:
        if name not in values or isinstance(values[name], dict):
            raise ValueError(name)
        return values[name]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, values)
    if isinstance(node, ast.BoolOp):
        parts = [_evaluate(v, values) for v in node.values]
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        same = _evaluate(node.left, values) == _evaluate(node.comparators[0], values)
        return same if isinstance(node.ops[0], ast.Eq) else not same
    raise ValueError(ast.unparse(node))


class _Source:
    """The Python files of two unpacked wheels, parsed on demand."""

    def __init__(self, wheels: dict[str, Path]):
        self.zips = {pkg: zipfile.ZipFile(w) for pkg, w in wheels.items()}

    def module(self, package: str, path: str) -> ast.Module:
        return ast.parse(self.zips[package].read(path).decode("utf-8"), filename=f"{package}:{path}")

    def chain(self, package: str, path: str, name: str) -> list[ast.ClassDef]:
        """The class and its dataclass bases, most basic first (single inheritance, as TRL's configs are)."""
        tree = self.module(package, path)
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        if not cls.bases or not isinstance(cls.bases[0], ast.Name):
            return [cls]
        base = cls.bases[0].id
        if base in _EXTERNAL:
            pkg, where = _EXTERNAL[base]
            return [*self.chain(pkg, where, base), cls]
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and any(a.name == base for a in node.names) and node.level:
                parts = path.split("/")[:-node.level] + (node.module or "").split(".")
                return [*self.chain(package, "/".join(parts) + ".py", base), cls]
        return [cls]


def read_release(trl_wheel: Path, transformers_wheel: Path) -> dict[str, Any]:
    """{field: {"default", "type", "declared_in", ["resolved"]}} for GRPOConfig in one TRL release."""
    source = _Source({"trl": trl_wheel, "transformers": transformers_wheel})
    fields: dict[str, dict[str, Any]] = {}
    fills: dict[str, ast.expr] = {}
    for cls in source.chain("trl", "trl/trainer/grpo_config.py", "GRPOConfig"):
        for st in cls.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                name = st.target.id
                if ast.unparse(st.annotation).startswith("ClassVar"):
                    continue
                default = _field_default(st.value)
                entry: dict[str, Any] = {"type": ast.unparse(st.annotation), "declared_in": cls.name}
                if default is not _UNSET:
                    entry["default"] = default
                fields[name] = entry
        fills.update(_post_init_fills(cls))
    plain = {k: v.get("default") for k, v in fields.items()}
    for name, expr in fills.items():
        if name in fields and fields[name].get("default") is None:
            try:
                fields[name]["resolved"] = _evaluate(expr, plain)
                fields[name]["resolved_by"] = f"__post_init__: {ast.unparse(expr)} when None"
            except ValueError:
                pass
    return dict(sorted(fields.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="append", metavar="TRL=TRANSFORMERS",
                        help=f"a TRL release and the transformers it ran with (default: {OPEN_R1_PIN} and the "
                             f"installed trl=transformers)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    releases = args.release or [OPEN_R1_PIN, f"{importlib.metadata.version('trl')}="
                                             f"{importlib.metadata.version('transformers')}"]
    table: dict[str, Any] = {
        "command": "python tools/trl_defaults.py " + " ".join(f"--release {r}" for r in releases),
        "about": "GRPOConfig field defaults per TRL release, read with ast from the released wheels' "
                 "trl/trainer/grpo_config.py, its TRL base classes and transformers/training_args.py",
        "releases": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for release in releases:
            trl_version, _, tf_version = release.partition("=")
            if not tf_version:
                raise SystemExit(f"--release {release}: expected TRL=TRANSFORMERS, e.g. {OPEN_R1_PIN}")
            trl_wheel = _download("trl", trl_version, Path(tmp))
            tf_wheel = _download("transformers", tf_version, Path(tmp))
            table["releases"][trl_version] = {"transformers": tf_version, "fields": read_release(trl_wheel, tf_wheel)}
            print(f"TRL {trl_version} (transformers {tf_version}): {len(table['releases'][trl_version]['fields'])} "
                  f"fields", file=sys.stderr)
    args.out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
