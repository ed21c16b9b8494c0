"""The probe's points in one process: a warm session that survives an in-process OOM.

A probe point is a trial of one or two optimizer steps; in its own process the start-up costs
ten times the steps. `ProbeSession` is the warm session of trainer/launchers/warm.py with one
difference of policy: a point that ran out of memory *inside* the process (CUDA's error, caught
by run_spec; the caching allocator is emptied after it, the recovery accelerate's
find_executable_batch_size relies on) keeps the session, since out-of-memory points are what a
probe looks for. A point killed by the CPU cap, timed out, failed or interrupted still gets a
fresh session for the next point; points that cannot share a session get a process each.

    grpo-ablate probe studies/tiny-cpu.yaml     # runs its points through a ProbeSession
"""

from __future__ import annotations

from ..vocab import Outcome
from .launchers.warm import CLEAN_OUTCOMES, WarmSession, shares_a_session

__all__ = ["ProbeSession", "shares_a_session"]


class ProbeSession(WarmSession):
    """A WarmSession that keeps its process after an in-process out-of-memory point.

        with ProbeSession() as session:
            result = session.run(spec)     # a TrialResult, classified as a process per trial's would be
    """

    def __init__(self) -> None:
        super().__init__(keep_after=CLEAN_OUTCOMES | {Outcome.OOM})
