"""A trial folder as both sides see it: where the trainer writes (`trainer_dir`), and the readers of what a trial
process leaves there that the parent reads back (the file names are vocab.py's).

The child writes them (trainer/memory_cap.py writes memory.json); the parent (preflight/probe.py, the launchers)
reads them here, without importing the child.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grpo_ablate.core.vocab import MEMORY_FILE

__all__ = ["read_peak_memory", "trainer_dir"]


def read_peak_memory(trial_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A finished trial's memory.json ({} when it left none, e.g. killed before exit)."""
    try:
        raw = json.loads((Path(trial_dir) / MEMORY_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return raw if isinstance(raw, dict) else {}


def trainer_dir(trial_dir: str | os.PathLike[str]) -> Path:
    """The trainer's output_dir inside a trial folder (the built-in trainer's and a command trial's `--output_dir`);
    its checkpoint-<step> folders are staging, never resumed (contract/checkpoints.py seals them)."""
    return Path(trial_dir) / "trainer"
