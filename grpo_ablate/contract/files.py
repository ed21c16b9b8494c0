"""The readers of what a trial process leaves in its folder that the parent reads back (the file names are vocab.py's).

The child writes them (trainer/memory_cap.py writes memory.json); the parent (preflight/probe.py, the launchers)
reads them here, without importing the child.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grpo_ablate.core.vocab import MEMORY_FILE

__all__ = ["read_peak_memory"]


def read_peak_memory(trial_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A finished trial's memory.json ({} when it left none, e.g. killed before exit)."""
    try:
        raw = json.loads((Path(trial_dir) / MEMORY_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return raw if isinstance(raw, dict) else {}
