"""screen.json: what the screen measured and predicted for each configuration, the arms it dropped with their
reasons, and the arms it left for training.

Pure data, no torch: the plan (which arms train), the price (what the screen spent), the report (its section)
and the screen itself read and write it here, through one reader that refuses a truncated, mistyped or
foreign file (files/owned.py): a lost `dropped` list would train arms the screen had ruled out.

    python -c "from grpo_ablate.files.screen_file import screen_path; print(screen_path('runs/tiny-cpu'))"
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grpo_ablate.core.bounds import BatchSize, Finite, Fraction, Generations, Seconds, Temperature
from grpo_ablate.files.owned import STRICT, Owner, read_owned, write_json

__all__ = ["SCREEN_FILE", "SCREEN_FIX", "ScreenRow", "ScreenDrop", "Screen", "screen_path", "load_screen", "save_screen"]

SCREEN_FILE = "screen.json"
SCREEN_FIX = "delete it, then rerun `grpo-ablate screen STUDY` (every command reads it first)"


@dataclass
class ScreenRow:
    """One screened configuration, as the page shows it."""

    __pydantic_config__ = STRICT

    key: str
    label: str
    num_generations: Generations
    temperature: Temperature
    generation_batch_size: BatchSize | None = None
    candidate: bool = False
    baseline: bool = False
    infeasible: str | None = None
    out_of_memory: str | None = None
    zero_spread: Fraction | None = None
    signal_per_step: Finite | None = None
    seconds_per_step: Seconds | None = None
    signal_per_hour: Finite | None = None
    peak_memory_mb: Finite | None = None


@dataclass
class ScreenDrop:
    """An arm the screen dropped: which rule, the sentence on the page, the arm that dominates it."""

    __pydantic_config__ = STRICT

    key: str
    label: str
    rule: str
    reason: str
    by: str | None = None


@dataclass
class Screen:
    """screen.json. `kept`: the arms the confirm stage trains (keys, the plan's order); `confirm`: whether the study
    trains them at all (false: the screen alone); `seconds`: the screen's wall time, `gpus` per its machine."""

    __pydantic_config__ = STRICT

    owner: Owner
    rows: list[ScreenRow]
    dropped: list[ScreenDrop]
    kept: list[str]
    confirm: bool = True
    rules: list[str] = field(default_factory=list)
    ratio: Finite = 0.0
    seconds: Seconds = 0.0
    gpus: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def screen_path(output_dir: str | os.PathLike[str]) -> Path:
    return Path(output_dir) / SCREEN_FILE


def load_screen(output_dir: str | os.PathLike[str], owner: Owner) -> Screen | None:
    """The study's screen.json, None when the screen has not run; a StudyError (exit 2, with the path and the fix)
    when it is truncated, mistyped, or was written for another study, model or hardware."""
    return read_owned(screen_path(output_dir), Screen, owner, SCREEN_FIX)


def save_screen(output_dir: str | os.PathLike[str], screen: Screen) -> Path:
    return write_json(screen_path(output_dir), screen.to_dict())
