"""`grpo-ablate explain [KEY]`: what a study-file key does, from the schema's own descriptions.

    grpo-ablate explain budget.max_steps
    grpo-ablate explain            # every key, one block each

A key is dotted as in `--set` (study.objectives.metric and study.objectives[].metric both work);
an unknown key exits 2 naming the closest ones.
"""

from __future__ import annotations

import argparse

from grpo_ablate.commands.common import EXIT_OK, EXIT_USAGE, err, key_choices
from grpo_ablate.config.keys import explain_text, find_key, key_docs

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("explain", help="what a study-file key does: type, default, allowed values (no key: every key)")
    p.add_argument("key", nargs="?", help="a dotted key, e.g. budget.max_steps (or a section, e.g. budget)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    choices = key_choices()  # hardware.launcher's names, from the launcher registry
    docs = key_docs(choices)
    if args.key is None:
        print("\n\n".join(explain_text(d) for d in docs))
        return EXIT_OK
    try:
        doc = find_key(args.key, choices)
    except KeyError as e:
        err(str(e.args[0]))
        return EXIT_USAGE
    print(explain_text(doc))
    below = [d for d in docs if d.key.startswith(doc.key + ".") or d.key.startswith(doc.key + "[].")]
    if below:
        print("\nkeys: " + ", ".join(d.key for d in below))
    return EXIT_OK
