"""The study file `grpo-ablate init` drafts: from a recipe (or a few answers) and the hardware, the arms, the
screen, the confirm stage fitted to a budget (plan/design.py's `fit`), and the commented YAML text.

    python -c "from grpo_ablate.plan.draft import InitAnswers, study_text; from pathlib import Path; \
print(study_text(InitAnswers(task='addition'), Path('tiny.yaml')))"

The two stages (commands/init.py's docstring gives the command's contract):
- a screen that costs no training (`screen:`, preflight/screen.py) over every feasible G from 2 to 64;
- a confirm stage: 2-4 arms that span G values that matter (the recipe's G, about half and about twice it, not
  its neighbours; a second temperature where the recipe leaves its temperature to a default), trained past the
  recipe's learning-rate warmup with the seeds the budget buys (at least 3), raced.
A candidate design is priced by writing its text to a temporary file beside the study and loading it with
config's loader, so the price is plan's own (plan/price.py). Writing the final file (never over an input,
validated in full first) and asking for missing answers stay in the command.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.config import load_study as load_study_file
from grpo_ablate.config.hardware import trainer_batch_shape
from grpo_ablate.config.inputs import peek_rows
from grpo_ablate.config.recipes import (DRIFTING_KEYS, OPEN_R1_DEFAULT_REWARDS, OPEN_R1_STACK,
                                        recipe_accelerate_config, recipe_stack, stack_default)
from grpo_ablate.config.schema import DataSection
from grpo_ablate.core.cost import Price, fmt_multiple, parse_share, warmup_steps
from grpo_ablate.core.errors import Problem, StudyError
from grpo_ablate.plan.estimate import estimate_trial
from grpo_ablate.plan.design import (MIN_SEEDS, MIN_STEPS_PAST_WARMUP, NEIGHBOUR_RATIO, RACE_CONFIDENCE,
                                     TRIAL_STEPS_CAP, Fitted, Shape, fit, resolution, second_temperature,
                                     seeds_to_decide, spanning_generations, trial_bounds)
from grpo_ablate.plan.price import planned_price
from grpo_ablate.core.space import feasible_space, nearest_generations
from grpo_ablate.stats.min_effect import REWARD_MIN_EFFECT
from grpo_ablate.trl_facts.fields import trl_default

__all__ = ["InitAnswers", "Arms", "study_text", "choose_generations", "choose_arms", "fit_design", "Written",
           "reward_range", "SCREEN_GENERATIONS", "DEFAULT_BUDGET", "BRANCH_CHOICES", "AccelerateConfig", "accelerate_config"]

# The G values the screen predicts for, where the hardware accepts them: the wide range a screen costs nothing to
# cover (advise's one sampling predicts every G), 2 to 64.
SCREEN_GENERATIONS = (2, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32, 48, 64)
EVAL_PROMPTS = 128
# The budget a written study fits (--budget): a share of the full run's GPU-hours. A tuning study is worth
# running only at a fraction of the run it tunes; half a run is the default, one whole extra run the ceiling
# users name.
DEFAULT_BUDGET = "0.5x"
SCREEN_K, SCREEN_PROMPTS, SCREEN_PROBE_STEPS = 16, 64, 2  # advise's samples per prompt and prompts; probe steps
UNPRICED_STEPS = TRIAL_STEPS_CAP  # an unpriced study's trial length (20 for a built-in task, which is short)
BRANCH_CHOICES = {"auto": ("scratch", "branch"), "none": ("scratch",), "warmup": ("branch",)}


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
    budget: str | None = None  # --budget: a share of the full run ("0.5x"); None: DEFAULT_BUDGET; "none": no cap
    full_run_prompts: int | None = None  # --full-run-prompts: the training set's rows, when the recipe counts epochs
    full_run_steps: int | None = None  # --full-run-steps: the full run's optimizer steps
    unpriced: bool = False  # --unpriced: write a study whose price is not known (no full-run size)
    min_effect: float | None = None  # --min-effect: in reward units; None: REWARD_MIN_EFFECT of the reward's range
    branch: str = "auto"  # --branch-from: auto (from step 0 where it fits, else branched), none, warmup
    recipe_values: dict[str, Any] = field(default_factory=dict)
    recipe_trl: str | None = None  # the TRL release a `trl grpo` recipe was written for (trl_facts/releases.py)

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
    """(baseline G, every feasible G of SCREEN_GENERATIONS): the recipe's G when feasible, else the nearest."""
    shape = trainer_batch_shape({**{k: a.value(k) for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                                            "num_iterations")},
                                 "steps_per_generation": a.recipe_values.get("steps_per_generation")}, a.world_size)
    g0 = _int(a.value("num_generations"), trl_default("num_generations"))
    gbs = a.recipe_values.get("generation_batch_size")
    space = feasible_space(shape, sorted({*SCREEN_GENERATIONS, g0}), [gbs] if isinstance(gbs, int) else None)
    gens = sorted(space.generations)
    if not gens:
        raise StudyError([Problem(path="--gpus", message=(
            f"no num_generations in {sorted({*SCREEN_GENERATIONS, g0})} is feasible with {a.world_size} training "
            f"process(es); {'; '.join(space.suggestions)}"))])
    return nearest_generations(gens, g0), gens  # the default-arm rule plan's baseline uses


