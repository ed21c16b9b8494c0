"""The benchmark's grid table: one row per real trial (arm x seed), cached on disk as JSON.

    python benchmarks/search_efficiency.py          # builds the table once, then replays against it

Each row holds the arm, the seed, the trial's headline metrics and its curve: the objective's
partial value at points of generated compute (completions so far), which the pruning replay
reads. The file also carries the settings and library versions it was measured with.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_ablate.core.vocab import Arm

__all__ = ["GridRow", "GridTable", "load_table", "save_table"]


@dataclass(frozen=True)
class GridRow:
    arm: Arm
    seed: int
    metrics: dict[str, float | None]
    # [(completions generated so far, {metric: partial value})], in order
    curve: list[tuple[int, dict[str, float | None]]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.arm.key, "knobs": self.arm.as_dict(), "seed": self.seed, "metrics": self.metrics,
                "curve": [[c, v] for c, v in self.curve]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GridRow":
        """The arm from its knobs (G as data); the key is for reading the file only, never parsed."""
        arm = Arm.from_mapping(d.get("knobs") or {})
        if arm is None:
            raise ValueError(f"grid row {d.get('arm')!r} has no readable knobs: a cache from an older version; "
                             "delete it and run the grid again")
        return cls(arm, int(d["seed"]), dict(d["metrics"]), [(int(c), dict(v)) for c, v in d.get("curve", [])])


@dataclass
class GridTable:
    """Every (arm, seed) result of the grid, with what it was measured with."""

    rows: list[GridRow]
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def arms(self) -> list[Arm]:
        return sorted({r.arm for r in self.rows})

    @property
    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.rows})

    def results(self, arm: Arm, metric: str) -> dict[int, float]:
        """seed -> value of one arm (seeds whose value is missing are left out)."""
        out = {}
        for r in self.rows:
            v = r.metrics.get(metric)
            if r.arm == arm and v is not None:
                out[r.seed] = float(v)
        return out

    def row(self, arm: Arm, seed: int) -> GridRow | None:
        for r in self.rows:
            if r.arm == arm and r.seed == seed:
                return r
        return None

    def arm_means(self, metric: str) -> dict[Arm, float]:
        return {a: statistics.fmean(v.values()) for a in self.arms if (v := self.results(a, metric))}

    def complete(self) -> "GridTable":
        """Only the seeds every arm has (a grid build that stopped half-way still replays fairly)."""
        arms = self.arms
        full = [s for s in self.seeds if all(self.row(a, s) is not None for a in arms)]
        return GridTable([r for r in self.rows if r.seed in full], self.settings, self.versions)

    def as_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, "versions": self.versions, "rows": [r.as_dict() for r in self.rows]}


def save_table(table: GridTable, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table.as_dict(), indent=1))
    tmp.replace(path)


def load_table(path: Path) -> GridTable:
    d = json.loads(Path(path).read_text())
    return GridTable([GridRow.from_dict(r) for r in d["rows"]], d.get("settings", {}), d.get("versions", {}))
