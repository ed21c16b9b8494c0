"""A validated study: the parsed sections, its feasible space, and what is derived from them.

    python -c "from grpo_ablate.config import load_study; print(load_study('studies/tiny-cpu.yaml').world_size)"
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grpo_ablate.config.hardware import world_size
from grpo_ablate.config.schema import (
    BudgetSection,
    DataSection,
    FloatRange,
    HardwareSection,
    IntRange,
    ModelSection,
    RewardSpec,
    ScriptSection,
    SearchSection,
    StudyFile,
    StudySection,
)
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.core.space import FeasibleSpace
from grpo_ablate.storage.url import canonical_url, mask_url
from grpo_ablate.core.schedule import parse_generations
from grpo_ablate.core.vocab import METRICS

__all__ = ["StudyConfig", "resolve_sampler", "SMALL_SPACE"]

# On the tabular benchmark (16 configurations, 4 seeds) random search reached the true best as
# often and as early as TPE: seed noise swamps what TPE can model in so few trials. Up to this
# many configurations `auto` samples at random; beyond, and with a temperature range, TPE.
SMALL_SPACE = 16


def resolve_sampler(kind: str, n_configurations: int | None) -> str:
    """The concrete sampler `auto` stands for; None configurations means a continuous space."""
    if kind != "auto":
        return kind
    return "random" if n_configurations is not None and n_configurations <= SMALL_SPACE else "tpe"


@dataclass
class StudyConfig:
    """A validated study: the sections, plus what was derived from them."""

    file: StudyFile
    path: Path | None
    space: FeasibleSpace
    warnings: list[str] = field(default_factory=list)
    # the trainer keys the study file itself sets (not its recipe's); None: all of them (no trainer_from)
    own_trainer_keys: tuple[str, ...] | None = None

    # the sections, by their study-file names
    @property
    def study(self) -> StudySection:
        return self.file.study

    @property
    def model(self) -> ModelSection:
        return self.file.model

    @property
    def data(self) -> DataSection:
        return self.file.data

    @property
    def rewards(self) -> list[RewardSpec]:
        return [r if isinstance(r, RewardSpec) else RewardSpec(name=r) for r in self.file.rewards]

    @property
    def trainer(self) -> dict[str, Any]:
        return self.file.trainer

    @property
    def script(self) -> ScriptSection | None:
        """The user's own training script (command trials), or None: the built-in worker."""
        return self.file.script

    @property
    def hardware(self) -> HardwareSection:
        return self.file.hardware

    @property
    def search(self) -> SearchSection:
        return self.file.search

    @property
    def budget(self) -> BudgetSection:
        return self.file.budget

    @property
    def output_dir(self) -> Path:
        return Path(self.study.output_dir or os.path.join("runs", self.study.name))

    @property
    def storage_url(self) -> str:
        """Where the study lives, its scheme lower-cased (validation compares schemes that way)."""
        return canonical_url(self.study.storage) if self.study.storage else str(self.output_dir / "study.journal")

    @property
    def world_size(self) -> int:
        return world_size(self.file)

    @property
    def directions(self) -> list[str]:
        return [o.direction or METRICS[o.metric].direction or "maximize" for o in self.study.objectives]

    @property
    def metric_names(self) -> list[str]:
        return [o.metric for o in self.study.objectives]

    def temperatures(self) -> list[float] | FloatRange | None:
        """The searched temperatures: a list, a range, or None when fixed by the trainer."""
        t = self.search.temperature
        if t is None or isinstance(t, (int, float)):
            return None
        return t

    def fixed_temperature(self) -> float:
        t = self.search.temperature
        if isinstance(t, (int, float)):
            return float(t)
        return float(self.trainer.get("temperature", trl_default("temperature")))

    @property
    def is_planned(self) -> bool:
        """A grid or an ablation study: every trial is planned and queued (plan/cells.py)."""
        return self.study.is_planned

    @property
    def sampler_kind(self) -> str:
        """study.sampler with `auto` resolved (`resolve_sampler` says why)."""
        t = self.temperatures()
        n_temps = 1 if t is None else (len(t) if isinstance(t, list) else None)
        return resolve_sampler(self.study.sampler, None if n_temps is None else len(self.space.feasible) * n_temps)

    def baseline_values(self, chosen: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """study.baseline with `chosen` (run-one's values, None left out) over it; num_generations read
        from its label here, by the loader, as a value (an int or a schedule object)."""
        given = {**dict(self.study.baseline or {}), **{k: v for k, v in (chosen or {}).items() if v is not None}}
        if given.get("num_generations") is not None:
            given["num_generations"] = parse_generations(given["num_generations"])
        return given

    def generations(self) -> list[int]:
        """The searched values of num_generations: ints and G schedules (vocab.parse_generations)."""
        g = self.search.num_generations
        if isinstance(g, IntRange):
            return list(range(g.low, g.high + 1, g.step))
        return [parse_generations(x) for x in g]

    def to_dict(self) -> dict[str, Any]:
        """The resolved study (recipe merged, defaults filled), as saved and shown: password masked."""
        out = json.loads(self.file.model_dump_json())
        if out["study"].get("storage"):
            out["study"]["storage"] = mask_url(out["study"]["storage"])
        return out
