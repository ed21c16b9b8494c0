"""The in-process CLI the tests use instead of a child process (helpers.cli_inprocess) shows what
a child would: the same exit code, stdout and stderr, and leaves the test process as it was."""

from __future__ import annotations

import os
import sys

from helpers import ROOT, cli_inprocess, run_cli


def test_inprocess_and_child_process_agree_on_a_valid_and_a_refused_study(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: {name: t}\ndata: {task: nope}\n")
    for args in (["validate", "studies/tiny-cpu.yaml"], ["validate", str(bad)]):
        child = run_cli(*args, timeout=300)
        here = cli_inprocess(*args)
        assert (here.returncode, here.stdout, here.stderr) == (child.returncode, child.stdout, child.stderr), args


def test_usage_errors_exit_2_and_the_process_is_left_as_it_was(tmp_path):
    cwd, stdin = os.getcwd(), sys.stdin
    code, out, err = cli_inprocess("no-such-command", cwd=tmp_path, GRPO_ABLATE_TEST_MARK="1")
    assert code == 2 and out == "" and "invalid choice" in err
    assert os.getcwd() == cwd and sys.stdin is stdin and "GRPO_ABLATE_TEST_MARK" not in os.environ
    code, out, _ = cli_inprocess("--version")
    assert code == 0 and out.startswith("grpo-ablate ")


def test_commands_run_from_the_given_folder():
    assert cli_inprocess("validate", "studies/tiny-cpu.yaml").returncode == 0  # relative to the repository root
    assert cli_inprocess("validate", "studies/tiny-cpu.yaml", cwd=ROOT / "tests").returncode == 2
