"""The trial plan of the planned samplers (grid and ablation), and the search space they share.

    grpo-ablate plan studies/tiny-cpu.yaml

Pure: reads a validated StudyConfig, imports no optuna. setup.py queues these cells through ledger.py
(their params: search/encoding.py's PLAN encoding); lifecycle.py turns each into a trial. It lives
in study/ because only the study and the commands above it plan cells; the search (search/) takes
the one figure it needs, each trial's completions, from its caller.

- grid: every feasible (num_generations, generation batch) pair x every temperature x every seed.
- ablation: the baseline first, then one factor at a time (the other factors held at the
  baseline), every arm repeated over the study's seeds, all at the same budget. Trials run seed
  by seed, so a study stopped half-way still compares every arm on the same seeds.
  `grpo-ablate advise --enqueue` adds its top prediction as one more arm (role "advise") when
  the ablation lacks it; the arm is kept in advise.json (`advised_arms`), so `plan`, `run` and
  every later run count and queue the same cells.

The commands that run a study resolve all of it once per run (plan/run_plan.py `resolve_plan` ->
`StudyPlan`) and hand that down; the functions below serve the commands that need one figure of it.

A study with a `screen:` section (preflight/screen.py) trains only the arms its screen kept, once
screen.json exists (none when the study is the screen alone, `screen.confirm: false`, or the screen
left fewer than two arms to compare); before the screen has run, every arm is planned: the most the
confirm stage can cost, which is what `plan` and `init` price.

With `budget.branch_from` (branching.py) each seed's cells start with its prefix (role
PREFIX_ROLE): the baseline arm trained once to the branch step B. The seed's other cells are its
branches: each trains the study's per-trial budget from step B on, from the prefix's sealed
checkpoint; the ledger queues them only once that prefix has completed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.plan.branching import branch_step
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.core.space import FeasibleSpace, default_pair, generated_completions
from grpo_ablate.core.vocab import PLANNED_SAMPLERS, PREFIX_ROLE, Arm, Cell
from grpo_ablate.files.advise_file import advised_arms as saved
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.screen_file import load_screen

if TYPE_CHECKING:
    from grpo_ablate.config import FloatRange, StudyConfig

__all__ = ["racing_round", "study_plan", "baseline_arm", "default_temperature", "completions_per_trial",
           "resolved_trial_count", "trial_count", "cells_of", "advised_arms", "is_plannable", "ADVISE_ROLE", "is_prefix_cell", "ablation_arms",
           "seed_cells", "round_cells", "screened_arms"]

DEFAULT_ADAPTIVE_TRIALS = 20  # tpe/random/gp studies without n_trials
ADVISE_ROLE = "advise"  # the role of a cell advise queued


def _temperatures(study: "StudyConfig") -> list[float]:
    t = study.temperatures()
    if isinstance(t, list):
        return [float(x) for x in t]
    return [study.fixed_temperature()]


def baseline_arm(study: "StudyConfig", chosen: Mapping[str, Any] | None = None) -> Arm:
    """The default arm: the ablation's baseline, and `run-one`'s values where none are given.

    One rule, for each value that neither `chosen` nor study.baseline sets:
    - num_generations: TRL's default (read from GRPOConfig, 8 today), else the feasible G nearest to
      it by ratio, ties to the smaller G (space.nearest_generations);
    - generation batch: TRL's default batch for the shape, else the nearest feasible one, ties to
      the larger (space.default_pair);
    - temperature: the searched value nearest to the trainer's temperature (TRL's 1.0 when unset),
      ties to the lower; a searched range gives that temperature clipped into the range. So
      [1.0, 0.3] and [0.3, 1.0] both give 1.0: the order the user wrote is not a rule.
    A baseline is what one would run without the study, which is why TRL's defaults anchor it.
    """
    given = study.baseline_values(chosen)  # G read by the loader
    g = given.get("num_generations")
    target = g if g is not None else int(trl_default("num_generations"))
    b = given.get("generation_batch_size")
    if "temperature" in given:
        temp = float(given["temperature"])
    else:
        temp = default_temperature(study.temperatures(), study.fixed_temperature())
    pair = default_pair(study.space, target, int(b) if b is not None else None)
    return Arm(pair.num_generations, pair.generation_batch_size, temp)


def default_temperature(searched: "list[float] | FloatRange | None", anchor: float) -> float:
    """The searched temperature nearest to `anchor` (ties to the lower), `anchor` clipped into a range."""
    if searched is None:
        return float(anchor)
    if isinstance(searched, list):
        values = [float(x) for x in searched]
        return min(values, key=lambda t: (abs(t - anchor), t)) if values else float(anchor)
    return min(max(float(anchor), float(searched.low)), float(searched.high))


def completions_per_trial(study: "StudyConfig") -> int | None:
    """Completions one trial generates under the study's budget (space.generated_completions on the
    study's batch shape); None for a budget of tokens or seconds only. Plan prints it, pruning
    divides it into checkpoints, and the trainer derives max_steps by the same arithmetic."""
    steps = study.budget.max_steps or study.trainer.get("max_steps")
    steps = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None
    return generated_completions(study.space.shape, max_steps=steps, completions=study.budget.completions)


def is_prefix_cell(cell: Cell) -> bool:
    return cell.role == PREFIX_ROLE


def study_plan(study: "StudyConfig") -> list[Cell]:
    """Every trial a grid or ablation study runs, in order; empty for adaptive samplers.

    A branching study (branching.branch_step is not None) puts each seed's prefix before that
    seed's cells, which are then its branches."""
    if study.study.sampler not in PLANNED_SAMPLERS:
        return []
    return cells_of(study, baseline_arm(study), branch_step(study))


