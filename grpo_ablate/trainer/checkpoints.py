"""A trial's checkpoints: where they are, which one a retry resumes from, and what it carries.

    grpo-ablate run studies/tiny-cpu.yaml    # a trial killed after a checkpoint resumes there when retried

A checkpoint is the trainer's own folder (`<trial_dir>/trainer/checkpoint-<step>`: weights,
optimizer, scheduler, RNG states, trainer_state.json) plus this package's part, `grpo_ablate/`
inside it: the trial's per-step files as they were at that step (metrics.jsonl, groups.jsonl,
eval.jsonl, events.jsonl) and the callbacks' clock (CLOCK_FILE: completions, tokens and
training seconds counted so far, the evaluation points passed). The clock is written last, so a
checkpoint without it is incomplete (killed while saving) and is never resumed from.

A resumed trial puts those files back (rows after the checkpoint's step are dropped, as the
steps are trained again) and continues the clock, so its metrics read as one run's. Stdlib only:
the parent side (study/lifecycle.py) moves a predecessor's checkpoints into a retry's folder.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablate.vocab import EVAL_FILE, EVENTS_FILE, GROUPS_FILE, METRICS_FILE

__all__ = ["Checkpoint", "CARRIED_FILES", "CLOCK_FILE", "STATE_DIR", "DEFAULT_SHARE", "AUTO_MIN_SECONDS", "trainer_dir", "interval_steps",
           "complete_checkpoints", "latest", "save_state", "restore_files", "remove_checkpoints", "prune_older",
           "carry_over"]

STATE_DIR = "grpo_ablate"  # this package's part of a checkpoint folder
CLOCK_FILE = "clock.json"  # written last: its presence marks a complete checkpoint
CARRIED_FILES = (METRICS_FILE, GROUPS_FILE, EVAL_FILE, EVENTS_FILE)
DEFAULT_SHARE = 0.1  # `auto`: a checkpoint every ~10% of a trial's steps, so a kill loses at most that
# `auto` also waits for this much training since the last checkpoint: a trial of a few minutes is
# cheaper to run again than to checkpoint (a large model's checkpoint takes minutes to write)
AUTO_MIN_SECONDS = 300.0
_NAME = re.compile(r"^checkpoint-(\d+)$")
_TRAINER_STATE = "trainer_state.json"


def trainer_dir(trial_dir: str | os.PathLike[str]) -> Path:
    """The trainer's output_dir inside a trial folder (its checkpoints live here)."""
    return Path(trial_dir) / "trainer"


def interval_steps(every: int | str | None, max_steps: int, round_steps: int = 1) -> int | None:
    """Optimizer steps between checkpoints; None: no checkpoint.

    `every`: a number of steps, "auto" (DEFAULT_SHARE of max_steps), or None (off). Rounded up to
    a whole number of generation rounds (`round_steps` optimizer steps each): TRL generates at a
    round's first step, so a checkpoint inside a round would resume with the round's completions
    lost and train on fresh ones. An interval that reaches max_steps saves nothing (the last
    step needs no checkpoint: the trial is then complete).
    """
    if every is None or max_steps <= 0:
        return None
    steps = math.ceil(max_steps * DEFAULT_SHARE) if every == "auto" else int(every)
    round_steps = max(1, int(round_steps))
    steps = max(round_steps, math.ceil(max(1, steps) / round_steps) * round_steps)
    return steps if steps < max_steps else None


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int

    @property
    def clock(self) -> dict[str, Any]:
        return json.loads((self.path / STATE_DIR / CLOCK_FILE).read_text())


def complete_checkpoints(trial_dir: str | os.PathLike[str]) -> list[Checkpoint]:
    """The trial's complete checkpoints, oldest first (trainer state and clock both written)."""
    folder = trainer_dir(trial_dir)
    found = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        m = _NAME.match(entry.name)
        if m and (entry / _TRAINER_STATE).is_file() and (entry / STATE_DIR / CLOCK_FILE).is_file():
            found.append(Checkpoint(entry, int(m.group(1))))
    return sorted(found, key=lambda c: c.step)


def latest(trial_dir: str | os.PathLike[str]) -> Checkpoint | None:
    found = complete_checkpoints(trial_dir)
    return found[-1] if found else None


def save_state(trial_dir: str | os.PathLike[str], checkpoint: str | os.PathLike[str], clock: dict[str, Any]) -> None:
    """Copy the trial's per-step files into the checkpoint, then write its clock (last, atomically)."""
    state = Path(checkpoint) / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    for name in CARRIED_FILES:
        source = Path(trial_dir) / name
        if source.is_file():
            shutil.copyfile(source, state / name)
    tmp = state / (CLOCK_FILE + ".tmp")
    tmp.write_text(json.dumps(clock))
    os.replace(tmp, state / CLOCK_FILE)


def restore_files(checkpoint: Checkpoint, trial_dir: str | os.PathLike[str]) -> None:
    """Put the checkpoint's per-step files back in the trial folder (a file it did not have yet is removed)."""
    state = checkpoint.path / STATE_DIR
    for name in CARRIED_FILES:
        target = Path(trial_dir) / name
        if (state / name).is_file():
            shutil.copyfile(state / name, target)
        else:
            target.unlink(missing_ok=True)


def prune_older(trial_dir: str | os.PathLike[str], keep: Checkpoint) -> None:
    """Remove the checkpoints older than `keep` (complete or not): one resumable checkpoint is enough."""
    folder = trainer_dir(trial_dir)
    for entry in folder.glob("checkpoint-*"):
        m = _NAME.match(entry.name)
        if m and int(m.group(1)) < keep.step:
            shutil.rmtree(entry, ignore_errors=True)


def remove_checkpoints(trial_dir: str | os.PathLike[str]) -> int:
    """Remove every checkpoint of a trial (it ended for good); how many folders were removed."""
    folder = trainer_dir(trial_dir)
    n = 0
    for entry in folder.glob("checkpoint-*"):
        if _NAME.match(entry.name) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
            n += 1
    return n


def carry_over(source_dir: str | os.PathLike[str], target_dir: str | os.PathLike[str]) -> Checkpoint | None:
    """Move a predecessor's latest complete checkpoint into a retry's folder; the checkpoint moved, or None.

    Moved, not copied (a checkpoint of a large model is many GB; on one file system a move is a
    rename). The predecessor keeps its own log and result; its other checkpoints are dropped.
    """
    found = latest(source_dir)
    if found is None:
        return None
    target = trainer_dir(target_dir) / found.path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(os.fspath(found.path), os.fspath(target))
    remove_checkpoints(source_dir)
    return Checkpoint(target, found.step)
