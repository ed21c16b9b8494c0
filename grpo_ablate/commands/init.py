"""`grpo-ablate init`: a commented study file from a recipe (or a few answers), validated, then planned.

    grpo-ablate init --from recipes/config_demo.yaml --gpus 8 --vllm server --out study.yaml
    grpo-ablate init --task addition --out tiny.yaml          # no recipe: flags, or questions on a TTY

The study is written to reach a decision at a price: held-out reward (eval_final_reward) as the
objective on held-out prompts; the baseline is the recipe's own num_generations (or the nearest G
this hardware accepts) at the recipe's temperature (as its own TRL meant it), fixed; the arms are the
G values nearest it; the seeds are those Bechhofer's design needs to pick an arm within min_effect
of the best (at --min-effect, default 0.05 of the reward's range), as the group-sequential race's
planned maximum (the race is on). Where the full run can be priced (its steps, or its epochs and
--full-run-prompts), `fit_design` chooses the most arms and the longest trial whose plan fits --budget
(default half the full run). Every trial starts from step 0 and trains past the recipe's warmup
(the default); with --branch-from warmup, where the recipe has a learning-rate warmup, the arms
branch past it instead (budget.branch_from: warmup: per seed the baseline trains once to the end
of warmup, every arm branches from there, the prefix paid once). Branching is cheaper, but on the
CPU benchmark it changed which G is best (benchmarks/branching.py --warmup), so it is opt-in. It prints the price as `plan` does, and refuses (exit 2,
nothing written) when no design that can decide fits, saying what it would take: the budget the
smallest such design needs, or the min_effect at which one fits this budget. The file is checked before it is written, and
an existing file is only replaced with --force; the recipe or dataset init reads is never replaced,
however --out spells it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from scipy.optimize import brentq

from grpo_ablate.commands.common import EXIT_OK, check_out, load_study
from grpo_ablate.commands.plan import plan_text
from grpo_ablate.config.inputs import peek_rows
from grpo_ablate.config.recipes import (DRIFTING_KEYS, OPEN_R1_DEFAULT_REWARDS, OPEN_R1_STACK, read_recipe,
                                        recipe_accelerate_config, recipe_stack,
                                        stack_default)
from grpo_ablate.config.schema import DataSection
from grpo_ablate.errors import Problem, StudyError
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.config.trl_releases import known_releases
from grpo_ablate.stats.min_effect import REWARD_MIN_EFFECT
from grpo_ablate.config.hardware import trainer_batch_shape
from grpo_ablate.space import feasible_space, nearest_generations
from grpo_ablate.stats.selection import bechhofer_pcs, bechhofer_seeds
from grpo_ablate.cost import Price, fmt_multiple, parse_share, warmup_steps
from grpo_ablate.estimate import estimate_trial
from grpo_ablate.study.price import planned_price
from grpo_ablate.vocab import BUILTIN_TASKS

__all__ = ["add_parser", "run", "InitAnswers", "study_text", "write_study", "ask_missing", "choose_generations",
           "Design", "fit_design", "seeds_to_decide", "effect_for_seeds", "reward_range"]

CANDIDATE_GENERATIONS = (2, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32, 48, 64)
MAX_ARMS = 5  # G values in the search: the baseline and its nearest feasible neighbours
# The study decides on held-out reward. Seeds are sized for Bechhofer's design at min_effect when arms vary
# between seeds as on the built-in tasks: a held-out reward sd of at least SEED_SD_SHARE of its range per arm
# (0.05-0.08 over 40 seeds, stats/min_effect.py), uncorrelated between arms (shared/guide/facts.md, round 4).
SEED_SD_SHARE = 0.05
EVAL_PROMPTS = 128
# The budget a written study fits (--budget): a share of the full run's GPU-hours. A tuning study is worth
# running only at a fraction of the run it tunes; half a run is the default, one whole extra run the ceiling
# users name.
DEFAULT_BUDGET = "0.5x"
RACE_CONFIDENCE = 0.95  # the race's target P(the leader is within min_effect of the best), and Bechhofer's PCS
MIN_STEPS_PAST_WARMUP = 10  # a trial trains at least this many optimizer steps after the recipe's LR warmup
TRIAL_STEPS_CAP = 100  # a fitted trial is never longer than the unfitted default
UNPRICED_ARMS = 3  # the baseline G and its nearest neighbours when no budget can be fitted


@dataclass
class InitAnswers:
    """What init needs: a recipe, or a model and a dataset (or a built-in task); and the hardware."""

    recipe: Path | None = None
    model: str | None = None
    dataset: str | None = None
    task: str | None = None
    gpus: int = 0
    vllm: str = "none"  # none | colocate | server
    name: str | None = None
    budget: str | None = None  # --budget: a share of the full run ("0.5x"); None: DEFAULT_BUDGET where it can be priced
    full_run_prompts: int | None = None  # --full-run-prompts: the training set's rows, when the recipe counts epochs
    min_effect: float | None = None  # --min-effect: in reward units; None: REWARD_MIN_EFFECT of the reward's range
    branch: bool = False  # --branch-from warmup | none (the default): every trial from step 0
    recipe_values: dict[str, Any] = field(default_factory=dict)
    recipe_trl: str | None = None  # the TRL release a `trl grpo` recipe was written for (config/trl_releases.py)

    def value(self, key: str) -> Any:
        """The recipe's value, else what the key meant on the recipe's own stack (Open R1: TRL 0.18's default)."""
        v = self.recipe_values.get(key)
        return stack_default(self.recipe_values, key, self.recipe_trl) if v is None else v

    @property
    def world_size(self) -> int:
        if self.gpus <= 0:
            return 1
        return max(1, self.gpus - 1) if self.vllm == "server" else self.gpus


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def choose_generations(a: InitAnswers) -> tuple[int, list[int]]:
    """(baseline G, searched G values): the recipe's G when feasible, else the nearest, and up to MAX_ARMS around it."""
    shape = trainer_batch_shape({**{k: a.value(k) for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                                            "num_iterations")},
                                 "steps_per_generation": a.recipe_values.get("steps_per_generation")}, a.world_size)
    g0 = _int(a.value("num_generations"), trl_default("num_generations"))
    gbs = a.recipe_values.get("generation_batch_size")
    space = feasible_space(shape, sorted({*CANDIDATE_GENERATIONS, g0}), [gbs] if isinstance(gbs, int) else None)
    gens = sorted(space.generations)
    if not gens:
        raise StudyError([Problem(path="--gpus", message=(
            f"no num_generations in {sorted({*CANDIDATE_GENERATIONS, g0})} is feasible with {a.world_size} training "
            f"process(es); {'; '.join(space.suggestions)}"))])
    base = nearest_generations(gens, g0)  # the default-arm rule plan's baseline uses
    near = sorted(gens, key=lambda g: (abs(math.log(g / base)), g))[:MAX_ARMS]
    return base, sorted(near)


