"""What one trial is, as data: the spec the parent writes, and the result it reads back.

No torch here: the orchestrator imports it. `<trial_dir>/spec.json` is the trial process's
whole input, so a trial can be re-run by hand:

    python -m grpo_ablate.trainer.worker runs/x/trials/00003/spec.json
"""

from __future__ import annotations

import copy
import functools
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from grpo_ablate.config import BudgetSection, DataSection, HardwareSection, ModelSection
from grpo_ablate.vocab import SPEC_FILE, Outcome

__all__ = ["TrialResult", "TrialSpec"]


@functools.cache
def _defaults(section: type[BaseModel]) -> dict[str, Any]:
    """A study section's field defaults as plain data, nested sections included.

    Read from the fields rather than an instance: BudgetSection refuses an empty budget.
    """
    out: dict[str, Any] = {}
    for name, info in section.model_fields.items():
        value = info.get_default(call_default_factory=True)
        out[name] = value.model_dump() if isinstance(value, BaseModel) else value
    return out


def _merged(defaults: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(defaults)
    for key, value in (given or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


@dataclass
class TrialSpec:
    """Everything one trial process needs, already validated and merged with the trial's params.

    `trainer` holds GRPOConfig keyword arguments verbatim (never a built config: TRL fills
    generation_batch_size and steps_per_generation in __post_init__, so a rebuilt config raises).
    `params` repeats the searched values for the record; they are already inside `trainer`.
    """

    trial_dir: str
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    rewards: list[dict[str, Any]] = field(default_factory=list)
    trainer: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None  # the study's resolved `evaluation:` section; None: no held-out scoring
    timeout_s: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    # {"every": steps or "auto", "keep": bool}: checkpoint and resume (trainer/checkpoints.py); None: never
    checkpoint: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.trial_dir = os.fspath(self.trial_dir)
        # A spec built from partial sections (tests, run-one) still reads every key the trainer
        # core looks up: missing keys take the study schema's defaults.
        self.model = _merged(_defaults(ModelSection), self.model)
        self.data = _merged(_defaults(DataSection), self.data)
        self.budget = _merged(_defaults(BudgetSection), self.budget)
        self.hardware = _merged(_defaults(HardwareSection), self.hardware)
        self.rewards = [{"weight": 1.0, **r} for r in (self.rewards or [])]
        self.env = {str(k): str(v) for k, v in (self.env or {}).items()}

    @property
    def path(self) -> Path:
        return Path(self.trial_dir)

    @property
    def num_processes(self) -> int:
        """Training processes per trial; the schema's None (not set) means one."""
        return int(self.hardware.get("num_processes") or 1)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> "TrialSpec":
        raw = json.loads(text)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"spec.json has unknown keys {unknown}; known keys are {sorted(known)}")
        return cls(**raw)

    def save(self) -> Path:
        """Write `<trial_dir>/spec.json` (atomically: a crash never leaves half a spec)."""
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / SPEC_FILE
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, target)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "TrialSpec":
        return cls.from_json(Path(path).read_text())


@dataclass
class TrialResult:
    """What the parent learns about a finished trial.

    `metrics` are the headline metrics (grpo_ablate.metrics.summarize over metrics.jsonl, plus
    load/build seconds); they are filled for every outcome, partial runs included.
    """

    outcome: Outcome
    reason: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    log_tail: str = ""
    exception_type: str | None = None
    exception_message: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    world_size: int | None = None
    trial_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome.value
        return out
