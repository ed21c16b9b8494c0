"""What a study's trials change of its settings when they run on this machine's CPU, in words for validate and plan.

    grpo-ablate validate studies/tiny-cpu.yaml     # on a machine without a GPU: what each trial changes

The precision rule itself is grpo_ablate/core/precision.py (read by the trial too); this module reads
the study's side of it: its accelerate config file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.core.errors import StudyError
from grpo_ablate.core.precision import cpu_changes, no_gpu_here

__all__ = ["cpu_run_changes"]


def _accelerate_settings(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """An accelerate config file as a dict ({} when unset or unreadable: validate reports those)."""
    if not path:
        return {}
    try:
        loaded = read_yaml_file(Path(path), what="accelerate config")
    except StudyError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def cpu_run_changes(sf: Any) -> list[str]:
    """cpu_changes for a study file when its trials run on this machine's CPU (no_gpu_here), else []."""
    if not no_gpu_here(sf.hardware.gpus):
        return []
    return cpu_changes(sf.trainer, _accelerate_settings(sf.hardware.accelerate_config))