def reward_range(a: InitAnswers) -> float:
    """The held-out reward's range: the recipe's weights summed, each reward taken as scoring in [0, 1]."""
    weights = a.recipe_values.get("reward_weights")
    if isinstance(weights, list) and weights and all(isinstance(w, (int, float)) for w in weights):
        return float(sum(abs(w) for w in weights))
    names = a.recipe_values.get("reward_funcs")
    if names is None and recipe_stack(a.recipe_values) is OPEN_R1_STACK:
        names = OPEN_R1_DEFAULT_REWARDS
    return float(len(names)) if isinstance(names, list) and names else 1.0


def _evaluation_lines(a: InitAnswers) -> list[str]:
    split = a.recipe_values.get("dataset_test_split")
    lines = ["evaluation:   # held-out prompts every arm is scored on: the objective (eval_final_reward) reads them",
             f"  num_prompts: {EVAL_PROMPTS}"]
    if isinstance(split, str) and split:
        lines.append(f"  split: {_q(split)}   # the recipe's own test split (dataset_test_split)")
    else:
        lines.append("  # split: test   # the dataset's own test split, where it has one; else held out of the training prompts")
    return lines


def _implicit_lines(a: InitAnswers) -> list[str]:
    """For a recipe whose TRL is not known: the keys it leaves out whose default moved between TRL releases,
    written out as the installed TRL fills them, so the study says what it trains (temperature is searched)."""
    if recipe_stack(a.recipe_values) is not None:
        return []  # a known stack: the recipe merge resolves them to that TRL's values, with a note
    keys = [k for k in DRIFTING_KEYS if k != "temperature" and k not in a.recipe_values]
    if not keys:
        return []
    lines = ["trainer:   # keys the recipe leaves out whose TRL default changed between releases, written as the",
             "           # installed TRL fills them: set what the TRL your recipe was written for meant (0.18: beta 0.04, bnpo)"]
    return lines + [f"  {k}: {_q(trl_default(k))}" for k in keys]