def cells_of(study: "StudyConfig", base: Arm, step: int | None) -> list[Cell]:
    """study_plan's cells from the baseline and branch step already resolved."""
    sampler = study.study.sampler
    if sampler not in PLANNED_SAMPLERS:
        return []
    temperatures = _temperatures(study)
    if sampler == "grid":
        arms = [(Arm(p.num_generations, p.generation_batch_size, t), "grid") for p in study.space.feasible for t in temperatures]
    else:
        advised = [(a, ADVISE_ROLE) for a in advised_arms(study)]
        searched = temperatures if study.temperatures() is not None else None
        arms = [*ablation_arms(study.space, base, searched), *advised]
    arms = screened_arms(study, arms)
    return seed_cells(arms, list(study.study.seeds), base if step is not None else None)


def screened_arms(study: "StudyConfig", arms: list[tuple[Arm, str]]) -> list[tuple[Arm, str]]:
    """The arms the confirm stage trains: all of them before the screen ran (or without a screen); after it, those
    it kept, and none when the study is the screen alone or fewer than two are left to compare."""
    if study.file.screen is None:
        return arms
    if not study.file.screen.confirm:
        return []
    screen = load_screen(study.output_dir, Owner.of(study))
    if screen is None:
        return arms
    left = [(a, role) for a, role in arms if a.key not in {d.key for d in screen.dropped}]
    return left if len(left) >= 2 else []


def seed_cells(arms: Sequence[tuple[Arm, str]], seeds: Sequence[int], prefix: Arm | None = None) -> list[Cell]:
    """The plan's cells from its arms (each with its role): seed by seed, every arm once per seed.

    An arm listed twice keeps its first role (an advised arm the ablation already has stays the
    ablation's). With a `prefix` arm (a branching study) each seed starts with its prefix cell."""
    unique: dict[str, Cell] = {}
    for s in seeds:
        for arm, role in arms:
            c = Cell(arm, s, role)
            unique.setdefault(c.key, c)
    cells = list(unique.values())
    if prefix is None:
        return cells
    out: list[Cell] = []
    for seed in dict.fromkeys(c.seed for c in cells):
        out.append(Cell(prefix, seed, PREFIX_ROLE))
        out.extend(c for c in cells if c.seed == seed)
    return out


