"""The trial plan of the planned samplers (grid and ablation), and the search space they share.

    grpo-ablate plan studies/tiny-cpu.yaml

Pure: reads a validated Study, imports no optuna. The study module enqueues these cells; the
objective turns each into a trial.

- grid: every feasible (num_generations, generation batch) pair x every temperature x every seed.
- ablation: the baseline first, then one factor at a time (the other factors held at the
  baseline), every arm repeated over the study's seeds, all at the same budget. Trials run seed
  by seed, so a study stopped half-way still compares every arm on the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpo_ablate.space import FeasiblePair

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["Cell", "study_plan", "pair_param", "baseline_params"]


@dataclass(frozen=True)
class Cell:
    arm: str  # "baseline", "num_generations=4", "temperature=0.7", ...
    num_generations: int
    generation_batch_size: int
    temperature: float
    seed: int

    @property
    def key(self) -> str:
        """Unique within a study: the duplicate check of parallel workers uses it."""
        return f"G{self.num_generations}xB{self.generation_batch_size}|T{self.temperature:g}|seed{self.seed}"

    def params(self, study: "Study") -> dict[str, object]:
        """The Optuna params that reproduce this cell (names as the objective suggests them)."""
        out: dict[str, object] = {}
        name, value = pair_param(study, self.num_generations, self.generation_batch_size)
        out[name] = value
        if study.temperatures() is not None:
            out["temperature"] = self.temperature
        out["seed"] = self.seed
        return out


def pair_param(study: "Study", num_generations: int, generation_batch_size: int) -> tuple[str, object]:
    """How a (G, batch) pair appears among the trial's params.

    When every G has a single feasible batch the param is plain `num_generations` (clean plots in
    the dashboard); when batches are searched too it is `generation`, a "GxB" label, so that only
    feasible pairs can ever be proposed.
    """
    if batch_is_searched(study):
        return "generation", f"{num_generations}x{generation_batch_size}"
    return "num_generations", num_generations


def batch_is_searched(study: "Study") -> bool:
    gens = [p.num_generations for p in study.space.feasible]
    return len(gens) != len(set(gens))


def _temperatures(study: "Study") -> list[float]:
    t = study.temperatures()
    if isinstance(t, list):
        return [float(x) for x in t]
    return [study.fixed_temperature()]


def baseline_params(study: "Study") -> tuple[FeasiblePair, float]:
    """The ablation baseline: the study's, else TRL's default G=8 (or the nearest feasible G)."""
    base = study.study.baseline
    space = study.space
    g = int(base.get("num_generations", 8))
    b = base.get("generation_batch_size")
    pair = space.pair(g, int(b) if b else None)
    if pair is None:
        g = min(space.generations, key=lambda x: (abs(x - g), x))
        pair = space.pair(g)
    assert pair is not None
    temps = _temperatures(study)
    if "temperature" in base:
        temp = float(base["temperature"])
    elif study.temperatures() is None:
        temp = study.fixed_temperature()
    else:
        temp = temps[len(temps) // 2]
    return pair, temp


def study_plan(study: "Study") -> list[Cell]:
    """Every trial a grid or ablation study runs, in order."""
    seeds = list(study.study.seeds)
    if study.study.sampler == "grid":
        cells = [
            Cell("grid", p.num_generations, p.generation_batch_size, t, s)
            for s in seeds
            for p in study.space.feasible
            for t in _temperatures(study)
        ]
    elif study.study.sampler == "ablation":
        cells = [c for s in seeds for c in _ablation_arms(study, s)]
    else:
        return []
    unique: dict[str, Cell] = {}
    for c in cells:
        unique.setdefault(c.key, c)
    return list(unique.values())


def _ablation_arms(study: "Study", seed: int) -> list[Cell]:
    pair, temp = baseline_params(study)
    arms = [Cell("baseline", pair.num_generations, pair.generation_batch_size, temp, seed)]
    # factor 1: num_generations, at the baseline's batch when that holds whole groups, else its own
    for g in study.space.generations:
        if g == pair.num_generations:
            continue
        p = study.space.pair(g, pair.generation_batch_size) or study.space.pair(g)
        if p is not None:
            arms.append(Cell(f"num_generations={g}", p.num_generations, p.generation_batch_size, temp, seed))
    # factor 2: temperature
    if study.temperatures() is not None:
        for t in _temperatures(study):
            if t != temp:
                arms.append(Cell(f"temperature={t:g}", pair.num_generations, pair.generation_batch_size, t, seed))
    # factor 3: generation batch, at the baseline's G
    if batch_is_searched(study):
        for p in study.space.feasible:
            if p.num_generations == pair.num_generations and p.generation_batch_size != pair.generation_batch_size:
                arms.append(Cell(f"generation_batch_size={p.generation_batch_size}", p.num_generations, p.generation_batch_size, temp, seed))
    return arms