def _name(a: InitAnswers) -> str:
    if a.name:
        return a.name
    stem = a.recipe.stem if a.recipe else (a.task or (a.model or "study").split("/")[-1])
    where = f"{a.gpus}gpu" if a.gpus else "cpu"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{stem}-{where}").strip("-").lower()


def _q(v: Any) -> str:
    """A YAML scalar (JSON strings are valid YAML)."""
    return json.dumps(v)


_PROMPT_COLUMNS = ("prompt", "question", "problem", "input", "query", "instruction")
_THINK = ("<think>", "<answer>")


def dataset_lines(dataset: str | None, out: Path) -> list[str]:
    """prompt_column and rewards chosen from the dataset's own columns (a local file's first rows).

    `accuracy` when there is a `solution` or `answer` column; `format` only when the data shows the
    <think>/<answer> layout it scores (a plain `answer` column would score 0 on it every time). A
    dataset whose columns cannot be read here (a hub id) gets accuracy and a comment to check.
    """
    rows: list[dict[str, Any]] = []
    path = Path(str(dataset))
    if not path.is_absolute() and not path.exists():
        path = out.parent / path
    if dataset and path.exists():
        try:
            rows = peek_rows(DataSection(dataset=str(path)))
        except (OSError, ValueError, ImportError):
            rows = []
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if not columns:
        return ["  prompt_column: prompt   # the column holding the prompt (the columns could not be read here)",
                "rewards:   # accuracy reads a `solution` or `answer` column (pip install 'grpo-ablate[math]');",
                "           # add {name: format} only if your prompts ask for <think>...</think><answer>...</answer>",
                "  - {name: accuracy, weight: 1.0}"]
    prompt = next((c for c in _PROMPT_COLUMNS if c in columns), columns[0])
    gold = next((c for c in ("solution", "answer") if c in columns), None)
    text = " ".join(str(v) for r in rows for v in r.values())
    out_lines = [f"  prompt_column: {_q(prompt)}   # of the dataset's columns {columns}"]
    chosen = []
    if gold:
        chosen.append(f"  - {{name: accuracy, weight: 1.0}}   # compares the completion with the `{gold}` column")
    if all(tag in text for tag in _THINK):
        chosen.append("  - {name: format, weight: 1.0}   # the data uses the <think>/<answer> layout")
    if not chosen:
        raise StudyError([Problem(path="--dataset", message=(
            f"no built-in reward fits the columns of {dataset} ({columns}): accuracy needs a `solution` or `answer` "
            f"column, format the <think>/<answer> layout; write a reward function (docs/your-own-run.md §3) "
            f"and name it under rewards: in a study file"))])
    return out_lines + ["rewards:   # chosen from the dataset's columns (accuracy: pip install 'grpo-ablate[math]')",
                        *chosen]


@dataclass(frozen=True)
class Design:
    """What a written study runs: the G values searched (the baseline's first), seeds, a trial's optimizer steps,
    and why (one comment line in the file). `price`: the plan's price of it, where known."""

    generations: tuple[int, ...]
    seeds: int
    steps: int  # a trial's optimizer steps; a branch's, from the branch point on, when `branch`
    why: str
    price: Price | None = None
    branch: bool = False  # budget.branch_from: warmup (one shared prefix per seed, the arms branching past warmup)

    @property
    def trials(self) -> int:
        return len(self.generations) * self.seeds


