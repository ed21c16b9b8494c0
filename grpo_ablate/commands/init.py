"""`grpo-ablate init`: a commented study file from a recipe (or a few answers), validated, then planned.

    grpo-ablate init --from recipes/config_demo.yaml --gpus 8 --vllm server --out study.yaml
    grpo-ablate init --task addition --out tiny.yaml          # no recipe: flags, or questions on a TTY

The study is written to reach a decision: held-out reward (eval_final_reward) as the objective on
held-out prompts, and seeds enough to detect a tenth of the reward's range. The baseline is the
recipe's own num_generations (or the nearest G this hardware accepts) and temperature (as the
recipe's own TRL meant it); the search covers the G values feasible on that hardware around it, a
temperature list around the recipe's, and one budget per trial. The file is checked before it is
written, and an existing file is only replaced with --force.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.commands.common import EXIT_OK, check_out
from grpo_ablate.commands.plan import plan_text
from grpo_ablate.config import load_study
from grpo_ablate.config.inputs import peek_rows
from grpo_ablate.config.recipes import (DRIFTING_KEYS, OPEN_R1_DEFAULT_REWARDS, OPEN_R1_STACK, read_recipe,
                                        recipe_accelerate_config, recipe_stack,
                                        stack_default)
from grpo_ablate.config.schema import DataSection
from grpo_ablate.errors import Problem, StudyError
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.config.trl_releases import known_releases
from grpo_ablate.stats.min_effect import REWARD_MIN_EFFECT
from grpo_ablate.stats.seeds import seeds_needed
from grpo_ablate.config.hardware import trainer_batch_shape
from grpo_ablate.space import feasible_space, nearest_generations
from grpo_ablate.vocab import BUILTIN_TASKS

__all__ = ["run", "InitAnswers", "study_text", "write_study", "ask_missing", "choose_generations", "temperatures_around",
           "seeds_for_detectable"]

CANDIDATE_GENERATIONS = (2, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32, 48, 64)
MAX_ARMS = 5  # G values in the search: the baseline and its nearest feasible neighbours
# The study decides on held-out reward. Seeds are sized so that a difference of DETECTABLE_SHARE of the
# reward's range would be found (80% power, 5% two-sided) when arms vary between seeds as on the built-in
# tasks: a held-out reward sd of at least SEED_SD_SHARE of its range per arm (0.05-0.08 over 40 seeds,
# stats/min_effect.py), uncorrelated between arms (shared/guide/facts.md, round 4).
DETECTABLE_SHARE = 0.10
SEED_SD_SHARE = 0.05
EVAL_PROMPTS = 128


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


def temperatures_around(t: float) -> list[float]:
    """Three temperatures: the recipe's and 0.2 either side (all > 0)."""
    values = {round(t - 0.2, 2), round(t, 2), round(t + 0.2, 2)}
    return sorted(v for v in values if v > 0)


def seeds_for_detectable(share: float = DETECTABLE_SHARE, sd_share: float = SEED_SD_SHARE) -> list[int]:
    """Seeds 0..n-1, n the fewest that detect a difference of `share` of the reward's range (paired by seed,
    arms uncorrelated: the difference's sd is sqrt(2) x an arm's)."""
    n = seeds_needed(share, sd_share * math.sqrt(2)) or 2
    return list(range(max(2, n)))


def _reward_range(a: InitAnswers) -> float:
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


def study_text(a: InitAnswers, out: Path) -> str:
    """The commented study file for these answers."""
    base, gens = choose_generations(a)
    temp = float(a.value("temperature") or trl_default("temperature"))
    temps = temperatures_around(temp)
    seeds = seeds_for_detectable()
    span = _reward_range(a)
    detectable = DETECTABLE_SHARE * span
    lines = [
        f"# Written by `grpo-ablate init`{f' from {a.recipe.name}' if a.recipe else ''}. Check it, then:",
        f"#   grpo-ablate plan {out.name}",
        f"#   grpo-ablate run {out.name}",
        "study:",
        f"  name: {_q(_name(a))}   # the Optuna study name; results go to runs/<name>",
        "  sampler: ablation      # the baseline, then one factor at a time, every arm on the same seeds",
        "  baseline:",
        f"    num_generations: {base}   # {'the recipe' + chr(39) + 's own G' if a.recipe and base == a.value('num_generations') else 'the nearest G this hardware accepts'}",
        f"    temperature: {round(temp, 2)}   # the recipe's{' (as its own TRL meant it)' if a.recipe and 'temperature' not in a.recipe_values else ''}" if a.recipe else f"    temperature: {round(temp, 2)}",
        f"  seeds: {seeds}   # each arm runs once per seed, the same seeds for every arm: with {len(seeds)}, a held-out",
        f"  #   reward difference of about {detectable:.2g} ({DETECTABLE_SHARE:.0%} of its range {span:g}) is detectable",
        f"  #   (80% power, 5% two-sided) if arms vary between seeds as on the built-in tasks (sd {SEED_SD_SHARE:.0%} of the range)",
        "  objectives:",
        "    - metric: eval_final_reward   # held-out reward at the end of each trial (docs/your-own-run.md)",
        (f"  min_effect: {REWARD_MIN_EFFECT * span:g}   # the smallest held-out reward difference worth acting on: "
         f"{REWARD_MIN_EFFECT:g} per unit of reward range ({span:g} here)" if span != 1 else
         f"  # min_effect: the smallest difference worth acting on; default {REWARD_MIN_EFFECT:g} of a reward in [0, 1]"),
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
    steps = 20 if a.task else 100
    lines += [
        "search:",
        f"  num_generations: {gens}   # the G values feasible with {a.world_size} training process(es)",
        f"  temperature: {temps}   # around the {'recipe' + chr(39) + 's' if a.recipe else 'default'} {round(temp, 2)}",
        "budget:",
        f"  max_steps: {steps}   # per trial: every arm trains the same optimizer steps",
        "",
    ]
    return "\n".join(lines)


def write_study(a: InitAnswers, out: Path, *, force: bool = False) -> Path:
    """Validate the study text, then write it (never over an existing file without force). Raises StudyError."""
    if out.exists() and not force:
        raise StudyError([Problem(path="--out", message=f"{out} exists; pass --force to replace it")])
    if a.recipe is not None:
        a.recipe_values = read_recipe(a.recipe).values
    text = study_text(a, out)
    tmp = ""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            load_study(tmp)  # StudyError: nothing is written
        except StudyError as e:  # name the file the user asked for, not the temporary one
            raise StudyError(e.problems, str(out)) from None
        os.replace(tmp, out)
    except StudyError as e:  # the user knows the file as --out, not as our temporary name
        raise StudyError([Problem(path=p.path, message=p.message.replace(tmp, str(out)))
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


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate init`: write the study file, then print its plan."""
    check_out(args.out, "--out")
    answers = InitAnswers(recipe=Path(args.recipe) if args.recipe else None, model=args.model, dataset=args.dataset,
                          task=args.task, gpus=args.gpus or 0, vllm=args.vllm, name=args.name,
                          recipe_trl=getattr(args, "recipe_trl", None))
    out = write_study(ask_missing(answers), Path(args.out), force=args.force)
    print(f"wrote {out}\n")
    print(plan_text(load_study(out)))
    return EXIT_OK