@dataclass(frozen=True)
class Arms:
    """The confirm stage's candidates: G values (the baseline's first) and temperatures (the baseline's first);
    `guessed`: the recipe leaves its temperature to a default, so a second one is an arm."""

    generations: tuple[int, ...]
    temperatures: tuple[float, ...]
    screened: tuple[int, ...]
    guessed: bool

    @property
    def count(self) -> int:
        return len(self.generations) + len(self.temperatures) - 1


def choose_arms(a: InitAnswers) -> Arms:
    """The confirm stage's candidate arms (2-4): the baseline G, about half and twice it, and a second temperature
    where the recipe's own is a default (every arm at the baseline's temperature but that one)."""
    base, gens = choose_generations(a)
    temp = float(a.value("temperature") or trl_default("temperature"))
    guessed = "temperature" not in a.recipe_values
    temps: tuple[float, ...] = (round(temp, 2),)
    if guessed:
        temps += (second_temperature(temp),)
    return Arms(tuple(spanning_generations(base, gens)), temps, tuple(gens), guessed)


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


def _name(a: InitAnswers) -> str:
    """The study's name: the recipe (or task), its model unless the recipe's name already says it, the hardware.
    Open R1 keeps one config_demo.yaml per model, so the model is what tells two such studies apart."""
    if a.name:
        return a.name
    stem = a.recipe.stem if a.recipe else (a.task or (a.model or "study").split("/")[-1])
    model = str((a.recipe_values.get("model_name_or_path") if a.recipe else a.model) or "").rstrip("/").split("/")[-1]
    model = "" if not model or model.lower() in stem.lower() or model.startswith("builtin:") else model
    where = f"{a.gpus}gpu" if a.gpus else "cpu"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(x for x in (stem, model, where) if x)).strip("-").lower()


@dataclass(frozen=True)
class Written:
    """What init writes: the arms, the confirm stage's shape, the min_effect, and why (comment lines)."""

    arms: Arms
    shape: Shape
    min_effect: float
    why: tuple[str, ...] = ()
    price: Price | None = None


@dataclass(frozen=True)
class AccelerateConfig:
    """The accelerate config a multi-GPU recipe study names: `source` (where it is), `written` (the path in the
    study file, relative to it), `copy` (a bundled config copied beside the study, so the file names no path inside
    this package's checkout), `why` (its comment)."""

    source: Path
    written: str
    copy: bool
    why: str


