"""Every command is wired one way (issue 53 item 6): a module of grpo_ablate/commands with `add_parser` and
`run`, listed once in cli.COMMANDS; the parser is nothing but the loop over them."""

from __future__ import annotations

import pkgutil

import grpo_ablate.commands as commands
from grpo_ablate.commands.cli import COMMANDS, build_parser

NOT_COMMANDS = {"cli", "common", "plan_words"}  # the entry point, the shared argument helpers, the plan in words (plan, init, validate)


def test_every_command_module_registers_itself_and_is_listed_once():
    modules = {m.name for m in pkgutil.iter_modules(commands.__path__)} - NOT_COMMANDS
    listed = [m.__name__.rsplit(".", 1)[1] for m in COMMANDS]
    assert sorted(listed) == sorted(modules) and len(set(listed)) == len(listed)
    for module in COMMANDS:
        assert callable(module.add_parser) and callable(module.run), module.__name__


def test_each_subcommand_dispatches_to_its_own_modules_run():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for module in COMMANDS:
        name = module.__name__.rsplit(".", 1)[1].replace("_", "-")
        assert sub.choices[name].get_default("func") is module.run, name
