"""probe.json: what `grpo-ablate probe` measured, and the search space it leaves the study.

Pure data, no torch: config (space_for), plan and study setup read it.

    python -c "from grpo_ablate.preflight.probe_file import load_probe; print(load_probe('runs/tiny-cpu'))"
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from grpo_ablate.space import FeasibleSpace, Rejection
from grpo_ablate.vocab import PROBE_FILE

__all__ = ["ProbePoint", "Probe", "load_probe", "probe_path", "probed_space", "save_probe"]



@dataclass
class ProbePoint:
    """One (G, generation batch) the probe ran for a few optimizer steps."""

    num_generations: int
    generation_batch_size: int
    fits: bool
    outcome: str
    reason: str | None = None
    peak_memory_mb: float | None = None
    memory_kind: str = "rss"  # "cuda" on GPUs, "rss" (the trial's process tree) on CPU
    engine_memory_mb: float | None = None  # a colocated vLLM engine's pool, apart from the trainer's peak above
    steps: int = 0
    seconds_per_step: float | None = None
    generation_seconds_per_step: float | None = None
    training_seconds_per_step: float | None = None
    samples_per_second: float | None = None
    tokens_per_second: float | None = None
    wall_seconds: float | None = None

    @property
    def label(self) -> str:
        return f"{self.num_generations}x{self.generation_batch_size}"


@dataclass
class Probe:
    study: str
    points: list[ProbePoint] = field(default_factory=list)
    total_seconds: float = 0.0
    one_trial_estimate_s: float | None = None
    memory_limit_mb: float | None = None
    steps_per_point: int = 2
    processes: int = 0  # processes the points ran in: 1 when they shared a session and none ran out of memory on CPU

    def best(self) -> dict[int, ProbePoint]:
        """Each G's largest fitting batch."""
        out: dict[int, ProbePoint] = {}
        for p in self.points:
            if p.fits and (p.num_generations not in out or p.generation_batch_size > out[p.num_generations].generation_batch_size):
                out[p.num_generations] = p
        return out

    def ooms(self) -> list[ProbePoint]:
        return [p for p in self.points if not p.fits]

    def point(self, num_generations: int, generation_batch_size: int) -> ProbePoint | None:
        return next((p for p in self.points if p.num_generations == num_generations
                     and p.generation_batch_size == generation_batch_size), None)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["best"] = {str(g): p.generation_batch_size for g, p in sorted(self.best().items())}
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Probe":
        known = set(ProbePoint.__dataclass_fields__)
        points = [ProbePoint(**{k: v for k, v in p.items() if k in known}) for p in raw.get("points", [])]
        return cls(study=str(raw.get("study", "")), points=points, total_seconds=float(raw.get("total_seconds") or 0.0),
                   one_trial_estimate_s=raw.get("one_trial_estimate_s"), memory_limit_mb=raw.get("memory_limit_mb"),
                   steps_per_point=int(raw.get("steps_per_point") or 2), processes=int(raw.get("processes") or 0))


def probe_path(output_dir: str | os.PathLike[str]) -> Path:
    return Path(output_dir) / PROBE_FILE


def load_probe(output_dir: str | os.PathLike[str]) -> Probe | None:
    """The study's probe.json, None when there is none (or it cannot be read)."""
    try:
        raw = json.loads(probe_path(output_dir).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return Probe.from_dict(raw) if isinstance(raw, dict) else None


def save_probe(output_dir: str | os.PathLike[str], probe: Probe) -> Path:
    target = probe_path(output_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(probe.to_dict(), indent=2))
    os.replace(tmp, target)
    return target


def probed_space(space: FeasibleSpace, probe: Probe, *, largest_only: bool) -> FeasibleSpace:
    """The space without the pairs the probe saw run out of memory, nor any at or above one.

    `largest_only` (search.generation_batch_size: probed) keeps each G's largest fitting batch;
    a G whose every probed batch ran out of memory is rejected.
    """
    best = probe.best()
    oom = {(p.num_generations, p.generation_batch_size): p for p in probe.ooms()}
    feasible = []
    rejected = list(space.rejected)
    for pair in space.feasible:
        key = (pair.num_generations, pair.generation_batch_size)
        # The probe's own rule: memory grows with the batch and G, so a pair at or above an OOM pair is out too.
        above = next((p for (g, b), p in oom.items() if g <= key[0] and b <= key[1]), None)
        if key in oom:
            rejected.append(Rejection(*key, f"the probe ran out of memory at this pair: {oom[key].reason or 'oom'}"))
        elif above is not None:
            rejected.append(Rejection(*key, f"at or above the pair {above.label} that ran out of memory in the probe"))
        elif not largest_only or (pair.num_generations in best and best[pair.num_generations].generation_batch_size == key[1]):
            feasible.append(pair)
    for g in space.generations:
        if largest_only and g not in best:
            rejected.append(Rejection(g, None, "the probe found no generation batch that fits in memory for this G"))
    return replace(space, feasible=tuple(feasible), rejected=tuple(rejected), batch_searched=True)
