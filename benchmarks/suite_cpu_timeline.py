"""A pytest plugin for benchmarks/suite_cpu.py: each test's worker pid, start, end and in-process CPU.

Loaded by `suite_cpu.py` as `-p suite_cpu_timeline` (xdist passes it on to its workers); writes one
JSON line per test to the file named by SUITE_CPU_TIMELINE, and does nothing without it. Times are
seconds since boot (/proc/uptime), the clock /proc/PID/stat's start times count in, so suite_cpu.py
can tell which test was running on a worker when a process started. The CPU is time.process_time()
of the worker (every thread of it) from the test's set-up to its teardown.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_PATH = os.environ.get("SUITE_CPU_TIMELINE")


def _uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _PATH:
        yield
        return
    start, cpu = _uptime(), time.process_time()
    yield
    row = {"pid": os.getpid(), "worker": os.environ.get("PYTEST_XDIST_WORKER", ""), "test": item.nodeid,
           "file": item.path.name, "start": start, "end": _uptime(), "cpu": round(time.process_time() - cpu, 3)}
    with open(_PATH, "a") as out:  # one short write per line: the workers' lines never interleave
        out.write(json.dumps(row) + "\n")
