"""One warm trial process for the tests that run trials on the child side: a session-scoped fixture.

    # tests/conftest.py
    pytest_plugins = ["fixtures_warm"]

    def test_something(warm_session, tmp_path):
        result = warm_session.run(spec)      # a TrialResult, as run_trial's would be

    def test_a_study(study_here, tmp_path):
        res = study_here("run", "studies/tiny-cpu.yaml", ...)   # `grpo-ablate run` in this process,
                                                                 # its trials in the same session

Each trial process pays ~7-12 s of start-up on the 2-core machine; trials run through
`warm_session` pay it once per test run. The session is the real WarmSession
(grpo_ablate/launch/warm.py), so each trial still starts from what a fresh
process has, and a trial that fails, runs out of memory, times out or is stopped gets a fresh
process for the next one (forked from the session's template: launch/template.py). A
test that changes the environment (monkeypatch.setenv of anything but the thread counts) also gets
a fresh process: the session notices and replaces itself. pytest's PYTEST_CURRENT_TEST, which
names the running test, is not part of a session's start (warm.py `_startup_key`).
Trials that cannot share a session (several processes, vLLM) get a process of their own.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from helpers import TESTS, CliResult, cli_inprocess
from grpo_ablate.launch import LauncherPool, WarmSession, lend_launchers

__all__ = ["study_here", "warm_session"]


@pytest.fixture(scope="session")
def warm_session() -> Iterator[WarmSession]:
    """The test run's warm session; closed (its child ended) when the run ends."""
    with WarmSession() as session:
        yield session


@pytest.fixture(scope="session")
def second_warm_session() -> Iterator[WarmSession]:
    """A second session for a study's second worker thread (study_here); started when one first asks."""
    with WarmSession() as session:
        yield session


@pytest.fixture
def study_here(warm_session: WarmSession, second_warm_session: WarmSession) -> Callable[..., CliResult]:
    """`grpo-ablate ARGS` in this process (helpers.cli_inprocess) with its trials in the suite's sessions.

    For a command whose trials must run but whose own process is not the point: it saves the
    command's start-up and the study's own warm sessions (an interpreter start each, ~5-10 s of
    CPU on the 2-core machine). The study's worker threads borrow the sessions (lend_launchers,
    one per thread; a study of two workers uses both), so its trials are what `grpo-ablate run`
    would start, minus the start-up. tests/ is on PYTHONPATH and the trial environment matches
    tiny_spec's, so both kinds of test keep one session.
    """

    def run(*args: str, **env: str) -> CliResult:
        with lend_launchers(LauncherPool(launchers={"warm": warm_session}),
                            LauncherPool(launchers={"warm": second_warm_session})):
            return cli_inprocess(*args, **{"PYTHONPATH": str(TESTS), **env})

    return run