def seeds_to_decide(arms: int, span: float = 1.0, min_effect: float | None = None) -> int:
    """Seeds per arm Bechhofer's indifference-zone design needs to pick an arm within min_effect of the best with
    probability RACE_CONFIDENCE, when arms vary between seeds as on the built-in tasks (sd SEED_SD_SHARE of the
    reward's range; min_effect REWARD_MIN_EFFECT of it unless given): the race's planned maximum must reach it."""
    effect = min_effect if min_effect is not None else REWARD_MIN_EFFECT * span
    return max(2, bechhofer_seeds(arms, effect, SEED_SD_SHARE * span, RACE_CONFIDENCE))


def effect_for_seeds(arms: int, seeds: int, span: float = 1.0) -> float:
    """The smallest min_effect (reward units, rounded up to three significant digits) at which Bechhofer's design picks
    within it of the best of `arms` with probability RACE_CONFIDENCE from `seeds` seeds (sd as seeds_to_decide)."""
    sd = SEED_SD_SHARE * span
    exact = brentq(lambda d: bechhofer_pcs(arms, seeds, d, sd) - RACE_CONFIDENCE, 1e-6 * sd, 100 * sd, xtol=1e-12)
    step = 10.0 ** (math.floor(math.log10(exact)) - 2)  # three significant digits, rounded up: never below what it needs
    return round(math.ceil(exact / step - 1e-9) * step, 12)


def _by_closeness(base: int, gens: list[int]) -> list[int]:
    """The baseline G first, then the others nearest to it (in ratio) first: the arms dropped last matter most."""
    return [base, *sorted((g for g in gens if g != base), key=lambda g: (abs(math.log(g / base)), g))]


