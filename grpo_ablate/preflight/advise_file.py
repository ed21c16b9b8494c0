"""advise.json: what `grpo-ablate advise` predicted, and the arms `--enqueue` added to an ablation.

Pure data, no torch, like probe_file.py: plan (the added arms), study setup (adding one), the
report (the prediction it draws) and advise itself read and write it here. Writes are atomic, and
a new prediction keeps the arms an earlier `--enqueue` added, since the study holds their trials.

    python -c "from grpo_ablate.preflight.advise_file import load_advice; print(load_advice('runs/tiny-cpu'))"
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grpo_ablate.vocab import ADVISE_FILE, Arm

__all__ = ["ADVISE_COMPLETIONS", "ADVISED_ARMS_KEY", "NO_SPREAD_FRACTION", "add_advised_arm", "advised_arms", "load_advice", "save_advice"]

# advise's samples as a person reads them: one line per prompt and temperature, its K completions
# with their rewards, beside advise.json (so a reward that never fires shows before any trial)
ADVISE_COMPLETIONS = "advise/completions.jsonl"
# nearly all groups with equal rewards: almost no prompt gives a gradient, whatever G is (advise and the report)
NO_SPREAD_FRACTION = 0.9
ADVISED_ARMS_KEY = "advised_arms"  # the arms `advise --enqueue` added to the plan (Arm.as_dict each)


def load_advice(output_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The study's advise.json, None without a readable one."""
    try:
        raw = json.loads((Path(output_dir) / ADVISE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def advised_arms(output_dir: str | os.PathLike[str]) -> list[Arm]:
    """The arms `advise --enqueue` added, as saved (the caller checks the study can still run them)."""
    saved = (load_advice(output_dir) or {}).get(ADVISED_ARMS_KEY)
    arms = [Arm.from_mapping(a) for a in saved if isinstance(a, dict)] if isinstance(saved, list) else []
    return [a for a in arms if a is not None]


def _write(output_dir: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    path = Path(output_dir) / ADVISE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")  # never a half-written advise.json: plan reads its arms
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)
    return path


def save_advice(output_dir: str | os.PathLike[str], advice: dict[str, Any]) -> Path:
    """Write a new prediction, keeping the arms an earlier `--enqueue` added."""
    data = dict(advice)
    kept = (load_advice(output_dir) or {}).get(ADVISED_ARMS_KEY)
    if kept:
        data[ADVISED_ARMS_KEY] = kept
    return _write(output_dir, data)


def add_advised_arm(output_dir: str | os.PathLike[str], arm: Arm) -> None:
    """Keep `arm` among the added arms (once), where plan.advised_arms reads it."""
    data = load_advice(output_dir) or {}
    arms = data.setdefault(ADVISED_ARMS_KEY, [])
    if arm.as_dict() not in arms:
        arms.append(arm.as_dict())
    _write(output_dir, data)
