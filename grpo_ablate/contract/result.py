"""A trial's result: what the parent learns about a finished trial (the child's result.json, the launcher's outcome).

Part of the contract (contract/): the child writes it, the parent reads it; stdlib and vocab only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from grpo_ablate.core.vocab import Outcome

__all__ = ["TrialResult"]


@dataclass
class TrialResult:
    """What the parent learns about a finished trial.

    `metrics` are the headline metrics (grpo_ablate.contract.metrics.summarize over metrics.jsonl, plus
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
