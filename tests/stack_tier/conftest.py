"""The command-trial tier (`make test-stack`): every test here is marked `stack` and `slow`.

A study's trials run a user's own training script (openr1_style_grpo.py, beside this file) in a second
virtualenv with the stack Open R1 pins (TRL 0.18.0, transformers 4.52.4: requirements.txt, .venv-trl018);
the study itself runs from this package's .venv. GRPO_ABLATE_SCRIPT_PYTHON names the second environment's
interpreter (the Makefile sets it); without it a test skips, except under CI (helpers.unavailable).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import unavailable

HERE = Path(__file__).resolve().parent
PYTHON_ENV = "GRPO_ABLATE_SCRIPT_PYTHON"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.stack)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def script_python() -> str:
    """The second environment's interpreter (TRL 0.18.0, transformers 4.52.4)."""
    python = os.environ.get(PYTHON_ENV, "")
    if not python or not Path(python).exists():
        unavailable(f"{PYTHON_ENV} names no interpreter: `make test-stack` builds .venv-trl018 and sets it")
    return python
