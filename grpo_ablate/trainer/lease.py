"""A trial's lease: a file its own process renews while it trains, read by another host deciding whether it lives.

    cat runs/<study>/trials/00000/lease.json     # {"pid": 123, "host": "node7", "beat": 41}

On a shared storage a trial's orchestrator renews the trial's heartbeat; when that stops (the orchestrator paused
or partitioned from the database, a laptop suspended) the trial process may still be training, and another run
must not start the same trial again beside it. The process renews this lease every `LEASE_ENV` seconds (the
study's heartbeat interval), so a run on another host takes the trial over only once the heartbeat *and* the lease
have stood still for the grace period (study/liveness.py). Rank 0 writes it; written then renamed, never half.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

from grpo_ablate.core.vocab import LEASE_ENV, LEASE_FILE

__all__ = ["DEFAULT_LEASE_S", "keep_lease"]

DEFAULT_LEASE_S = 5.0


def keep_lease(trial_dir: str | os.PathLike[str]) -> threading.Event:
    """Renew the trial's lease from a daemon thread until the returned event is set (or the process ends)."""
    done = threading.Event()
    if os.environ.get("RANK", "0") != "0":
        return done
    try:
        every = max(0.2, float(os.environ.get(LEASE_ENV) or DEFAULT_LEASE_S))
    except ValueError:
        every = DEFAULT_LEASE_S
    folder = Path(trial_dir)
    identity = {"pid": os.getpid(), "host": socket.gethostname()}

    def renew() -> None:
        beat = 0
        while not done.is_set():
            beat += 1
            try:
                tmp = folder / f".{LEASE_FILE}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps({**identity, "beat": beat}))
                os.replace(tmp, folder / LEASE_FILE)
            except OSError:
                pass  # a full or gone disk: the trial meets it itself; the lease only stops being renewed
            done.wait(every)

    threading.Thread(target=renew, name="grpo-ablate-lease", daemon=True).start()
    return done
