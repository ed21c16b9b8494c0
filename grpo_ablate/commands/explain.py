"""`grpo-ablate explain [KEY]`: what a study-file key does, from the schema's own descriptions, and what a
`trainer:` key does, from the installed TRL's own GRPOConfig (config/trainer_keys.py).

    grpo-ablate explain budget.max_steps
    grpo-ablate explain trainer.beta    # TRL's type, default and help; other releases' defaults where they differ
    grpo-ablate explain            # every study-file key, one block each

A key is dotted as in `--set` (study.objectives.metric and study.objectives[].metric both work);
an unknown key exits 2 naming the closest ones.
"""

from __future__ import annotations

import argparse

from grpo_ablate.commands.common import EXIT_OK, EXIT_USAGE, err, key_choices
from grpo_ablate.config.keys import explain_text, find_key, key_docs
from grpo_ablate.config.trainer_keys import PREFIX, find_trainer_key, trainer_section_note

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("explain", help="what a study-file key does: type, default, allowed values (no key: every key); "
                                       "trainer.<field>: TRL's own help for a GRPOConfig field")
    p.add_argument("key", nargs="?", help="a dotted key, e.g. budget.max_steps, trainer.beta (or a section, e.g. budget)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    choices = key_choices()  # hardware.launcher's names, from the launcher registry
    docs = key_docs(choices)
    if args.key is None:
        print("\n\n".join(explain_text(d) for d in docs))
        print(f"\ntrainer.<field>: {trainer_section_note()}")
        return EXIT_OK
    try:
        doc = find_trainer_key(args.key) if args.key.strip().startswith(PREFIX) else find_key(args.key, choices)
    except KeyError as e:
        err(str(e.args[0]))
        return EXIT_USAGE
    print(explain_text(doc))
    if doc.key == PREFIX.rstrip("."):
        print(trainer_section_note())
    below = [d for d in docs if d.key.startswith(doc.key + ".") or d.key.startswith(doc.key + "[].")]
    if below:
        print("\nkeys: " + ", ".join(d.key for d in below))
    return EXIT_OK