def accelerate_config(a: InitAnswers, out: Path) -> AccelerateConfig | None:
    found = recipe_accelerate_config(a.recipe, a.recipe_values) if a.recipe and a.world_size > 1 else None
    if found is None:
        return None
    source, why = found
    bundled = not any(folder == "accelerate_configs" for folder in source.parts)  # not an Open R1 checkout's own
    if bundled:
        return AccelerateConfig(source, f"accelerate/{source.name}", True, f"{why}; copied beside this file")
    return AccelerateConfig(source, os.path.relpath(source.resolve(), out.resolve().parent), False, why)


def study_text(a: InitAnswers, out: Path, w: Written | None = None, *, final: bool = True) -> str:
    """The commented study file for these answers (`w`: init's design; an unpriced default when not given).
    `final` False: the accelerate config named where it is (a candidate priced before anything is copied)."""
    if w is None:
        arms = choose_arms(a)
        effect = a.min_effect if a.min_effect is not None else REWARD_MIN_EFFECT * reward_range(a)
        w = Written(arms, Shape(seeds_to_decide(arms.count, reward_range(a), effect), 20 if a.task else UNPRICED_STEPS,
                                "scratch"), effect, ("not priced: the full run's size is not known here",))
    arms, shape = w.arms, w.shape
    base, temp = arms.generations[0], arms.temperatures[0]
    span = reward_range(a)
    lines = [
        f"# Written by `grpo-ablate init`{f' from {a.recipe.name}' if a.recipe else ''}. Check it, then:",
        f"#   grpo-ablate plan {out.name}",
        f"#   grpo-ablate run {out.name}      # the screen first (no training)"
        + (", then the confirm stage" if shape.confirm else "; nothing is trained (screen.confirm: false)"),
        *(f"# {line}" for why in w.why for line in _wrap(why)),
        "study:",
        f"  name: {_q(_name(a))}   # the Optuna study name; results go to runs/<name>",
        "  sampler: ablation      # the baseline, then each other arm, every arm on the same seeds",
        "  baseline:",
        f"    num_generations: {base}   # {'the recipe' + chr(39) + 's own G' if a.recipe and base == a.value('num_generations') else 'the nearest G this hardware accepts'}",
        f"    temperature: {temp:g}   # "
        + ("the recipe's" if not arms.guessed else "the default the recipe leaves it to (as its own TRL meant it)"
           if a.recipe else "TRL's default"),
        f"  seeds: {list(range(shape.seeds))}   # the confirm stage's planned maximum: the seeds the budget buys (at least "
        f"{MIN_SEEDS}, the fewest anything is tested from)",
        "  racing: {design: elimination, confidence: " + f"{RACE_CONFIDENCE:g}" + f", first_round_seeds: {MIN_SEEDS}}}"
        "   # Kim & Nelson: an arm stops taking seeds once it is eliminated",
        "  objectives:",
        "    - metric: eval_final_reward   # held-out reward at the end of each trial (docs/your-own-run.md)",
        f"  min_effect: {w.min_effect:g}   # the smallest held-out reward difference this study decides on "
        f"({w.min_effect / span:.1%} of the reward's range {span:g}); the race's indifference zone",
        f"  # budget_gpu_hours: {a.budget if a.budget and a.budget != 'none' else DEFAULT_BUDGET}   # uncomment for a hard "
        "cap: no trial starts that would cross that share of your run",
    ]
    if a.recipe:
        rel = os.path.relpath(a.recipe.resolve(), out.resolve().parent)
        lines += [f"trainer_from: {_q(rel)}   # used as published (relative to this file); `plan` notes each key it "
                  "translates"]
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
        acc = accelerate_config(a, out)
        if acc:  # the recipe's own sharding (recipes.py), not plain DDP; the study's process count wins
            hw += [f"  accelerate_config: {_q(acc.written if final else str(acc.source))}   # {acc.why}",
                   f"  num_processes: {a.world_size}   # training processes (wins over the file's num_processes)"]
        hw += ["  # gpu_type: H100   # H100, H200, H20, A100 or L40S: narrows plan's GPU-hour estimate"]
        lines += hw
    lines += _evaluation_lines(a)
    temps = list(arms.temperatures)
    lines += [
        "search:",
        f"  num_generations: {sorted(arms.generations)}   # the confirm stage's arms: the recipe's G, about half and "
        f"twice it (never a neighbour within {NEIGHBOUR_RATIO:g}x); the screen drops those it shows dominated",
        (f"  temperature: {temps}   # the baseline's, and a second one (an arm at the baseline's G): the recipe leaves "
         "its temperature to a default" if len(temps) > 1 else
         f"  temperature: {temps[0]:g}   # the recipe's, fixed: the study decides G"),
        "screen:   # before any training (`grpo-ablate screen`; `run` starts with it): advise on the training prompts",
        "          # with the starting model, a probe of the arms on this hardware; arms it shows dominated are dropped",
        f"  generations: {list(arms.screened)}   # predicted for every feasible G from 2 to 64 (only the arms above train)",
        f"  k: {SCREEN_K}   # completions sampled per prompt",
        f"  prompts: {SCREEN_PROMPTS}   # training prompts sampled",
        f"  probe_steps: {SCREEN_PROBE_STEPS}   # optimizer steps per arm in the probe",
    ]
    if not shape.confirm:
        lines += ["  confirm: false   # the screen alone: no deciding confirm stage fits the budget (see Design above); "
                  "true trains the arms below"]
    lines += ["budget:",
              f"  max_steps: {shape.steps}   # per trial: every arm trains the same optimizer steps"
              + (" from the branch point" if shape.start == "branch" else "")]
    if shape.start == "branch":
        lines += ["  branch_from: warmup   # per seed the baseline trains once to the end of the recipe's learning-rate "
                  "warmup, checkpointed;",
                  "  #   every arm branches from there (its prefix paid once): the answer is about G from that step on"]
    full = _full_run_lines(a, base)
    lines += full
    return "\n".join(lines + [""])


def _full_run_lines(a: InitAnswers, base: int) -> list[str]:
    """budget.full_run from --full-run-steps / --full-run-prompts (a recipe fills the rest of it when it merges)."""
    if a.full_run_steps:
        return [f"  full_run: {{max_steps: {a.full_run_steps}}}   # the full run's optimizer steps (--full-run-steps): "
                "prices the study in units of it"]
    if a.full_run_prompts:
        extra = "" if a.recipe else (f", num_train_epochs: {trl_default('num_train_epochs'):g}, num_generations: {base}")
        return [f"  full_run: {{prompts: {a.full_run_prompts}{extra}}}   # the training set's rows (--full-run-prompts)"
                + ("" if a.recipe else ", TRL's default epochs: edit to your run's") + ": prices the study in units of it"]
    return []


def _wrap(text: str, width: int = 112) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def _priced(a: InitAnswers, out: Path, w: Written) -> tuple[Any, Price]:
    """(the study, plan's price of it) for a candidate design, loaded from a temporary file next to --out."""
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(study_text(a, out, w, final=False))
        study = load_study_file(tmp)  # config's loader: a candidate is priced, not yet checked for the warmup
        return study, planned_price(study)
    except StudyError as e:
        raise StudyError([Problem(path=p.path, message=p.message.replace(tmp, str(out))) for p in e.problems],
                         str(out)) from None
    finally:
        os.unlink(tmp)


