"""Experiment trackers per trial: report_to for every trial, each run named by its arm and seed.

    grpo-ablate run studies/tiny-cpu.yaml --set study.trackers=[tensorboard]
    tensorboard --logdir runs/tiny-cpu/tensorboard        # one run per trial, named like G8-B32-T1-s0

study.trackers null (the default) keeps the trainer's own report_to, a recipe's included: an Open R1
recipe's W&B stays on in its trials, as in its own run; `study.trackers: []` turns every tracker off.
Tests run them offline (WANDB_MODE=offline; trackio writes locally; TensorBoard is files).
Runs are grouped under the study's name: W&B gets WANDB_PROJECT (unless set already) and
WANDB_RUN_GROUP, trackio gets `project`, TensorBoard writes one folder per trial under
<output_dir>/tensorboard (transformers reads TENSORBOARD_LOGGING_DIR).
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

from grpo_ablate.core.vocab import TENSORBOARD_DIR, Cell

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["trackers_of", "tracker_settings", "run_name_of", "MAX_RUN_NAME"]

# A run name is a folder name (TensorBoard) and a W&B display name. File systems allow 255 bytes
# per name; a long G schedule chain passed that and failed every trial with ENAMETOOLONG.
MAX_RUN_NAME = 96


def trackers_of(study: "StudyConfig") -> list[str]:
    """study.trackers when set ([]: off), else the trainer's report_to (a recipe's included); [] when reporting is off."""
    if study.study.trackers is not None:
        return list(study.study.trackers)
    given: Any = study.trainer.get("report_to")
    names = [given] if isinstance(given, str) else list(given or [])
    return [str(n) for n in names if str(n) != "none"]


def tracker_settings(study: "StudyConfig", cell: Cell) -> tuple[dict[str, Any], dict[str, str]]:
    """(GRPOConfig keys, environment) that name and group one trial's tracker run; empty when off."""
    trackers = trackers_of(study)
    if not trackers:  # off; a report_to the trainer section still holds (a recipe's) is turned off too
        given = study.trainer.get("report_to")
        return ({"report_to": "none"} if given not in (None, "none", []) else {}), {}
    run_name = run_name_of(cell.slug)
    trainer: dict[str, Any] = {"report_to": trackers, "run_name": run_name, "project": study.study.name}
    env = {
        "WANDB_RUN_GROUP": study.study.name,
        "WANDB_DIR": str(study.output_dir.resolve()),
        "TENSORBOARD_LOGGING_DIR": str((study.output_dir / TENSORBOARD_DIR / run_name).resolve()),
    }
    if not os.environ.get("WANDB_PROJECT"):
        env["WANDB_PROJECT"] = study.study.name
    return trainer, env


def run_name_of(slug: str, limit: int = MAX_RUN_NAME) -> str:
    """The cell's slug, or when it is longer than `limit` bytes its start plus a hash of the whole,
    so two long names that share a start stay apart and the same cell always gets the same name."""
    if len(slug.encode("utf-8")) <= limit:
        return slug
    digest = hashlib.sha256(slug.encode("utf-8")).hexdigest()[:12]
    head = slug.encode("utf-8")[: limit - len(digest) - 1].decode("utf-8", errors="ignore")
    return f"{head}-{digest}"