def study_text(a: InitAnswers, out: Path, design: Design | None = None) -> str:
    """The commented study file for these answers (a design that fits no budget when none is given)."""
    base, gens = choose_generations(a)
    span = reward_range(a)
    if design is None:
        arms = tuple(_by_closeness(base, gens)[:UNPRICED_ARMS])
        design = Design(arms, seeds_to_decide(len(arms), span, a.min_effect), 20 if a.task else TRIAL_STEPS_CAP,
                        "not fitted to a budget: the full run's price is not known here")
    temp = float(a.value("temperature") or trl_default("temperature"))
    seeds = list(range(design.seeds))
    k = len(design.generations)
    lines = [
        f"# Written by `grpo-ablate init`{f' from {a.recipe.name}' if a.recipe else ''}. Check it, then:",
        f"#   grpo-ablate plan {out.name}",
        f"#   grpo-ablate run {out.name}",
        f"# Design: {design.why}",
        "study:",
        f"  name: {_q(_name(a))}   # the Optuna study name; results go to runs/<name>",
        "  sampler: ablation      # the baseline, then each other G, every arm on the same seeds",
        "  baseline:",
        f"    num_generations: {base}   # {'the recipe' + chr(39) + 's own G' if a.recipe and base == a.value('num_generations') else 'the nearest G this hardware accepts'}",
        f"    temperature: {round(temp, 2)}   # the recipe's{' (as its own TRL meant it)' if a.recipe and 'temperature' not in a.recipe_values else ''}" if a.recipe else f"    temperature: {round(temp, 2)}",
        f"  seeds: {seeds}   # the race's planned maximum: Bechhofer's design picks an arm within min_effect of",
        f"  #   the best of {k} with probability {RACE_CONFIDENCE:g} at {design.seeds} seeds when arms vary between seeds as on the",
        f"  #   built-in tasks (sd {SEED_SD_SHARE:.0%} of the reward's range {span:g}); the race usually stops sooner",
        "  racing: {design: group_sequential, confidence: " + f"{RACE_CONFIDENCE:g}" + ", first_round_seeds: 2}   # seeds only where "
        "the answer is still open",
        "  objectives:",
        "    - metric: eval_final_reward   # held-out reward at the end of each trial (docs/your-own-run.md)",
        (f"  min_effect: {a.min_effect:g}   # the smallest held-out reward difference worth acting on (--min-effect)"
         if a.min_effect is not None else
         f"  min_effect: {REWARD_MIN_EFFECT * span:g}   # the smallest held-out reward difference worth acting on: "
         f"{REWARD_MIN_EFFECT:g} per unit of reward range ({span:g} here)" if span != 1 else
         f"  # min_effect: the smallest difference worth acting on; default {REWARD_MIN_EFFECT:g} of a reward in [0, 1]"),
        f"  # budget_gpu_hours: {a.budget or DEFAULT_BUDGET}   # uncomment for a hard cap: no trial starts that would cross "
        "that share of your run",
    ]
    if a.recipe:
        rel = os.path.relpath(a.recipe.resolve(), out.resolve().parent)
        rel = str(a.recipe.resolve()) if rel.startswith("..") else rel
        lines += [f"trainer_from: {_q(rel)}   # used as published; `plan` notes each key it translates"]
        if a.recipe_trl:  # the keys the recipe leaves out are resolved to that TRL's defaults when it merges
            lines += [f"recipe_trl: {_q(a.recipe_trl)}   # the TRL release the recipe was written for"]
        else:
            lines += _implicit_lines(a)
    else:
        lines += ["model:", f"  name_or_path: {_q(a.model or 'builtin:tiny')}", "data:"]
        if a.task:
            lines += [f"  task: {_q(a.task)}   # a built-in offline task: its reward is used when rewards is empty"]
        else:
            lines += [f"  dataset: {_q(a.dataset)}", *dataset_lines(a.dataset, out)]
        lines += ["trainer:   # GRPOConfig keywords, verbatim",
                  f"  per_device_train_batch_size: {a.value('per_device_train_batch_size')}",
                  f"  gradient_accumulation_steps: {a.value('gradient_accumulation_steps')}",
                  f"  max_completion_length: {64 if a.task else 512}",
                  "  learning_rate: 1.0e-5" if a.task else "  learning_rate: 1.0e-6"]
    if a.gpus:
        hw = ["hardware:", f"  gpus: {a.gpus}   # GPUs per trial"]
        if a.vllm == "server":
            hw += ["  vllm: {mode: server, server_gpus: 1}   # training processes = gpus - server_gpus = "
                   f"{a.world_size}"]
        elif a.vllm == "colocate":
            hw += ["  vllm: {mode: colocate}   # vLLM shares the training GPUs"]
        accelerate = recipe_accelerate_config(a.recipe, a.recipe_values) if a.recipe and a.world_size > 1 else None
        if accelerate:  # the recipe's own sharding (recipes.py), not plain DDP; the study's process count wins
            hw += [f"  accelerate_config: {_q(str(accelerate[0]))}   # {accelerate[1]}",
                   f"  num_processes: {a.world_size}   # training processes (wins over the file's num_processes)"]
        hw += ["  # gpu_type: H100   # H100, H200, H20, A100 or L40S: narrows plan's GPU-hour estimate"]
        lines += hw
    lines += _evaluation_lines(a)
    lines += [
        "search:",
        f"  num_generations: {sorted(design.generations)}   # G values feasible with {a.world_size} training process(es), "
        "nearest the baseline's",
        f"  temperature: {round(temp, 2)}   # fixed at the {'recipe' + chr(39) + 's' if a.recipe else 'default'}: the study decides G",
        "budget:",
        f"  max_steps: {design.steps}   # per trial: every arm trains the same optimizer steps"
        + (" from the branch point" if design.branch else ""),
    ]
    if design.branch:
        lines += ["  branch_from: warmup   # per seed the baseline trains once to the end of the recipe's learning-rate "
                  "warmup, checkpointed;",
                  "  #   every arm branches from there (its prefix paid once), so G is compared where the run trains"]
    if a.full_run_prompts:
        lines += [f"  full_run: {{prompts: {a.full_run_prompts}}}   # the training set's rows (--full-run-prompts): "
                  "prices the study in units of the full run"]
    return "\n".join(lines + [""])


def _priced(a: InitAnswers, out: Path, design: Design) -> tuple[Any, Price]:
    """(the study, plan's price of it) for a candidate design, loaded from a temporary file next to --out."""
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(study_text(a, out, design))
        study = load_study(tmp)
        return study, planned_price(study)
    except StudyError as e:
        raise StudyError([Problem(path=p.path, message=p.message.replace(tmp, str(out))) for p in e.problems],
                         str(out)) from None
    finally:
        os.unlink(tmp)


