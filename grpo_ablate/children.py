"""Every process the tool starts dies with the tool: one parent-death signal for all of them.

A child started in its own session (trials, the warm session, the vLLM server) or simply left
running (advise's sampler) outlives a `kill -9` of its parent and runs on under PID 1. Linux's
PR_SET_PDEATHSIG makes the kernel send the child SIGKILL when its parent goes, whatever the
parent died of. Every `subprocess` start in the package passes `preexec_fn=die_with_parent()`.

The signal follows the *thread* that started the child, not the process: start a child from a
thread that lives at least as long as the child should (the study's worker threads wait on
their trial; a warm session is used only by the thread that started it). Elsewhere than Linux
it does nothing; trial workers also watch their orchestrator's pid (trainer/worker.py).

    python -c "from grpo_ablate.children import die_with_parent"    # stdlib only
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Callable

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn`: the kernel SIGKILLs the child when the starting thread ends.

    libc is loaded here, in the parent, so the forked child only makes the call. If the parent
    died between fork and the call, nobody would signal the child: it then ends itself.
    """
    parent_pid = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec
