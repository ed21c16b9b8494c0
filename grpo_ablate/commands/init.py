"""`grpo-ablate init`: a commented study file from a recipe (or a few answers), validated, then planned.

    grpo-ablate init --from recipes/config_demo.yaml --gpus 8 --vllm server --out study.yaml
    grpo-ablate init --task addition --out tiny.yaml          # no recipe: flags, or questions on a TTY

The baseline is the recipe's own num_generations (or the nearest G this hardware accepts); the
search covers the G values feasible on that hardware around it, a temperature list around the
recipe's, two seeds, and one budget per trial. The file is checked before it is written, and an
existing file is only replaced with --force.
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
from grpo_ablate.config.recipes import read_recipe
from grpo_ablate.config.schema import DataSection
from grpo_ablate.errors import Problem, StudyError
from grpo_ablate.config.trainer_fields import trl_default
from grpo_ablate.space import BatchShape, feasible_space, nearest_generations
from grpo_ablate.vocab import BUILTIN_TASKS

__all__ = ["run", "InitAnswers", "study_text", "write_study", "ask_missing", "choose_generations", "temperatures_around"]

CANDIDATE_GENERATIONS = (2, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32, 48, 64)
MAX_ARMS = 5  # G values in the search: the baseline and its nearest feasible neighbours
SEEDS = (0, 1)


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

    def value(self, key: str) -> Any:
        v = self.recipe_values.get(key)
        return trl_default(key) if v is None else v

    @property
    def world_size(self) -> int:
        if self.gpus <= 0:
            return 1
        return max(1, self.gpus - 1) if self.vllm == "server" else self.gpus


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def choose_generations(a: InitAnswers) -> tuple[int, list[int]]:
    """(baseline G, searched G values): the recipe's G when feasible, else the nearest, and up to MAX_ARMS around it."""
    shape = BatchShape(world_size=a.world_size,
                       per_device_train_batch_size=_int(a.value("per_device_train_batch_size"), trl_default("per_device_train_batch_size")),
                       gradient_accumulation_steps=_int(a.value("gradient_accumulation_steps"), trl_default("gradient_accumulation_steps")),
                       steps_per_generation=a.recipe_values.get("steps_per_generation"))
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
    lines = [
        f"# Written by `grpo-ablate init`{f' from {a.recipe.name}' if a.recipe else ''}. Check it, then:",
        f"#   grpo-ablate plan {out.name}",
        f"#   grpo-ablate run {out.name}",
        "study:",
        f"  name: {_q(_name(a))}   # the Optuna study name; results go to runs/<name>",
        "  sampler: ablation      # the baseline, then one factor at a time, every arm on the same seeds",
        "  baseline:",
        f"    num_generations: {base}   # {'the recipe' + chr(39) + 's own G' if a.recipe and base == a.value('num_generations') else 'the nearest G this hardware accepts'}",
        f"    temperature: {round(temp, 2)}",
        f"  seeds: {list(SEEDS)}        # each arm runs once per seed: more seeds, tighter comparisons",
        "  objectives:",
        "    - metric: reward_per_hour   # see docs/your-own-run.md for which objective to pick",
    ]
    if a.recipe:
        rel = os.path.relpath(a.recipe.resolve(), out.resolve().parent)
        rel = str(a.recipe.resolve()) if rel.startswith("..") else rel
        lines += [f"trainer_from: {_q(rel)}   # used as published; `plan` notes each key it translates"]
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
        lines += hw
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
    if a.recipe is not None or a.task is not None or (a.model and a.dataset):
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
                          task=args.task, gpus=args.gpus or 0, vllm=args.vllm, name=args.name)
    out = write_study(ask_missing(answers), Path(args.out), force=args.force)
    print(f"wrote {out}\n")
    print(plan_text(load_study(out)))
    return EXIT_OK
