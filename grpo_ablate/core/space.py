"""The feasible space: which (num_generations, generation_batch_size) pairs TRL accepts.

Pure arithmetic: no torch, no trl, no optuna at import. The rules mirror
`trl.GRPOConfig.__post_init__` (TRL 1.16) and are checked against it by
`tests/test_space.py`, which builds real configs over many batch shapes.

    python -m grpo_ablate plan studies/tiny-cpu.yaml     # prints this module's answer in words

The rules, for W training processes, per-device batch b and accumulation a:
- generation_batch_size (gbs) defaults to b * W * steps_per_generation, where
  steps_per_generation defaults to a; when gbs is set it must be divisible by b * W;
- gbs must be divisible by num_generations (whole groups per generation round);
- num_generations >= 2;
- with evaluation on, per_device_eval_batch_size * W must be divisible by
  num_generations_eval (or num_generations when that is unset).

The round rule (`Rounds`, from `BatchShape.rounds`) is owned here too, and only here: TRL
generates a new batch every steps_per_generation x num_iterations micro-steps (its
`_prepare_inputs`), so the optimizer steps that generate (the reward rows a trial logs), the step a
generation round starts at and the round-aligned checkpoint period all follow from it. validate,
init, plan, the trial plan (study/trial_spec.py) and the trainer (checkpoints, G schedules) ask
here; `tests/test_space.py` checks the rule against a real GRPOTrainer's generation calls.

A G schedule (`grpo_ablate.core.schedule`, e.g. `4→8@40%`) keeps its arm's generation batch in every
phase, so it is feasible with a batch when every phase's G is; a rejection names the phase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from grpo_ablate.core.schedule import prompts_per_round
from grpo_ablate.core.vocab import Dynamic, PerPrompt, Schedule, pair_label

__all__ = [
    "BatchShape",
    "Rounds",
    "FeasiblePair",
    "Rejection",
    "FeasibleSpace",
    "check_pair",
    "feasible_space",
    "auto_batches",
    "optimizer_steps",
    "generated_completions",
    "nearest_generations",
    "default_pair",
]

# How far `auto` looks for generation batches, in multiples of the default batch.
AUTO_BATCH_FACTOR = 4


@dataclass(frozen=True)
class BatchShape:
    """Everything TRL's divisibility rules read, for one launch shape."""

    world_size: int
    per_device_train_batch_size: int
    gradient_accumulation_steps: int = 1
    steps_per_generation: int | None = None
    eval_enabled: bool = False
    per_device_eval_batch_size: int = 8
    num_generations_eval: int | None = None
    num_iterations: int = 1  # GRPO's updates per generated batch: each completion is trained on this often

    @property
    def unit(self) -> int:
        """Completions one micro-step consumes over all processes: every batch is a multiple of it."""
        return self.per_device_train_batch_size * self.world_size

    @property
    def default_generation_batch_size(self) -> int:
        """What TRL fills in when neither generation_batch_size nor steps_per_generation is set."""
        return self.unit * (self.steps_per_generation or self.gradient_accumulation_steps)

    @property
    def generated_per_step(self) -> float:
        """Completions generated per optimizer step: an optimizer step trains on unit x accumulation
        completions, and each generated completion is trained on num_iterations times."""
        return self.unit * self.gradient_accumulation_steps / self.num_iterations

    def rounds(self, generation_batch_size: int | None = None) -> "Rounds":
        """TRL's generation cadence at this shape and generation batch (None: TRL's default batch).

        As GRPOConfig derives it: a generation batch given sets steps_per_generation =
        batch / (per-device batch x processes); else steps_per_generation, else the accumulation.
        """
        if generation_batch_size is not None:
            spg = max(1, int(generation_batch_size) // self.unit)
        else:
            spg = self.steps_per_generation or self.gradient_accumulation_steps
        return Rounds(steps_per_generation=spg, gradient_accumulation_steps=self.gradient_accumulation_steps,
                      num_iterations=self.num_iterations)

    def describe(self) -> str:
        """The hardware arithmetic in words, for `plan`."""
        spg = self.steps_per_generation or self.gradient_accumulation_steps
        src = "steps_per_generation" if self.steps_per_generation else "gradient_accumulation_steps"
        text = (
            f"{self.world_size} training process(es) x {self.per_device_train_batch_size} per device = "
            f"{self.unit} completions per micro-step; default generation batch = {self.unit} x "
            f"{spg} ({src}) = {self.default_generation_batch_size} completions."
        )
        if self.num_iterations > 1:
            text += (
                f" num_iterations = {self.num_iterations}: each completion is trained on {self.num_iterations} times, "
                f"so an optimizer step generates {self.generated_per_step:g} new completions."
            )
        if self.eval_enabled:
            target = "num_generations_eval" if self.num_generations_eval else "num_generations"
            text += (
                f" Evaluation is on: per_device_eval_batch_size x processes = "
                f"{self.per_device_eval_batch_size * self.world_size} must be divisible by {target}."
            )
        return text


@dataclass(frozen=True)
class Rounds:
    """When TRL generates: every `micro_steps_per_round` = steps_per_generation x num_iterations
    micro-steps (TRL's `_step % generate_every == 0`), counted from the first micro-step, with
    `gradient_accumulation_steps` micro-steps per optimizer step.

    The one owner of that rule: reward rows, a round's first step, the checkpoint period.
    """

    steps_per_generation: int
    gradient_accumulation_steps: int = 1
    num_iterations: int = 1

    @property
    def micro_steps_per_round(self) -> int:
        return max(1, self.steps_per_generation) * max(1, self.num_iterations)

    @property
    def accumulation(self) -> int:
        return max(1, self.gradient_accumulation_steps)

    def round_start_step(self, k: int) -> int:
        """Optimizer steps completed when round k (0-based) generates: it trains from the next one."""
        return k * self.micro_steps_per_round // self.accumulation

    @property
    def period_steps(self) -> int:
        """Optimizer steps after which rounds and steps line up again (a round starts exactly at a
        step's first micro-step): a checkpoint taken there resumes with no round half-trained."""
        every = self.micro_steps_per_round
        return math.lcm(every, self.accumulation) // self.accumulation

    def generating_steps(self, max_steps: int) -> int:
        """Optimizer steps among the first `max_steps` in which TRL generates: the reward rows a
        trial logs (TRL logs reward at a step only when it generated since the last log)."""
        if max_steps <= 0:
            return 0
        every, a = self.micro_steps_per_round, self.accumulation
        if every < a:  # a round starts inside every optimizer step
            return int(max_steps)
        return math.ceil(max_steps * a / every)  # every >= a: each round in a step of its own

    def describe(self) -> str:
        every = self.micro_steps_per_round
        text = f"a generation round every {every} micro-step(s) (steps_per_generation {self.steps_per_generation}"
        if self.num_iterations > 1:
            text += f" x num_iterations {self.num_iterations}"
        return text + f"), {self.accumulation} micro-step(s) per optimizer step"


@dataclass(frozen=True)
class FeasiblePair:
    num_generations: int
    generation_batch_size: int
    steps_per_generation: int
    prompts_per_generation: int

    @property
    def label(self) -> str:
        """A categorical-safe name ("8x64"): Optuna choices cannot be tuples."""
        return pair_label(self.num_generations, self.generation_batch_size)

    def as_dict(self) -> dict[str, int | str]:
        return {
            "num_generations": str(self.num_generations) if isinstance(self.num_generations, Schedule) else self.num_generations,
            "generation_batch_size": self.generation_batch_size,
            "steps_per_generation": self.steps_per_generation,
            "prompts_per_generation": self.prompts_per_generation,
        }


@dataclass(frozen=True)
class Rejection:
    num_generations: int | str  # a str when the value is not even a schedule
    generation_batch_size: int | None
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "num_generations": str(self.num_generations) if isinstance(self.num_generations, Schedule) else self.num_generations,
            "generation_batch_size": self.generation_batch_size,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class FeasibleSpace:
    shape: BatchShape
    feasible: tuple[FeasiblePair, ...]
    rejected: tuple[Rejection, ...]
    batch_searched: bool = False
    suggestions: tuple[str, ...] = field(default=())

    @property
    def generations(self) -> tuple[int, ...]:
        return tuple(sorted({p.num_generations for p in self.feasible}))

    @property
    def batch_choice(self) -> bool:
        """Whether some G has more than one feasible batch: then a pair, not G alone, names the arm."""
        gens = [p.num_generations for p in self.feasible]
        return len(gens) != len(set(gens))

    def pair(self, num_generations: int, generation_batch_size: int | None = None) -> FeasiblePair | None:
        for p in self.feasible:
            if p.num_generations == num_generations and (
                generation_batch_size is None or p.generation_batch_size == generation_batch_size
            ):
                return p
        return None

    def by_label(self, label: str) -> FeasiblePair:
        for p in self.feasible:
            if p.label == label:
                return p
        raise KeyError(label)

    def as_dict(self) -> dict[str, object]:
        return {
            "hardware": {
                "world_size": self.shape.world_size,
                "per_device_train_batch_size": self.shape.per_device_train_batch_size,
                "gradient_accumulation_steps": self.shape.gradient_accumulation_steps,
                "steps_per_generation": self.shape.steps_per_generation,
                "default_generation_batch_size": self.shape.default_generation_batch_size,
                "eval_enabled": self.shape.eval_enabled,
                "per_device_eval_batch_size": self.shape.per_device_eval_batch_size,
                "num_generations_eval": self.shape.num_generations_eval,
            },
            "batch_searched": self.batch_searched,
            "feasible": [p.as_dict() for p in self.feasible],
            "rejected": [r.as_dict() for r in self.rejected],
            "suggestions": list(self.suggestions),
        }


def check_pair(shape: BatchShape, num_generations: int, generation_batch_size: int | None = None) -> str | None:
    """Why TRL would reject this pair, or None when it accepts it.

    `generation_batch_size=None` means "leave it to TRL" (the shape's default batch). A schedule
    is checked phase by phase, with the same batch.
    """
    if isinstance(num_generations, (Dynamic, PerPrompt)):
        # one G per round on average (per-prompt G keeps the round's total: batch / G prompts, g_min..g_max each)
        reason = check_pair(shape, int(num_generations), generation_batch_size)
        if reason is not None:
            return f"{num_generations.label}: {reason}"
        gbs = generation_batch_size or shape.default_generation_batch_size
        share, g = gbs // shape.world_size, int(num_generations)
        if isinstance(num_generations, Dynamic) and (gbs % shape.world_size or share % g):
            return (f"{num_generations.label}: each of the {shape.world_size} processes' share of the generation batch "
                    f"({gbs} / {shape.world_size}) must hold whole groups of {g} (dynamic sampling drops and refills "
                    f"whole groups on each process); use a generation batch that is a multiple of {shape.world_size * g}")
        return None
    if isinstance(num_generations, Schedule):
        for i, g in enumerate(num_generations.phases, start=1):
            reason = check_pair(shape, g, generation_batch_size)
            if reason is not None:
                return f"phase {i} of {num_generations.label} (G={g}): {reason}"
        return None
    G = num_generations
    if G < 2:
        return f"num_generations must be at least 2 (GRPO needs a group to compare), got {G}"
    if generation_batch_size is None:
        gbs = shape.default_generation_batch_size
        origin = "the default generation batch"
    else:
        gbs = generation_batch_size
        origin = "generation_batch_size"
        if gbs <= 0:
            return f"generation_batch_size must be positive, got {gbs}"
        if shape.steps_per_generation is not None:
            return (
                "generation_batch_size and steps_per_generation cannot both be set; "
                "remove steps_per_generation from the trainer section to search generation batches"
            )
        if gbs % shape.unit:
            return (
                f"generation_batch_size {gbs} is not divisible by per_device_train_batch_size x processes = "
                f"{shape.per_device_train_batch_size} x {shape.world_size} = {shape.unit}"
            )
    if gbs % G:
        return (
            f"{origin} {gbs} is not divisible by num_generations {G} "
            f"(every generation round must hold whole groups)"
        )
    if shape.eval_enabled:
        eval_total = shape.per_device_eval_batch_size * shape.world_size
        target = shape.num_generations_eval or G
        name = "num_generations_eval" if shape.num_generations_eval else "num_generations"
        if eval_total % target:
            return (
                f"evaluation is on: per_device_eval_batch_size x processes = "
                f"{shape.per_device_eval_batch_size} x {shape.world_size} = {eval_total} "
                f"is not divisible by {name} {target}"
            )
    return None


def optimizer_steps(shape: BatchShape, *, max_steps: int | None = None, completions: int | None = None) -> int | None:
    """The trial's optimizer steps (TRL's max_steps) under a budget of steps and/or completions.

    A completions budget becomes the fewest steps that generate at least that many; with both,
    the smaller wins. None when neither is set (a budget of tokens or seconds only).
    """
    candidates = [int(max_steps)] if max_steps else []
    if completions:
        candidates.append(max(1, math.ceil(int(completions) / shape.generated_per_step)))
    return min(candidates) if candidates else None


def generated_completions(shape: BatchShape, *, max_steps: int | None = None, completions: int | None = None) -> int | None:
    """Completions one trial generates under the budget: optimizer steps x completions per step.

    The one figure plan prints, pruning checkpoints divide and the trainer's max_steps comes from.
    """
    steps = optimizer_steps(shape, max_steps=max_steps, completions=completions)
    return None if steps is None else math.ceil(steps * shape.generated_per_step - 1e-9)


def nearest_generations(generations: Iterable[int], target: int) -> int:
    """The default arm's G: `target` when offered, else the one nearest to it by ratio (G=4 and G=16
    are equally far from 8), ties to the smaller G (the cheaper trial).

    A plain G wins over a schedule; a schedule is taken only when nothing else is offered.
    """
    offered = list(generations)
    if not offered:
        raise ValueError("no num_generations to choose from")
    exact = next((g for g in offered if g == target), None)  # a schedule equals only itself
    if exact is not None:
        return exact
    plain = [g for g in offered if not isinstance(g, Schedule)] or offered
    return min(plain, key=lambda g: (abs(math.log(int(g) / int(target))), int(g)))



def default_pair(space: "FeasibleSpace", num_generations: int, generation_batch_size: int | None = None) -> "FeasiblePair":
    """The default arm's (G, batch): the default G (`nearest_generations`) and, for it, the batch asked
    for when feasible, else TRL's own default generation batch when feasible, else the feasible batch
    nearest to that default by ratio, ties to the larger batch (more prompts per generation round).

    The one rule of the study's baseline (plan), `run-one`'s unset values and `init`'s baseline.
    """
    g = nearest_generations(space.generations, num_generations)
    pairs = [p for p in space.feasible if p.num_generations == g]
    if generation_batch_size is not None:
        asked = next((p for p in pairs if p.generation_batch_size == generation_batch_size), None)
        if asked is not None:
            return asked
    target = space.shape.default_generation_batch_size
    return min(pairs, key=lambda p: (abs(math.log(p.generation_batch_size / target)), -p.generation_batch_size))


def auto_batches(shape: BatchShape, generations: Iterable[int], limit: int | None = None) -> list[int]:
    """Every generation batch worth trying under `limit` (default: 4x the default batch).

    A batch qualifies when it is a multiple of the per-micro-step unit and holds whole groups
    for at least one of the generation sizes.
    """
    cap = limit or shape.default_generation_batch_size * AUTO_BATCH_FACTOR
    out: set[int] = set()
    for G in generations:
        if G < 2:
            continue
        step = math.lcm(shape.unit, *getattr(G, "phases", (G,)))
        out.update(range(step, cap + 1, step))
    return sorted(out)


def feasible_space(
    shape: BatchShape,
    generations: Sequence[int],
    batches: Sequence[int] | str | None = None,
    max_generation_batch_size: int | None = None,
    unreadable: Sequence[Rejection] = (),
) -> FeasibleSpace:
    """Split every candidate pair into feasible and rejected-with-reason.

    `batches`: None keeps TRL's default batch; "auto" searches every batch that fits;
    a list searches exactly those. `generations` are values (ints and schedule objects); the
    labels the study-file loader could not read come as `unreadable` rejections (config/hardware.py).
    """
    for g in generations:
        if isinstance(g, bool) or not isinstance(g, int):
            raise TypeError(f"num_generations must be an int or a schedule object, got {g!r}")
    unparsed = list(unreadable)
    gens = sorted(set(generations))
    searched = batches is not None
    if batches == "auto":
        cands: list[int | None] = list(auto_batches(shape, [g for g in gens if g >= 2], max_generation_batch_size))
    elif batches is None:
        cands = [None]
    else:
        cands = [*sorted({int(b) for b in batches})]

    feasible: list[FeasiblePair] = []
    rejected: list[Rejection] = []
    for G in gens:
        if G < 2:
            rejected.append(Rejection(G, None, check_pair(shape, G) or ""))
            continue
        found = False
        for b in cands:
            reason = check_pair(shape, G, b)
            gbs = shape.default_generation_batch_size if b is None else b
            if reason is None:
                found = True
                feasible.append(FeasiblePair(G, gbs, gbs // shape.unit, prompts_per_round(gbs, G)))
            elif batches != "auto":
                rejected.append(Rejection(G, gbs, reason))
        if batches == "auto" and not found:
            rejected.append(Rejection(G, None, f"no generation batch up to the auto limit holds whole groups of {G}"))
    rejected.extend(unparsed)
    suggestions = tuple(_suggest(shape, gens, cands)) if not feasible else ()
    return FeasibleSpace(shape, tuple(feasible), tuple(rejected), searched, suggestions)


def _suggest(shape: BatchShape, gens: Sequence[int], cands: Sequence[int | None]) -> list[str]:
    """Nearest values that would work, for the "nothing is feasible" error."""
    out: list[str] = []
    for b in cands:
        gbs = shape.default_generation_batch_size if b is None else b
        if b is not None and gbs % shape.unit:
            lo = (gbs // shape.unit) * shape.unit
            multiples = [x for x in (lo, lo + shape.unit) if x > 0]
            out.append(f"generation_batch_size {gbs} -> nearest multiples of {shape.unit}: {multiples}")
            continue
        ok = [G for G in range(2, gbs + 1) if check_pair(shape, G, b) is None]
        gens = [g for g in gens if not isinstance(g, Schedule)]
        if ok and gens:
            near: set[int] = set()
            for G in gens:  # the closest feasible value below and above each asked-for G
                below = [g for g in ok if g < G]
                above = [g for g in ok if g > G]
                near.update(([max(below)] if below else []) + ([min(above)] if above else []))
            out.append(f"with generation batch {gbs}: feasible num_generations nearest to {gens} are {sorted(near)}")
    for G in gens:
        if G >= 2 and not isinstance(G, Schedule):
            step = math.lcm(shape.unit, G)
            out.append(f"num_generations {G} needs generation_batch_size a multiple of {step} (lcm of {shape.unit} and {G})")
    return out
