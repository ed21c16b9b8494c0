"""benchmarks/suite_cpu.py charges each process to the test file it ran for (its per-file table is how the suite's
CPU is judged, docs/testing.md): here on hand-made process rows and a hand-made timeline, no suite run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import suite_cpu  # noqa: E402

# two workers; gw0 ran test_a.py then test_b.py, gw1 ran test_c.py
TIMELINE = {
    100: [{"pid": 100, "worker": "gw0", "file": "test_a.py", "start": 10.0, "end": 20.0, "cpu": 1.0},
          {"pid": 100, "worker": "gw0", "file": "test_b.py", "start": 20.0, "end": 40.0, "cpu": 1.0}],
    200: [{"pid": 200, "worker": "gw1", "file": "test_c.py", "start": 10.0, "end": 40.0, "cpu": 1.0}],
}


def _row(pid: int, ppid: int, start: float, *, test: str = "", worker: str = "", cpu: float = 1.0) -> dict:
    return {"pid": pid, "ppid": ppid, "comm": "python", "start": start, "cmd": "python", "test": test, "worker": worker,
            "marked": True, "cpu": cpu}


def test_a_process_goes_to_the_test_running_on_the_worker_it_descends_from_when_it_started():
    """301 is a session forked at 25 s from a template (300) that test_a.py started: it ran for test_b.py."""
    rows = [_row(300, 100, 12.0), _row(301, 300, 25.0), _row(302, 200, 25.0)]
    parents = suite_cpu.Parents(rows)
    assert [suite_cpu._file_of(r, parents, TIMELINE) for r in rows] == ["test_a.py", "test_b.py", "test_c.py"]


def test_a_process_no_parent_chain_reaches_goes_to_its_workers_test_when_it_started():
    """A SLURM job (under slurmd, which the worker's session fixture started during test_a.py): its
    PYTEST_CURRENT_TEST is slurmd's, test_a.py, but it ran for test_b.py, on gw0, when it started."""
    job = _row(400, 1, 30.0, test="test_a.py", worker="gw0", cpu=7.0)
    assert suite_cpu._file_of(job, suite_cpu.Parents([job]), TIMELINE) == "test_b.py"
    other = _row(401, 1, 30.0, test="test_a.py", worker="gw1")
    assert suite_cpu._file_of(other, suite_cpu.Parents([other]), TIMELINE) == "test_c.py"
    between = _row(402, 1, 50.0, test="test_a.py", worker="gw0")  # after the worker's last test: its variable decides
    assert suite_cpu._file_of(between, suite_cpu.Parents([between]), TIMELINE) == "test_a.py"
    unknown = _row(403, 1, 30.0, worker="gw7")
    assert suite_cpu._file_of(unknown, suite_cpu.Parents([unknown]), TIMELINE) == suite_cpu.OUTSIDE


def test_without_xdist_the_one_pytest_process_is_the_worker():
    timeline = {100: [{**t, "worker": ""} for t in TIMELINE[100]]}
    job = _row(500, 1, 30.0, test="test_a.py")
    assert suite_cpu._file_of(job, suite_cpu.Parents([job]), timeline) == "test_b.py"
    inside, children = suite_cpu.per_file([_row(100, 1, 0.0, cpu=5.0), job], timeline)
    assert children == {suite_cpu.OUTSIDE: 3.0, "test_b.py": 1.0} and inside == {"test_a.py": 1.0, "test_b.py": 1.0}
