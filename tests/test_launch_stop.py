"""One STOP writer for every caller: the first reason written wins, and the file appears whole.

    pytest tests/test_launch_stop.py
"""

from __future__ import annotations

import multiprocessing

from grpo_ablate.launch import request_stop, requested_stop

WRITERS = 8


def _race(trial_dir: str, reason: str, go, results) -> None:
    go.wait(60)
    results.put((reason, request_stop(trial_dir, reason)))


def test_racing_writers_in_separate_processes_leave_one_whole_reason(tmp_path):
    ctx = multiprocessing.get_context("fork")
    go, results = ctx.Event(), ctx.Queue()
    trial_dir = tmp_path / "not-yet-created"  # the trial has not started: the folder is made
    reasons = [("interrupted" if i % 2 else "pruned") + f"-{i}" for i in range(WRITERS)]
    procs = [ctx.Process(target=_race, args=(str(trial_dir), reason, go, results)) for reason in reasons]
    for proc in procs:
        proc.start()
    go.set()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(60)
    winners = [reason for reason, won in outcomes if won]
    assert len(winners) == 1
    assert (trial_dir / "STOP").read_text() == winners[0] + "\n"
    assert [p.name for p in trial_dir.iterdir()] == ["STOP"]  # no temporary file left behind


def test_a_later_pruned_never_replaces_interrupted(tmp_path):
    assert requested_stop(tmp_path) is None
    assert request_stop(tmp_path, "interrupted") is True
    assert request_stop(tmp_path, "pruned") is False
    assert requested_stop(tmp_path) == "interrupted"
    other = tmp_path / "other"
    assert request_stop(other, "pruned") is True and requested_stop(other) == "pruned"