def fit_design(a: InitAnswers, out: Path) -> Design:
    """The design init writes: the most G arms (nearest the baseline first), with the seeds Bechhofer's design
    needs for them and the longest trial up to TRIAL_STEPS_CAP, that the plan prices within the budget (a share of
    the full run, the high end of the estimate). With --branch-from warmup, where the recipe has a learning-rate warmup, the arms branch at its
    end (one shared prefix per seed, counted once) and each branch trains at least MIN_STEPS_PAST_WARMUP steps;
    without warmup each trial trains that many from step 0. Without a price (no full run known here) the unfitted
    design, unless --budget asked for one. StudyError when no design that can decide fits: it says what the
    smallest would cost, and at which min_effect one would fit."""
    base, gens = choose_generations(a)
    order = _by_closeness(base, gens)
    span = reward_range(a)
    unfitted = (a.budget or "").strip().lower() == "none"
    budget = parse_share(a.budget or DEFAULT_BUDGET)
    if budget is None and not unfitted:
        raise StudyError([Problem(path="--budget", message=(
            f"{a.budget!r} is not a share of the full run (e.g. 0.5x), nor `none` (no budget)"))])
    if a.min_effect is not None and not 0 < a.min_effect < span:
        raise StudyError([Problem(path="--min-effect", message=(
            f"{a.min_effect:g} is not a reward difference inside the reward's range (0, {span:g}): give e.g. "
            f"{REWARD_MIN_EFFECT * span:g}"))])
    probe_design = Design(tuple(order[:2]), 2, TRIAL_STEPS_CAP, "probe")
    study, first = _priced(a, out, probe_design)
    est = estimate_trial(study)
    full = est.full_run_steps
    warm = (warmup_steps(study.trainer.get("warmup_steps"), full) or 0) if full else 0  # cost.py: the one rule
    branch = bool(a.branch and full and 0 < warm < full - MIN_STEPS_PAST_WARMUP)
    shortest = MIN_STEPS_PAST_WARMUP if branch or not full else min(full, warm + MIN_STEPS_PAST_WARMUP)
    longest = min((full or 0) - warm, TRIAL_STEPS_CAP) if branch else min(full or 0, max(TRIAL_STEPS_CAP, shortest))
    if unfitted or first.multiple is None or not full:
        if a.budget is not None and not unfitted:
            raise StudyError([Problem(path="--budget", message=f"cannot fit {a.budget}: {first.words()}"
                                      + ("" if a.full_run_prompts else "; or pass --full-run-prompts N"))])
        why = ("not fitted to a budget (--budget none)" if unfitted else f"not fitted to a budget: {first.words()}"
               + ("" if a.full_run_prompts or not a.recipe else " (or pass init --full-run-prompts N)"))
        steps = longest if full else 20 if a.task else TRIAL_STEPS_CAP
        return Design(tuple(order[:UNPRICED_ARMS]), seeds_to_decide(min(UNPRICED_ARMS, len(order)), span, a.min_effect),
                      steps, why, branch=branch)
    assert budget is not None
    past = (f", branched at the end of the recipe's {warm}-step warmup (one prefix per seed, counted once)" if branch
            else f", {MIN_STEPS_PAST_WARMUP}+ past the recipe's {warm}-step warmup" if warm else "")
    smallest: Design | None = None
    for k in range(min(MAX_ARMS, len(order)), 1, -1):
        arms, n = tuple(order[:k]), seeds_to_decide(k, span, a.min_effect)

        def at(steps: int, arms: tuple[int, ...] = arms, n: int = n) -> Design:
            return Design(arms, n, steps, "", branch=branch)

        low = _priced(a, out, at(shortest))[1]
        smallest = Design(arms, n, shortest, "", low, branch)
        if low.multiple is None or low.multiple[1] > budget:
            continue
        steps = shortest
        if longest > shortest:  # the price is affine in the trial's steps: solve for the longest that fits
            high = _priced(a, out, at(longest))[1]
            assert high.multiple is not None
            slope = (high.multiple[1] - low.multiple[1]) / (longest - shortest)
            steps = longest if slope <= 0 else min(longest, shortest + int((budget - low.multiple[1]) / slope))
        priced = _priced(a, out, at(steps))[1]
        while steps > shortest and (priced.multiple is None or priced.multiple[1] > budget):  # rounding in steps
            steps -= 1
            priced = _priced(a, out, at(steps))[1]
        why = (f"{k} G arms x {n} seeds x {steps} steps{past}, raced: the largest design whose planned maximum "
               f"{priced.words().removeprefix('this study ')}, within the budget {fmt_multiple(budget)}")
        return Design(arms, n, steps, why, priced, branch)
    assert smallest is not None and smallest.price is not None and smallest.price.multiple is not None
    need = smallest.price.multiple[1]
    k = len(smallest.generations)
    raise StudyError([Problem(path="--budget", message=(
        f"no study that can decide fits {fmt_multiple(budget)} of your run: the smallest ({k} G arms x "
        f"{smallest.seeds} seeds, the fewest for Bechhofer's design at min_effect "
        f"{a.min_effect if a.min_effect is not None else REWARD_MIN_EFFECT * span:g}, x {smallest.steps} steps{past}) "
        f"{smallest.price.words().removeprefix('this study ')}; pass --budget {math.ceil(need * 10) / 10:g}x to write "
        f"it{_effect_that_fits(a, out, smallest, budget, span)}"))])