def racing_round(study: "StudyConfig", round_no: int, live: set[str] | None = None) -> list[Cell]:
    """The cells a racing study queues for a round: round 1 is every arm on the first seeds,
    each later round one more seed for the arms still in contention (`live`, arm keys). A
    branching study's round includes its seeds' prefixes, whatever arms are live (every branch
    of the seed starts from it)."""
    racing = study.study.racing
    assert racing is not None
    return round_cells(study_plan(study), list(study.study.seeds), racing.first_round_seeds, round_no, live)


def round_cells(cells: Sequence[Cell], seeds: Sequence[int], first: int, round_no: int,
                live: set[str] | None = None) -> list[Cell]:
    """racing_round on a plan already made: the round's seeds (the `first` seeds, then one more
    each round) and, of their cells, those of live arms and every prefix."""
    chosen = seeds[:first] if round_no <= 1 else seeds[first + round_no - 2:first + round_no - 1]
    return [c for c in cells if c.seed in chosen and (live is None or c.arm.key in live or is_prefix_cell(c))]


def resolved_trial_count(study: "StudyConfig") -> int:
    """The number of finished trials the study aims for, over every run and host (a run reads its plan's)."""
    return trial_count(study, study_plan(study))


def trial_count(study: "StudyConfig", cells: Sequence[Cell]) -> int:
    """resolved_trial_count on the cells already planned. A branching study's prefixes are trials and count
    (one per seed): the cells hold them."""
    if study.study.n_trials:
        return study.study.n_trials
    if study.is_planned:
        return len(cells)
    return DEFAULT_ADAPTIVE_TRIALS


def is_plannable(study: "StudyConfig", arm: Arm) -> bool:
    """Whether a planned trial can run this arm: a feasible pair at a temperature the study's params can hold."""
    if study.space.pair(arm.num_generations, arm.generation_batch_size) is None:
        return False
    t = study.temperatures()
    if t is None:
        return arm.temperature == study.fixed_temperature()
    if isinstance(t, list):
        return arm.temperature in [float(x) for x in t]
    return t.low <= arm.temperature <= t.high


def advised_arms(study: "StudyConfig") -> list[Arm]:
    """The arms `advise --enqueue` added to this ablation (advise.json), those the study can still run.

    Read from the study's folder, as probe.json is: the plan is the same for `plan` and `run`
    without opening the storage. An arm the edited study can no longer run is left out.
    """

    return [a for a in saved(study.output_dir, Owner.of(study)) if is_plannable(study, a)]


def ablation_arms(space: FeasibleSpace, base: Arm, temperatures: Sequence[float] | None) -> list[tuple[Arm, str]]:
    """The ablation's arms with their roles: the baseline, then one factor at a time.

    `temperatures` are the searched ones (None when the study does not search temperature); a
    function of the space and the baseline only, so every seed gets the same arms."""
    g0, b0, t0 = base.num_generations, base.generation_batch_size, base.temperature
    arms = [(base, "baseline")]
    # factor 1: num_generations, at the baseline's batch when that holds whole groups, else its own
    for g in space.generations:
        if g == g0:
            continue
        p = default_pair(space, g, b0)
        arms.append((Arm(p.num_generations, p.generation_batch_size, t0), f"num_generations={g}"))
    # factor 2: temperature
    for t in temperatures or ():
        if t != t0:
            arms.append((Arm(g0, b0, t), f"temperature={t:g}"))
    # factor 3: generation batch, at the baseline's G
    if space.batch_choice:
        for p in space.feasible:
            if p.num_generations == g0 and p.generation_batch_size != b0:
                arms.append((Arm(g0, p.generation_batch_size, t0), f"generation_batch_size={p.generation_batch_size}"))
    return arms
