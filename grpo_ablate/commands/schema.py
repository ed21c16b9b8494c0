"""`grpo-ablate schema`: the study file's JSON Schema, for editors (YAML language servers read it).

    grpo-ablate schema --out study.schema.json
    # then, first line of a study file:  # yaml-language-server: $schema=study.schema.json

Printed to stdout without --out. `--markdown` prints the study file's key table instead (the one
docs/study-file.md's "Every key" section holds; tests/test_config_keys.py checks they match).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from grpo_ablate.commands.common import EXIT_OK, check_out, key_choices
from grpo_ablate.config.keys import json_schema, key_table

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("schema", help="the study file's JSON Schema for editors (or --markdown: its key table)")
    p.add_argument("--out", help="write it to this file (replaced whole, never half-written) instead of stdout")
    p.add_argument("--markdown", action="store_true", help="the study file's key table (Markdown) instead of the JSON Schema")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    choices = key_choices()  # hardware.launcher's names, from the launcher registry
    text = key_table(choices) if args.markdown else json.dumps(json_schema(choices), indent=2) + "\n"
    if args.out is None:
        print(text, end="")
        return EXIT_OK
    check_out(args.out, "--out")
    target = Path(args.out)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"wrote {target}")
    return EXIT_OK
