"""A trial imports this checkout of the package and nothing beside it (issue 54 item 1).

The launcher's PYTHONPATH once named the checkout's *parent* folder (a path computed for an older file
location), so a sibling folder called `trl` or `datasets` shadowed the real package inside every local trial.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpo_ablate
from helpers import tiny_spec
from grpo_ablate.core.children import PACKAGE_ROOT, importing_this_checkout
from grpo_ablate.launch.process import ProcessLauncher


def test_a_local_trials_first_path_entry_is_the_folder_holding_the_package(tmp_path):
    env = ProcessLauncher().environment(tiny_spec(tmp_path / "trial"))
    first = env["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(first) / "grpo_ablate" == Path(grpo_ablate.__file__).parent
    assert first == PACKAGE_ROOT


def test_a_child_started_so_imports_this_copy_and_keeps_the_users_path_after_it(tmp_path):
    """A real child process: the package comes from PACKAGE_ROOT, the user's PYTHONPATH entries follow it, and
    the folder above the checkout (where a sibling `trl/` could live) is not on the path at all."""
    env = importing_this_checkout({"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path)})
    code = "import json, sys, grpo_ablate; print(json.dumps([grpo_ablate.__file__, sys.path]))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    where, path = json.loads(out.stdout)
    assert Path(where).parent == Path(PACKAGE_ROOT) / "grpo_ablate"
    assert path[1:3] == [PACKAGE_ROOT, str(tmp_path)]  # path[0] is the script's own folder ('' for -c)
    assert str(Path(PACKAGE_ROOT).parent) not in path