def _effect_that_fits(a: InitAnswers, out: Path, smallest: Design, budget: float, span: float) -> str:
    """", or --min-effect E ..." : the smallest min_effect at which the smallest design, with fewer seeds, fits the
    budget (the most seeds that fit, and the effect Bechhofer's design can then tell apart); "" when none fits."""
    for n in range(smallest.seeds - 1, 1, -1):
        priced = _priced(a, out, replace(smallest, seeds=n, price=None))[1]
        if priced.multiple is not None and priced.multiple[1] <= budget:
            effect = effect_for_seeds(len(smallest.generations), n, span)
            if a.min_effect is not None and effect <= a.min_effect:
                continue
            return (f", or accept a larger smallest difference worth acting on: --min-effect {effect:g} (Bechhofer's "
                    f"design then needs {n} seeds, and that study {priced.words().removeprefix('this study ')})")
    return (f"; no min_effect makes one fit: even {len(smallest.generations)} arms x 2 seeds costs more than "
            f"{fmt_multiple(budget)}")


def _input_at(a: InitAnswers, out: Path) -> str | None:
    """Which of init's inputs `out` is ("recipe (--from)", "dataset (--dataset)"), however it is spelled: the
    same file by device and inode, so `sub/../recipe.yaml`, a symlink or a hard link to it all count."""
    inputs = [(a.recipe, "recipe (--from)"), (Path(a.dataset) if a.dataset else None, "dataset (--dataset)")]
    for path, what in inputs:
        if path is None:
            continue
        try:
            if os.path.samefile(out, path):
                return what
        except OSError:  # either does not exist (yet): not the same file
            continue
    return None


def write_study(a: InitAnswers, out: Path, *, force: bool = False) -> Path:
    """Validate the study text, then write it (never over an existing file without force, never over an input
    file even with it). Raises StudyError."""
    if (given := _input_at(a, out)) is not None:  # before --force: an input is never replaced, forced or not
        raise StudyError([Problem(path="--out", message=(
            f"{out} is the {given} init reads, and init never writes over its input; name another file with --out"))])
    if out.exists() and not force:
        raise StudyError([Problem(path="--out", message=f"{out} exists; pass --force to replace it")])
    if a.recipe is not None:
        a.recipe_values = read_recipe(a.recipe).values
    tmp = ""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        text = study_text(a, out, fit_design(a, out))  # StudyError when nothing that can decide fits the budget
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            load_study(tmp)  # StudyError: nothing is written
        except StudyError as e:  # name the file the user asked for, not the temporary one
            raise StudyError(e.problems, str(out)) from None
        os.replace(tmp, out)
    except StudyError as e:  # the user knows the file as --out, not as our temporary name
        raise StudyError([Problem(path=p.path, message=p.message.replace(tmp, str(out)) if tmp else p.message)
                          for p in e.problems], str(out)) from None
    except OSError as e:
        raise StudyError([Problem(path="--out", message=f"cannot write {out}: {e.strerror or e}")]) from None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    return out


