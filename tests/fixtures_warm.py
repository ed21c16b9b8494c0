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

from typing import Iterator

import pytest

from grpo_ablate.trainer.launchers import WarmSession

__all__ = ["warm_session"]


@pytest.fixture(scope="session")
def warm_session() -> Iterator[WarmSession]:
    """The test run's warm session; closed (its child ended) when the run ends."""
    with WarmSession() as session:
        yield session
