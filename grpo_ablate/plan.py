"""The trial plan of the planned samplers (grid and ablation), and the search space they share.

    grpo-ablate plan studies/tiny-cpu.yaml

Pure: reads a validated Study, imports no optuna. study/setup.py queues these cells through
study/ledger.py (their params: search/encoding.py's PLAN encoding); study/lifecycle.py turns
each into a trial.

- grid: every feasible (num_generations, generation batch) pair x every temperature x every seed.
- ablation: the baseline first, then one factor at a time (the other factors held at the
  baseline), every arm repeated over the study's seeds, all at the same budget. Trials run seed
  by seed, so a study stopped half-way still compares every arm on the same seeds.
  `grpo-ablate advise --enqueue` adds its top prediction as one more arm (role "advise") when
  the ablation lacks it; the arm is kept in advise.json (`advised_arms`), so `plan`, `run` and
  every later run count and queue the same cells.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_ablate.vocab import Arm, Cell, Schedule

if TYPE_CHECKING:
    from grpo_ablate.config import Study

__all__ = ["racing_round", "study_plan", "baseline_arm", "batch_is_searched", "resolved_trial_count",
           "advised_arms", "is_plannable", "ADVISE_ROLE"]

DEFAULT_ADAPTIVE_TRIALS = 20  # tpe/random/gp studies without n_trials
ADVISE_ROLE = "advise"  # the role of a cell advise queued


def batch_is_searched(study: "Study") -> bool:
    """Whether some G has several feasible batches (the ablation then varies the batch too)."""
    from grpo_ablate.search.encoding import batch_choice

    return batch_choice(study.space)


def _temperatures(study: "Study") -> list[float]:
    t = study.temperatures()
    if isinstance(t, list):
        return [float(x) for x in t]
    return [study.fixed_temperature()]


def baseline_arm(study: "Study") -> Arm:
    """The ablation baseline: the study's, else TRL's default G=8 (or the nearest feasible G)."""
    base = study.study.baseline
    space = study.space
    g = int(base.get("num_generations", 8))
    b = base.get("generation_batch_size")
    pair = space.pair(g, int(b) if b else None)
    if pair is None:
        fixed = [x for x in space.generations if not isinstance(x, Schedule)] or list(space.generations)
        g = min(fixed, key=lambda x: (abs(x - g), x))
        pair = space.pair(g)
    assert pair is not None
    temps = _temperatures(study)
    if "temperature" in base:
        temp = float(base["temperature"])
    elif study.temperatures() is None:
        temp = study.fixed_temperature()
    else:
        temp = temps[len(temps) // 2]
    return Arm(pair.num_generations, pair.generation_batch_size, temp)


def study_plan(study: "Study") -> list[Cell]:
    """Every trial a grid or ablation study runs, in order; empty for adaptive samplers."""
    seeds = list(study.study.seeds)
    if study.study.sampler == "grid":
        cells = [
            Cell(Arm(p.num_generations, p.generation_batch_size, t), s, "grid")
            for s in seeds
            for p in study.space.feasible
            for t in _temperatures(study)
        ]
    elif study.study.sampler == "ablation":
        advised = advised_arms(study)
        cells = [c for s in seeds for c in [*_ablation_cells(study, s), *(Cell(a, s, ADVISE_ROLE) for a in advised)]]
    else:
        return []
    unique: dict[str, Cell] = {}
    for c in cells:
        unique.setdefault(c.key, c)  # an advised arm the ablation already has keeps its ablation role
    return list(unique.values())


def racing_round(study: "Study", round_no: int, live: set[str] | None = None) -> list[Cell]:
    """The cells a racing study queues for a round: round 1 is every arm on the first seeds,
    each later round one more seed for the arms still in contention (`live`, arm keys)."""
    racing = study.study.racing
    assert racing is not None
    seeds = list(study.study.seeds)
    first = racing.first_round_seeds
    chosen = seeds[:first] if round_no <= 1 else seeds[first + round_no - 2:first + round_no - 1]
    cells = [c for c in study_plan(study) if c.seed in chosen]
    return [c for c in cells if live is None or c.arm.key in live]


def resolved_trial_count(study: "Study") -> int:
    """The number of finished trials the study aims for, over every run and host."""
    if study.study.n_trials:
        return study.study.n_trials
    if study.is_planned:
        return len(study_plan(study))
    return DEFAULT_ADAPTIVE_TRIALS


def is_plannable(study: "Study", arm: Arm) -> bool:
    """Whether a planned trial can run this arm: a feasible pair at a temperature the study's params can hold."""
    if study.space.pair(arm.num_generations, arm.generation_batch_size) is None:
        return False
    t = study.temperatures()
    if t is None:
        return arm.temperature == study.fixed_temperature()
    if isinstance(t, list):
        return arm.temperature in [float(x) for x in t]
    return t.low <= arm.temperature <= t.high


def advised_arms(study: "Study") -> list[Arm]:
    """The arms `advise --enqueue` added to this ablation (advise.json), those the study can still run.

    Read from the study's folder, as probe.json is: the plan is the same for `plan` and `run`
    without opening the storage. An arm the edited study can no longer run is left out.
    """
    from grpo_ablate.preflight.advise_file import advised_arms as saved

    return [a for a in saved(study.output_dir) if is_plannable(study, a)]


def _ablation_cells(study: "Study", seed: int) -> list[Cell]:
    base = baseline_arm(study)
    g0, b0, t0 = base.num_generations, base.generation_batch_size, base.temperature
    cells = [Cell(base, seed, "baseline")]
    # factor 1: num_generations, at the baseline's batch when that holds whole groups, else its own
    for g in study.space.generations:
        if g == g0:
            continue
        p = study.space.pair(g, b0) or study.space.pair(g)
        if p is not None:
            cells.append(Cell(Arm(p.num_generations, p.generation_batch_size, t0), seed, f"num_generations={g}"))
    # factor 2: temperature
    if study.temperatures() is not None:
        for t in _temperatures(study):
            if t != t0:
                cells.append(Cell(Arm(g0, b0, t), seed, f"temperature={t:g}"))
    # factor 3: generation batch, at the baseline's G
    if batch_is_searched(study):
        for p in study.space.feasible:
            if p.num_generations == g0 and p.generation_batch_size != b0:
                cells.append(Cell(Arm(g0, p.generation_batch_size, t0), seed, f"generation_batch_size={p.generation_batch_size}"))
    return cells