def ask_missing(a: InitAnswers, ask: Callable[[str], str] = input, interactive: bool | None = None) -> InitAnswers:
    """Without a recipe: fill what is missing by asking (on a TTY), else StudyError naming the flags."""
    if a.recipe is not None:
        if a.recipe_trl is None and recipe_stack(read_recipe(a.recipe).values) is None and (
                sys.stdin.isatty() if interactive is None else interactive):
            answer = ask(f"TRL version this recipe was written for (its keys left out mean that release's defaults; "
                         f"known: {', '.join(known_releases())}) [the installed one]: ").strip()
            a.recipe_trl = answer or None
        return a
    if a.task is not None or (a.model and a.dataset):
        return a
    if not (sys.stdin.isatty() if interactive is None else interactive):
        raise StudyError([Problem(path="init", message=(
            "give --from RECIPE, or --model and --dataset (or --task NAME for a built-in task), and --gpus N"))])
    if not a.model:
        a.model = ask("Model (hub id or local folder; builtin:tiny with a built-in task): ").strip() or "builtin:tiny"
    if not a.dataset and not a.task:
        tasks = ", ".join(sorted(BUILTIN_TASKS))
        answer = ask(f"Dataset (hub id or file), or a built-in task ({tasks}): ").strip()
        if answer in BUILTIN_TASKS:
            a.task = answer
        else:
            a.dataset = answer
    if not a.gpus:
        answer = ask("GPUs per trial [0]: ").strip()
        a.gpus = int(answer) if answer.isdigit() else 0
        if a.gpus > 1 and a.vllm == "none":
            a.vllm = (ask("vLLM: none, colocate or server [none]: ").strip() or "none")
    return a


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`init`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("init", help="write a commented study file from a recipe (or a few answers), then plan it")
    p.add_argument("--from", dest="recipe", help="an Open R1 or `trl grpo` recipe file, used as published")
    p.add_argument("--recipe-trl", metavar="VERSION", help="the TRL release a `trl grpo` recipe was written for "
                                                            "(its implicit keys take that release's defaults; asked when unknown)")
    p.add_argument("--gpus", type=int, help="GPUs per trial (0: CPU)")
    p.add_argument("--vllm", choices=["none", "server", "colocate"], default="none",
                   help="vLLM generation: server takes one GPU of each trial's block")
    p.add_argument("--model", help="without --from: a hub id or local folder")
    p.add_argument("--dataset", help="without --from: a hub id or a data file")
    p.add_argument("--task", help="without --from: a built-in offline task instead of a dataset")
    p.add_argument("--name", help="the study name (default from the recipe and the hardware)")
    p.add_argument("--out", default="study.yaml", help="the study file to write (default study.yaml)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--budget", help="the study's price as a share of the full run, e.g. 0.5x (default 0.5x where the "
                                    "full run can be priced); none: the design that can decide, at its price")
    p.add_argument("--full-run-prompts", type=int, help="the training set's rows, for a recipe that counts epochs: "
                                                        "prices the study in units of the full run")
    p.add_argument("--min-effect", type=float, help="the smallest held-out reward difference worth acting on "
                                                    "(default 0.05 of the reward's range): sizes the seeds")
    p.add_argument("--branch-from", choices=["warmup", "none"], default="none",
                   help="none (default): every trial from step 0; warmup (where the recipe has one): per seed the "
                        "baseline trains once to the end of warmup and every arm branches from there, which is "
                        "cheaper but measured to change which G is best (README, 'Does branching change the answer?')")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate init`: write the study file, then print its plan."""
    check_out(args.out, "--out")
    answers = InitAnswers(recipe=Path(args.recipe) if args.recipe else None, model=args.model, dataset=args.dataset,
                          task=args.task, gpus=args.gpus or 0, vllm=args.vllm, name=args.name,
                          recipe_trl=getattr(args, "recipe_trl", None),
                          budget=getattr(args, "budget", None), full_run_prompts=getattr(args, "full_run_prompts", None),
                          min_effect=getattr(args, "min_effect", None),
                          branch=getattr(args, "branch_from", "none") == "warmup")
    out = write_study(ask_missing(answers), Path(args.out), force=args.force)
    study = load_study(out)
    print(f"wrote {out}: {planned_price(study).words()}\n")  # the figure plan prints below, from the same call
    print(plan_text(study))
    return EXIT_OK
