"""One warm trial process for the tests that run trials on the child side: a session-scoped fixture.

    # tests/conftest.py
    pytest_plugins = ["fixtures_warm"]

    def test_something(warm_session, tmp_path):
        result = warm_session.run(spec)      # a TrialResult, as run_trial's would be

Each trial process pays ~7-12 s of start-up on the 2-core machine; trials run through
`warm_session` pay it once per test run. The session is the real WarmSession
(grpo_ablate/trainer/launchers/warm.py), so each trial still starts from what a fresh
process has, and a trial that fails, runs out of memory, times out or is stopped gets a fresh
process for the next one. A test that changes the environment (monkeypatch.setenv of anything
but the thread counts) also gets a fresh process: the session notices and replaces itself.
Trials that cannot share a session (several processes, vLLM) get a process of their own.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from grpo_ablate.trainer.launchers import WarmSession
from grpo_ablate.trainer.spec import TrialResult, TrialSpec

__all__ = ["warm_session"]

# pytest names the running test in the environment (and so in every trial's): a value that changes
# with each test, which the session rightly counts as a different start-up, so each test got a fresh
# process (measured: every warm trial of a test was "trial 1 of this process").
_PYTEST_VARIABLE = "PYTEST_CURRENT_TEST"


class _SuiteSession(WarmSession):
    """The session, with pytest's per-test variable kept out of the trials' environment while one runs."""

    def run(self, spec: TrialSpec, **kwargs: Any) -> TrialResult:
        current = os.environ.pop(_PYTEST_VARIABLE, None)
        try:
            return super().run(spec, **kwargs)
        finally:
            if current is not None:  # pytest removes it after the test, and expects to find it
                os.environ[_PYTEST_VARIABLE] = current


@pytest.fixture(scope="session")
def warm_session() -> Iterator[WarmSession]:
    """The test run's warm session; closed (its child ended) when the run ends."""
    with _SuiteSession() as session:
        yield session