def _shaped(study: Any, shape: Shape) -> Any:
    """The loaded candidate study with another confirm-stage shape (seeds, trial steps, branch point, confirm on or
    off): what study_text would write for it, without writing and re-reading a file per candidate (the final
    text is written, loaded and priced again; tests/test_init.py checks the two prices agree)."""
    st = study.study.model_copy(update={"seeds": list(range(shape.seeds))})
    budget = study.budget.model_copy(update={"max_steps": shape.steps,
                                             "branch_from": "warmup" if shape.start == "branch" else None})
    update: dict[str, Any] = {"study": st, "budget": budget}
    if study.file.screen is not None:
        update["screen"] = study.file.screen.model_copy(update={"confirm": shape.confirm})
    return replace(study, file=study.file.model_copy(update=update))


def _full_run_unknown(a: InitAnswers, why: str) -> StudyError:
    data = (f"its dataset {a.recipe_values.get('dataset_name')!r} is read from the hub, which this machine does not "
            "read" if a.recipe and a.recipe_values.get("dataset_name") else why)
    return StudyError([Problem(path="--full-run-prompts", message=(
        f"the full run's size is not known here ({data}), so the study cannot be priced in units of it: pass "
        f"--full-run-prompts N (the training split's rows; the recipe's epochs and G count the steps) or "
        f"--full-run-steps N (the run's optimizer steps), or --unpriced to write a study without a price"))])


def fit_design(a: InitAnswers, out: Path) -> Written:
    """The design init writes: the screen, then the confirm stage plan/design.fit sizes to the budget (a share of
    the full run, the high end of plan's estimate): from step 0 where a deciding design fits that way, else branched
    at the end of the warmup (as --branch-from allows), else the screen alone saying what the confirm stage would
    cost. StudyError when the full run's size is unknown (unless --unpriced), or even the screen does not fit."""
    arms = choose_arms(a)
    span, k = reward_range(a), arms.count
    if a.min_effect is not None and not 0 < a.min_effect < span:
        raise StudyError([Problem(path="--min-effect", message=(
            f"{a.min_effect:g} is not a reward difference inside the reward's range (0, {span:g}): give e.g. "
            f"{REWARD_MIN_EFFECT * span:g}"))])
    unfitted = (a.budget or "").strip().lower() == "none"
    budget = math.inf if unfitted else parse_share(a.budget or DEFAULT_BUDGET)
    if budget is None:
        raise StudyError([Problem(path="--budget", message=(
            f"{a.budget!r} is not a share of the full run (e.g. 0.5x), nor `none` (no budget)"))])
    if a.branch not in BRANCH_CHOICES:
        raise StudyError([Problem(path="--branch-from", message=f"{a.branch!r}: give one of {sorted(BRANCH_CHOICES)}")])
    asked = a.min_effect if a.min_effect is not None else REWARD_MIN_EFFECT * span
    study, first = _priced(a, out, Written(arms, Shape(MIN_SEEDS, TRIAL_STEPS_CAP, "scratch"), asked))
    full = estimate_trial(study).full_run_steps
    if not full or first.multiple is None:
        if not a.unpriced:
            raise _full_run_unknown(a, first.words().removeprefix("this study's price in units of your run is unknown: "))
        seeds = seeds_to_decide(k, span, asked)
        return Written(arms, Shape(seeds, 20 if a.task else UNPRICED_STEPS, "scratch"), asked, (
            f"Design: not priced (--unpriced): {first.words()}.",
            f"{k} arms x {seeds} seeds (what Bechhofer's design needs at min_effect {asked:g}); whether a trial "
            "ends past the run's learning-rate warmup cannot be checked without the run's length."))

    @lru_cache(maxsize=None)
    def price(shape: Shape) -> float:
        multiple = planned_price(_shaped(study, shape)).multiple
        return math.inf if multiple is None else multiple[1]

    warm = warmup_steps(study.trainer, full) or 0  # cost.py: the one warmup rule
    if BRANCH_CHOICES[a.branch] == ("branch",) and trial_bounds("branch", full, warm) is None:
        raise StudyError([Problem(path="--branch-from", message=(
            f"warmup, but the recipe's run of {full} steps has {'no learning-rate warmup' if not warm else f'a {warm}-step warmup that leaves no room for a branch'}"
            f" to branch at: use --branch-from auto or none"))])
    fitted = fit(arms=k, span=span, min_effect=a.min_effect, budget=budget, full_steps=full, warmup=warm,
                 starts=BRANCH_CHOICES[a.branch], price=price)  # type: ignore[arg-type]
    if fitted.price > budget:  # the screen alone: even it does not fit
        raise StudyError([Problem(path="--budget", message=(
            f"even the screen alone costs {fmt_multiple(fitted.price)} of your run, more than {fmt_multiple(budget)}: "
            f"pass --budget {math.ceil(fitted.price * 100) / 100:g}x"))])
    final = _priced(a, out, Written(arms, fitted.shape, fitted.min_effect))[1]
    return Written(arms, fitted.shape, fitted.min_effect, _why(a, arms, fitted, final, budget, full, warm, price), final)


