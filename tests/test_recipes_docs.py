"""docs/your-own-run.md stays true: its reward example runs, and its study snippet names a findable reward."""

from __future__ import annotations

import importlib.util
import re
import sys

from helpers import ROOT

DOC = ROOT / "docs/your-own-run.md"


def test_the_custom_reward_example_runs(tmp_path, monkeypatch):
    code = re.search(r"```python\n(# my_rewards\.py.*?)```", DOC.read_text(), re.S).group(1)
    (tmp_path / "my_rewards.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("my_rewards", tmp_path / "my_rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.pop("my_rewards", None)
    completions = ["so \\boxed{4}", [{"role": "assistant", "content": "\\boxed{5}"}], "no box"]
    got = module.boxed_answer(["p"] * 3, completions, None, answer=["4", "4", ""], trainer_state=None)
    assert got == [1.0, 0.0, None]


def test_the_readme_links_the_page():
    assert "(docs/your-own-run.md)" in (ROOT / "README.md").read_text()
