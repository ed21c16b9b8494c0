"""Preemption and cancellation lose nothing, on a real SLURM cluster (tests/slurm_cluster.py) with a real PostgreSQL study.

Each cell submits the shipped array script for a one-arm study of the tiny model (a checkpoint
every 4 of 12 steps), faults the job once trial 0 has checkpointed and trained past it, and
submits again (tests/slurm_cells.py). Every cell must end with the arm completed exactly once,
the faulted trial recorded as interrupted (never failed), its retry resumed from the checkpoint
and not from step 0, and the faulted run's exit status saying the study did not finish.

The cells here prove one mechanism each; the whole matrix (every fault x process, warm and slurm,
the slurm launcher's cells also with its orchestrator killed and rerun, tests/slurm_cells.py
run_launcher_cell; with times) is `python benchmarks/slurm_matrix.py`, its figures on the manual's Many machines page.
"""

from __future__ import annotations

import json
import os

import pytest

from slurm_cells import CONTROLLER_FAULTS, LAUNCHER_FAULTS, run_cell, run_launcher_cell

pytestmark = pytest.mark.slow


def _check(cell, *, graceful: bool) -> None:
    assert cell.lost_nothing, cell.row() | {"log": cell.log[-4000:]}
    assert cell.outcomes == ["interrupted", "completed"], cell.row()
    assert cell.final_state == "COMPLETED" and cell.final_exit == "0:0", cell.row()
    if graceful:  # the trial stopped after its step and checkpointed it: its retry redoes nothing
        assert cell.resumed_from_step == cell.interrupted_steps, cell.row()
        assert cell.first_exit == "exit 130", cell.row()  # grpo-ablate's own "interrupted", not 0, not the wait's 143


def test_scancel_sigterm_to_every_process_with_the_process_launcher(slurm_cluster, fresh_pg_db, tmp_path):
    """The issue's lost arm: SIGTERM to the batch shell, grpo-ablate and the trial at once (and the script's forwarded TERM)."""
    _check(run_cell(slurm_cluster, fresh_pg_db, tmp_path, "process", "scancel"), graceful=True)


def test_a_hard_kill_of_every_process_with_the_warm_launcher_is_retried_from_the_checkpoint(slurm_cluster, fresh_pg_db,
                                                                                          tmp_path):
    """Nothing can run a handler: the next submission fails the silent trial by its heartbeat and resumes it."""
    _check(run_cell(slurm_cluster, fresh_pg_db, tmp_path, "warm", "hard-kill"), graceful=False)


def test_a_node_set_down_mid_trial_is_requeued_by_slurm_and_resumes(slurm_cluster, fresh_pg_db, tmp_path):
    _check(run_cell(slurm_cluster, fresh_pg_db, tmp_path, "process", "node-down"), graceful=False)


MATRIX = os.environ.get("GRPO_ABLATE_SLURM_MATRIX")  # a JSONL file: benchmarks/slurm_matrix.py runs every cell


GRACEFUL = {"scancel", "scancel-twice", "batch-term", "signal-kill", "full-kill"}  # the trial's SIGTERM handler runs


def _check_launcher_cell(cell) -> None:
    """A slurm-launcher cell: the one orchestrator (or its rerun) finished the study, nothing trained twice."""
    if cell.fault in CONTROLLER_FAULTS:  # the controller away: nothing lost, nothing doubled, nothing even interrupted
        assert cell.outcomes == ["completed"] and cell.final_exit == "exit 0", cell.row() | {"log": cell.log[-4000:]}
        assert cell.jobs == 1 and cell.trained_twice == 0, cell.row()
        return
    assert cell.lost_nothing, cell.row() | {"log": cell.log[-4000:]}
    assert cell.outcomes == ["interrupted", "completed"], cell.row()
    assert cell.final_exit == "exit 0", cell.row()
    if cell.adopted:  # the orphaned job finished the trial before the rerun came: its result recorded, nothing retrained
        assert cell.fault == "orchestrator-kill" and cell.resumed_from_step is None, cell.row()
    elif cell.fault in GRACEFUL | {"time-limit", "orchestrator-kill"}:  # a SIGTERM reached the trial: it checkpointed its step
        assert cell.resumed_from_step == cell.interrupted_steps, cell.row()


@pytest.mark.skipif(not MATRIX, reason="the whole matrix runs from benchmarks/slurm_matrix.py")
@pytest.mark.parametrize("launcher, fault", [(launcher, fault) for launcher, faults in LAUNCHER_FAULTS.items()
                                             for fault in faults])
def test_matrix_cell(slurm_cluster, fresh_pg_db, tmp_path, launcher, fault):
    if launcher == "slurm":
        cell = run_launcher_cell(slurm_cluster, fresh_pg_db, tmp_path, fault)
    else:
        cell = run_cell(slurm_cluster, fresh_pg_db, tmp_path, launcher, fault)
    with open(str(MATRIX), "a") as out:
        out.write(json.dumps(cell.row()) + "\n")
    if launcher == "slurm":
        _check_launcher_cell(cell)
    else:
        _check(cell, graceful=fault in GRACEFUL)