def _why(a: InitAnswers, arms: Arms, fitted: Fitted, final: Price, budget: float, full: int, warm: int,
         price: Callable[[Shape], float]) -> tuple[str, ...]:
    """The design's comment lines: what it is, what it costs, what it resolves, and what it gave up."""
    shape, k = fitted.shape, arms.count
    where = (f"branched at the end of the recipe's {warm}-step warmup (one prefix per seed, counted once)"
             if shape.start == "branch" else
             f"from step 0, {shape.steps - warm} past the recipe's {warm}-step warmup" if warm else "from step 0")
    cap = "no budget" if budget == math.inf else f"the budget {fmt_multiple(budget)}"
    words = final.words().removeprefix("this study ")
    if not shape.confirm:
        assert fitted.wanted is not None
        want, cost = fitted.wanted
        return (f"Design: the screen alone (screen.confirm: false): {words}. No confirm stage that decides fits {cap}: "
                f"the cheapest ({k} arms x {want.seeds} seeds x {want.steps} steps, "
                f"{'branched at the warmup' if want.start == 'branch' else 'from step 0'}) costs at most "
                f"{fmt_multiple(cost)} of your run; to train it, set screen.confirm: true (or run init again with --budget "
                f"{math.ceil(cost * 10) / 10:g}x). The screen predicts which arms are dominated; it does not decide.",)
    out = [f"Design: {k} arms x {shape.seeds} seeds x {shape.steps} steps {where}, raced: {words}, within {cap}."]
    res = resolution(k, shape.seeds, reward_range(a))
    out.append("Resolves: " + (res.words(fmt_multiple(*final.multiple) if final.multiple else None) if res else
                               "nothing (fewer than two arms)"))
    if fitted.resolved:
        need = seeds_to_decide(k, reward_range(a), None)
        out.append(f"min_effect {fitted.min_effect:g} is what {shape.seeds} seeds resolve: the default "
                   f"({REWARD_MIN_EFFECT:g} of the range) needs {need} seeds, at most "
                   f"{fmt_multiple(price(Shape(need, shape.steps, shape.start)))} of your run (pass --budget to buy them).")
    if shape.start == "branch" and "scratch" in BRANCH_CHOICES[a.branch]:
        scratch = price(Shape(MIN_SEEDS, min(full, warm + MIN_STEPS_PAST_WARMUP), "scratch"))
        out.append(f"Branched because from step 0 the smallest deciding design ({k} arms x {MIN_SEEDS} seeds x "
                   f"{min(full, warm + MIN_STEPS_PAST_WARMUP)} steps) costs at most {fmt_multiple(scratch)} of your "
                   f"run, over {cap}. The answer is about G from step {warm} on, after a warmup at G="
                   f"{arms.generations[0]}; on the CPU benchmark branching past a warmup of a tenth of the run moved the "
                   "answer towards the warmup's G: as often within 0.05 of the run's best as from step 0, less often "
                   "within 0.02 (docs/your-own-run.md, 'Does branching change the answer?').")
    return tuple(out)
