"""The study file: schema, loading and validation that reports every problem at once.

    grpo-ablate validate studies/tiny-cpu.yaml

A study file has the sections study, model, data, rewards, trainer (GRPOConfig keywords
verbatim), trainer_from (a recipe file the trainer section starts from), hardware, search,
budget and compare. Each field's comment below is its documentation (README links here).

Validation happens in three layers, and all of them run before anything is reported:
1. the file itself (missing, unreadable, empty, malformed YAML, not a mapping): one line, stop;
2. the schema (types, unknown keys with a did-you-mean) and the trainer keys against the
   installed TRL's GRPOConfig fields;
3. the meaning: feasible (num_generations, generation_batch_size) pairs on this hardware,
   temperature > 0, objectives/pruner/sampler combinations, budget.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from grpo_ablate.space import BatchShape, FeasibleSpace, feasible_space

__all__ = [
    "Study",
    "StudyError",
    "Problem",
    "load_study",
    "apply_overrides",
    "trainer_field_names",
]

# TRL's own defaults, for the keys the feasible space reads when the study leaves them out.
TRL_DEFAULTS = {
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "per_device_eval_batch_size": 8,
    "temperature": 1.0,
    "num_generations": 8,
}

# Keys older recipes carry that current TRL no longer has, with what to do instead.
REMOVED_TRAINER_KEYS = {
    "max_prompt_length": (
        "was removed from TRL (0.28); prompts are no longer truncated by the trainer: "
        "filter long prompts out of the dataset instead (data.max_prompt_tokens)"
    ),
    "warmup_ratio": (
        "was folded into warmup_steps by transformers 5: write warmup_steps: 0.1 "
        "(a value below 1 is a fraction of the total steps)"
    ),
}

# Keys grpo-ablate sets per trial; a value in `trainer` would be overwritten, so say so.
OWNED_TRAINER_KEYS = {
    "output_dir": "each trial writes to <study output_dir>/trials/<n>; set study.output_dir instead",
    "auto_find_batch_size": "TRL rejects it for GRPO (shrinking the batch breaks whole groups)",
}


class Problem(BaseModel):
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class StudyError(Exception):
    """An invalid study: every problem found, each with its key path."""

    def __init__(self, problems: list[Problem], source: str = ""):
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        if len(problems) == 1 and not problems[0].path:
            super().__init__(f"{head}{problems[0].message}")
        else:
            lines = "\n".join(f"  - {p}" for p in problems)
            super().__init__(f"{head}the study is not valid, {len(problems)} problem(s):\n{lines}")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Objective(_Section):
    metric: str = "reward_per_hour"  # one of grpo_ablate.metrics.METRICS
    direction: Literal["maximize", "minimize"] | None = None  # default: the metric's natural direction


class StudySection(_Section):
    name: str  # the Optuna study name; also names the run folder
    output_dir: str | None = None  # default runs/<name>, relative to the current directory
    storage: str | None = None  # Optuna storage URL; default a journal file in output_dir (safe for parallel workers)
    sampler: Literal["tpe", "random", "gp", "grid", "ablation"] = "tpe"
    sampler_seed: int | None = 0  # seeds the sampler itself, so the same study proposes the same trials
    pruner: Literal["none", "median", "hyperband"] = "none"
    n_trials: int | None = Field(default=None, ge=1)  # total over all runs/workers; grid/ablation default: the plan size
    timeout: float | None = Field(default=None, gt=0)  # seconds for the whole study (this invocation)
    objectives: list[Objective] = Field(default_factory=lambda: [Objective()])
    seeds: list[int] = Field(default_factory=lambda: [0])  # training seeds; grid/ablation repeat every arm over them
    baseline: dict[str, float | int] = Field(default_factory=dict)  # ablation baseline, e.g. {num_generations: 8}
    workers: int = Field(default=1, ge=1)  # parallel trial processes on this machine
    trial_timeout: float | None = Field(default=3600, gt=0)  # seconds before a trial is stopped and failed
    max_consecutive_failures: int = Field(default=5, ge=1)  # the study stops after this many failures in a row
    heartbeat_interval: int = Field(default=60, ge=1)  # RDB storages: seconds between a running trial's heartbeats
    grace_period: int | None = None  # RDB storages: a trial silent this long is failed and retried (default 3x interval)
    max_retry: int = Field(default=2, ge=0)  # how often a trial whose worker died is retried


class ModelSection(_Section):
    name_or_path: str = "builtin:tiny"  # a hub id, a local folder, or builtin:tiny (offline, built from a config)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    attn_implementation: str | None = None  # e.g. flash_attention_2 on GPUs
    trust_remote_code: bool = False
    revision: str | None = None


class DataSection(_Section):
    task: str | None = None  # a built-in offline task (see `grpo-ablate plan`), or
    dataset: str | None = None  # a hub id, a local folder, or a .jsonl/.json/.parquet/.csv file
    config_name: str | None = None
    split: str = "train"
    prompt_column: str = "prompt"
    system_prompt: str | None = None
    chat_template: bool | None = None  # None: use the tokenizer's chat template when it has one
    max_samples: int | None = Field(default=None, ge=1)
    num_prompts: int | None = Field(default=None, ge=1)  # size of a built-in task's dataset
    max_prompt_tokens: int | None = Field(default=None, ge=1)  # drop longer prompts (TRL no longer truncates)

    @model_validator(mode="after")
    def _one_source(self) -> "DataSection":
        if (self.task is None) == (self.dataset is None):
            raise ValueError("set exactly one of data.task (a built-in task) or data.dataset (a dataset id or file)")
        return self


class RewardSpec(_Section):
    name: str  # a built-in reward or package.module:function
    weight: float = 1.0


class VllmSection(_Section):
    mode: Literal["none", "colocate", "server"] = "none"
    server_gpus: int = Field(default=1, ge=1)  # server mode: GPUs the vLLM server takes from each trial's block
    port: int = 8000


class HardwareSection(_Section):
    num_processes: int | None = Field(default=None, ge=1)  # training processes per trial (the world size)
    gpus: int | None = Field(default=None, ge=0)  # GPUs per trial; with vLLM server mode some go to the server
    accelerate_config: str | None = None  # accelerate config file; its num_processes is the world size
    launcher: Literal["auto", "python", "torchrun", "accelerate"] = "auto"
    vllm: VllmSection = Field(default_factory=VllmSection)


class FloatRange(_Section):
    low: float
    high: float
    log: bool = False


class IntRange(_Section):
    low: int
    high: int
    step: int = Field(default=1, ge=1)


class SearchSection(_Section):
    num_generations: list[int] | IntRange = Field(default_factory=lambda: [4, 8, 16])
    temperature: list[float] | FloatRange | float | None = None  # None: the trainer's temperature (TRL default 1.0)
    generation_batch_size: list[int] | Literal["auto"] | None = None  # None: TRL's default batch
    max_generation_batch_size: int | None = Field(default=None, ge=1)  # upper bound for `auto`


class BudgetSection(_Section):
    max_steps: int | None = Field(default=None, ge=1)  # optimizer steps per trial (also the cap for the others)
    completions: int | None = Field(default=None, ge=1)  # equal generated completions per trial
    tokens: int | None = Field(default=None, ge=1)  # stop once this many tokens were processed
    seconds: float | None = Field(default=None, gt=0)  # stop after this much training wall time

    @model_validator(mode="after")
    def _some_budget(self) -> "BudgetSection":
        if not any(v is not None for v in (self.max_steps, self.completions, self.tokens, self.seconds)):
            raise ValueError("give each trial a budget: max_steps, completions, tokens or seconds")
        return self


class CompareSection(_Section):
    # metric -> allowed relative worsening (0.1 = 10%) before `grpo-ablate compare` fails
    tolerances: dict[str, float] = Field(default_factory=dict)


class StudyFile(_Section):
    study: StudySection
    model: ModelSection = Field(default_factory=ModelSection)
    data: DataSection
    rewards: list[RewardSpec | str] = Field(default_factory=list)
    trainer: dict[str, Any] = Field(default_factory=dict)
    trainer_from: str | None = None
    hardware: HardwareSection = Field(default_factory=HardwareSection)
    search: SearchSection = Field(default_factory=SearchSection)
    budget: BudgetSection = Field(default_factory=lambda: BudgetSection(max_steps=100))
    compare: CompareSection = Field(default_factory=CompareSection)


@dataclass
class Study:
    """A validated study: the sections, plus what was derived from them."""

    file: StudyFile
    path: Path | None
    space: FeasibleSpace
    warnings: list[str] = field(default_factory=list)

    # the sections, by their study-file names
    @property
    def study(self) -> StudySection:
        return self.file.study

    @property
    def model(self) -> ModelSection:
        return self.file.model

    @property
    def data(self) -> DataSection:
        return self.file.data

    @property
    def rewards(self) -> list[RewardSpec]:
        return [r if isinstance(r, RewardSpec) else RewardSpec(name=r) for r in self.file.rewards]

    @property
    def trainer(self) -> dict[str, Any]:
        return self.file.trainer

    @property
    def hardware(self) -> HardwareSection:
        return self.file.hardware

    @property
    def search(self) -> SearchSection:
        return self.file.search

    @property
    def budget(self) -> BudgetSection:
        return self.file.budget

    @property
    def output_dir(self) -> Path:
        return Path(self.study.output_dir or os.path.join("runs", self.study.name))

    @property
    def storage_url(self) -> str:
        return self.study.storage or str(self.output_dir / "study.journal")

    @property
    def world_size(self) -> int:
        return _world_size(self.file)

    @property
    def directions(self) -> list[str]:
        from grpo_ablate.vocab import METRICS

        return [o.direction or METRICS[o.metric].direction for o in self.study.objectives]

    @property
    def metric_names(self) -> list[str]:
        return [o.metric for o in self.study.objectives]

    def temperatures(self) -> list[float] | FloatRange | None:
        """The searched temperatures: a list, a range, or None when fixed by the trainer."""
        t = self.search.temperature
        if t is None or isinstance(t, (int, float)):
            return None
        return t

    def fixed_temperature(self) -> float:
        t = self.search.temperature
        if isinstance(t, (int, float)):
            return float(t)
        return float(self.trainer.get("temperature", TRL_DEFAULTS["temperature"]))

    def generations(self) -> list[int]:
        g = self.search.num_generations
        if isinstance(g, IntRange):
            return list(range(g.low, g.high + 1, g.step))
        return list(g)

    def to_dict(self) -> dict[str, Any]:
        """The resolved study (recipe merged, defaults filled), as saved beside each run."""
        return json.loads(self.file.model_dump_json())


# ---------------------------------------------------------------- loading


def load_study(path: str | os.PathLike[str], overrides: list[str] | None = None) -> Study:
    """Read, merge the recipe, apply `--set` overrides, validate. Raises StudyError."""
    p = Path(path)
    raw = _read_yaml(p, what="study file")
    if not isinstance(raw, dict):
        raise StudyError([Problem(path="", message=f"expected a mapping of sections at the top level, got {type(raw).__name__}")], str(p))
    problems: list[Problem] = []
    raw = copy.deepcopy(raw)
    if raw.get("trainer_from"):
        raw, recipe_problems = _merge_recipe(raw, p.parent)
        problems += recipe_problems
    if overrides:
        try:
            raw = apply_overrides(raw, overrides)
        except ValueError as e:
            problems.append(Problem(path="--set", message=str(e)))
    study = validate_dict(raw, source=str(p), base_dir=p.parent, problems=problems)
    study.path = p
    return study


def _resolve_path(value: Any, base: Path | None) -> Any:
    """A relative file path means: beside the study file, else from the current directory."""
    if not isinstance(value, str) or not value or os.path.isabs(value) or base is None:
        return value
    beside = base / value
    if beside.exists():
        return str(beside.resolve())
    return str(Path(value).resolve()) if Path(value).exists() else value


def _resolve_paths(raw: dict[str, Any], base: Path | None) -> None:
    hw = raw.get("hardware")
    if isinstance(hw, dict) and hw.get("accelerate_config"):
        hw["accelerate_config"] = _resolve_path(hw["accelerate_config"], base)
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("dataset"), str):
        d = data["dataset"]
        if d.startswith((".", "/")) or d.endswith((".jsonl", ".json", ".parquet", ".csv")):
            data["dataset"] = _resolve_path(d, base)


def validate_dict(raw: dict[str, Any], source: str = "", base_dir: Path | None = None,
                  problems: list[Problem] | None = None) -> Study:
    problems = list(problems or [])
    _resolve_paths(raw, base_dir)
    if isinstance(raw.get("trainer"), dict):
        problems += _check_trainer_keys(raw["trainer"], raw)
    try:
        sf = StudyFile.model_validate(raw)
    except ValidationError as e:
        problems += _schema_problems(e, raw)
        raise StudyError(problems, source) from None
    warnings: list[str] = []
    space = _space_for(sf)
    problems += _check_meaning(sf, space, base_dir, warnings)
    if problems:
        raise StudyError(problems, source)
    return Study(file=sf, path=None, space=space, warnings=warnings)


def _read_yaml(p: Path, what: str) -> Any:
    if not p.exists():
        raise StudyError([Problem(path="", message=f"{what} not found: {p}")], str(p))
    if p.is_dir():
        raise StudyError([Problem(path="", message=f"{what} is a directory, expected a YAML file: {p}")], str(p))
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise StudyError([Problem(path="", message=f"cannot read {what}: {e}")], str(p)) from None
    if not text.strip():
        raise StudyError([Problem(path="", message=f"{what} is empty")], str(p))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise StudyError([Problem(path="", message=f"malformed YAML{where}: {problem}")], str(p)) from None
    if data is None:
        raise StudyError([Problem(path="", message=f"{what} holds no settings")], str(p))
    return data


# Keys of Open R1 / TRL script recipes that are not GRPOConfig fields, and where they go.
RECIPE_KEY_MAP = {
    "model_name_or_path": ("model", "name_or_path"),
    "model_revision": ("model", "revision"),
    "torch_dtype": ("model", "dtype"),
    "dtype": ("model", "dtype"),
    "attn_implementation": ("model", "attn_implementation"),
    "trust_remote_code": ("model", "trust_remote_code"),
    "dataset_name": ("data", "dataset"),
    "dataset_config": ("data", "config_name"),
    "dataset_train_split": ("data", "split"),
    "dataset_prompt_column": ("data", "prompt_column"),
    "system_prompt": ("data", "system_prompt"),
}


def _merge_recipe(raw: dict[str, Any], base: Path) -> tuple[dict[str, Any], list[Problem]]:
    """Start the trainer section from a recipe file; the study's own keys win."""
    problems: list[Problem] = []
    rp = Path(raw["trainer_from"])
    if not rp.is_absolute():
        rp = base / rp
    try:
        recipe = _read_yaml(rp, what="trainer_from recipe")
    except StudyError as e:
        return raw, [Problem(path="trainer_from", message=e.problems[0].message)]
    if not isinstance(recipe, dict):
        return raw, [Problem(path="trainer_from", message=f"{rp} must be a mapping of keys, got {type(recipe).__name__}")]
    trainer: dict[str, Any] = {}
    for key, value in recipe.items():
        if key in RECIPE_KEY_MAP:
            section, name = RECIPE_KEY_MAP[key]
            if key == "torch_dtype" and value not in (None, "auto", "float32", "bfloat16", "float16"):
                value = str(value)
            sec = raw.setdefault(section, {}) if isinstance(raw.get(section, {}), dict) else {}
            if section == "data" and "task" in sec:
                continue  # the study chose a built-in task; the recipe's dataset does not apply
            sec.setdefault(name, value)
        elif key == "reward_funcs":
            if not raw.get("rewards"):
                weights = recipe.get("reward_weights") or [1.0] * len(value or [])
                raw["rewards"] = [{"name": n, "weight": w} for n, w in zip(value or [], weights)]
        elif key == "reward_weights":
            continue
        else:
            trainer[key] = value
    search = raw.get("search") if isinstance(raw.get("search"), dict) else {}
    for key in ("num_generations", "temperature", "generation_batch_size"):
        if key in search:
            trainer.pop(key, None)  # the search decides these; the recipe's value is its baseline at most
    trainer.update(raw.get("trainer") or {})
    raw["trainer"] = trainer
    return raw, problems


def apply_overrides(raw: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """Apply `--set key=value` (dotted paths; bare trial keys go to search or trainer)."""
    out = copy.deepcopy(raw)
    for item in sets:
        if "=" not in item:
            raise ValueError(f"expected key=value, got {item!r}")
        key, text = item.split("=", 1)
        value = yaml.safe_load(text) if text.strip() else None
        if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string; a number was meant
            try:
                value = float(value)
            except ValueError:
                pass
        parts = key.strip().split(".")
        if len(parts) == 1 and parts[0] not in StudyFile.model_fields:
            if parts[0] in SearchSection.model_fields:
                parts = ["search", parts[0]]
            elif parts[0] in StudySection.model_fields:
                parts = ["study", parts[0]]
            else:
                parts = ["trainer", parts[0]]
        node = out
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        node[parts[-1]] = value
    return out


# ---------------------------------------------------------------- schema problems


def _schema_problems(err: ValidationError, raw: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    for e in err.errors():
        loc = [str(x) for x in e["loc"] if not _is_union_tag(x)]
        path = ".".join(loc)
        if e["type"] == "extra_forbidden":
            parent = _model_at(loc[:-1])
            hint = _did_you_mean(loc[-1], list(parent.model_fields) if parent else [])
            out.append(Problem(path=path, message=f"unknown key{hint}"))
        elif e["type"] == "missing":
            out.append(Problem(path=path, message="is required"))
        else:
            got = e.get("input")
            msg = e["msg"].removeprefix("Value error, ")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            out.append(Problem(path=path, message=f"{msg}{shown}"))
    # unions report one error per alternative; keep one line per path+message
    seen: set[str] = set()
    uniq = []
    for p in out:
        key = str(p)
        if key not in seen:
            seen.add(key)
            uniq.append(p)
    return _collapse_union_noise(uniq)


def _is_union_tag(x: Any) -> bool:
    return isinstance(x, str) and (x in {"list[int]", "list[float]", "float", "str", "int"} or
                                   x.startswith(("list[", "function-", "literal[", "IntRange", "FloatRange", "RewardSpec")))


def _collapse_union_noise(problems: list[Problem]) -> list[Problem]:
    """A value that fits no alternative of a union yields one error per alternative: keep the first."""
    by_path: dict[str, Problem] = {}
    for p in problems:
        by_path.setdefault(p.path, p)
    return list(by_path.values())


_SECTION_MODELS: dict[str, type[BaseModel]] = {
    "study": StudySection, "model": ModelSection, "data": DataSection, "hardware": HardwareSection,
    "search": SearchSection, "budget": BudgetSection, "compare": CompareSection,
}


def _model_at(loc: list[str]) -> type[BaseModel] | None:
    if not loc:
        return StudyFile
    model = _SECTION_MODELS.get(loc[0])
    if model is HardwareSection and len(loc) > 1 and loc[1] == "vllm":
        return VllmSection
    if loc[0] == "study" and len(loc) > 2 and loc[1] == "objectives":
        return Objective
    if loc[0] == "rewards":
        return RewardSpec
    if loc[0] == "search" and len(loc) > 1:
        return FloatRange if loc[1] == "temperature" else IntRange
    return model


def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---------------------------------------------------------------- trainer keys


@functools.lru_cache(maxsize=1)
def trainer_field_names() -> frozenset[str]:
    """GRPOConfig's fields in the installed TRL.

    Read once per TRL version in a child process and cached on disk, so neither `validate` nor
    the study's orchestrator ever imports trl/torch (seconds of start-up, hundreds of MB).
    """
    import importlib.metadata
    import subprocess
    import sys

    try:
        version = importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    cache = Path(os.environ.get("GRPO_ABLATE_CACHE") or Path.home() / ".cache" / "grpo-ablate") / f"grpo_config_fields-trl{version}.json"
    try:
        return frozenset(json.loads(cache.read_text()))
    except (OSError, ValueError):
        pass
    code = ("import dataclasses, json; from trl import GRPOConfig; "
            "print(json.dumps(sorted(f.name for f in dataclasses.fields(GRPOConfig))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise StudyError([Problem(path="trainer", message=f"cannot read GRPOConfig from the installed TRL: {tail}")])
    names = json.loads(out.stdout.strip().splitlines()[-1])
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(names))
        os.replace(tmp, cache)
    except OSError:
        pass
    return frozenset(names)


def _check_trainer_keys(trainer: dict[str, Any], raw: dict[str, Any]) -> list[Problem]:
    problems: list[Problem] = []
    fields = trainer_field_names()
    search = raw.get("search") if isinstance(raw.get("search"), dict) else {}
    for key, value in trainer.items():
        path = f"trainer.{key}"
        if key in REMOVED_TRAINER_KEYS:
            problems.append(Problem(path=path, message=f"{key} {REMOVED_TRAINER_KEYS[key]}"))
        elif key not in fields:
            hint = _did_you_mean(key, sorted(fields))
            problems.append(Problem(path=path, message=f"not a GRPOConfig field of the installed TRL{hint}"))
        elif key in OWNED_TRAINER_KEYS and key != "output_dir" and value:
            problems.append(Problem(path=path, message=OWNED_TRAINER_KEYS[key]))
        elif key in ("num_generations", "generation_batch_size", "temperature") and key in search:
            problems.append(Problem(path=path, message=f"is searched (search.{key}); remove it here, or give search.{key} a single value"))
    t = trainer.get("temperature")
    if isinstance(t, (int, float)) and t <= 0:
        problems.append(Problem(path="trainer.temperature", message=f"must be > 0 (TRL fails only when the trainer is built), got {t}"))
    if "generation_batch_size" in trainer and "steps_per_generation" in trainer:
        problems.append(Problem(path="trainer.steps_per_generation",
                                message="generation_batch_size and steps_per_generation cannot both be set; keep one"))
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps", "per_device_eval_batch_size", "steps_per_generation"):
        v = trainer.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            problems.append(Problem(path=f"trainer.{key}", message=f"must be a positive integer, got {v!r}"))
    return problems


# ---------------------------------------------------------------- meaning


def _accelerate_processes(path: str) -> int | None:
    try:
        cfg = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None
    n = cfg.get("num_processes") if isinstance(cfg, dict) else None
    return int(n) if isinstance(n, int) else None


def _world_size(sf: StudyFile) -> int:
    hw = sf.hardware
    if hw.num_processes:
        return hw.num_processes
    if hw.accelerate_config:
        n = _accelerate_processes(hw.accelerate_config)
        if n:
            return n
    if hw.gpus:
        taken = hw.vllm.server_gpus if hw.vllm.mode == "server" else 0
        return max(1, hw.gpus - taken)
    return 1


def batch_shape(sf: StudyFile) -> BatchShape:
    t = sf.trainer

    def num(key: str) -> int:
        v = t.get(key, TRL_DEFAULTS[key])
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else TRL_DEFAULTS[key]

    eval_strategy = t.get("eval_strategy", "no")
    eval_on = bool(t.get("do_eval")) or (eval_strategy not in (None, "no"))
    spg = t.get("steps_per_generation")
    return BatchShape(
        world_size=_world_size(sf),
        per_device_train_batch_size=num("per_device_train_batch_size"),
        gradient_accumulation_steps=num("gradient_accumulation_steps"),
        steps_per_generation=spg if isinstance(spg, int) and spg > 0 else None,
        eval_enabled=eval_on and eval_strategy != "no",
        per_device_eval_batch_size=num("per_device_eval_batch_size"),
        num_generations_eval=t.get("num_generations_eval"),
    )


def _space_for(sf: StudyFile) -> FeasibleSpace:
    search = sf.search
    gens = (list(range(search.num_generations.low, search.num_generations.high + 1, search.num_generations.step))
            if isinstance(search.num_generations, IntRange) else list(search.num_generations))
    batches: Any = search.generation_batch_size
    if batches is None and "generation_batch_size" in sf.trainer:
        batches = [sf.trainer["generation_batch_size"]]
    return feasible_space(batch_shape(sf), gens, batches, search.max_generation_batch_size)


def _check_meaning(sf: StudyFile, space: FeasibleSpace, base_dir: Path | None, warnings: list[str]) -> list[Problem]:
    from grpo_ablate.vocab import METRICS

    problems: list[Problem] = []
    st, search = sf.study, sf.search

    # search space
    if isinstance(search.num_generations, IntRange) and search.num_generations.low > search.num_generations.high:
        problems.append(Problem(path="search.num_generations", message=f"`low <= high` must hold, got low={search.num_generations.low}, high={search.num_generations.high}"))
    elif not space.feasible:
        hint = "; ".join(space.suggestions)
        reasons = "; ".join(sorted({r.reason for r in space.rejected}))[:600]
        problems.append(Problem(path="search.num_generations", message=f"no (num_generations, generation_batch_size) pair is feasible on this hardware: {reasons}. Nearest that would work: {hint}"))
    t = search.temperature
    temps: list[float] = []
    if isinstance(t, FloatRange):
        if t.low > t.high:
            problems.append(Problem(path="search.temperature", message=f"`low <= high` must hold, got low={t.low}, high={t.high}"))
        temps = [t.low, t.high]
    elif isinstance(t, list):
        temps = t
        if not t:
            problems.append(Problem(path="search.temperature", message="an empty list searches nothing; give values or leave it out"))
    elif isinstance(t, (int, float)):
        temps = [t]
    for v in temps:
        if v <= 0:
            problems.append(Problem(path="search.temperature", message=f"must be > 0 (0 means greedy decoding: the G completions of a group would be identical), got {v}"))
            break

    # objectives, sampler, pruner
    for i, o in enumerate(st.objectives):
        if o.metric not in METRICS:
            problems.append(Problem(path=f"study.objectives.{i}.metric", message=f"unknown metric {o.metric!r}{_did_you_mean(o.metric, list(METRICS))}; choose from {sorted(METRICS)}"))
    if not st.objectives:
        problems.append(Problem(path="study.objectives", message="give at least one objective"))
    if len(st.objectives) > 1 and st.pruner != "none":
        problems.append(Problem(path="study.pruner", message=f"Optuna cannot prune multi-objective studies; set pruner: none or keep one objective (got {len(st.objectives)} objectives)"))
    if not st.seeds:
        problems.append(Problem(path="study.seeds", message="give at least one seed"))
    if st.sampler in ("grid", "ablation") and isinstance(search.temperature, FloatRange):
        problems.append(Problem(path="search.temperature", message=f"the {st.sampler} sampler needs a list of temperatures, not a range; e.g. [0.7, 1.0]"))
    if st.sampler == "ablation":
        unknown = set(st.baseline) - {"num_generations", "temperature", "generation_batch_size"}
        if unknown:
            problems.append(Problem(path="study.baseline", message=f"only num_generations, temperature and generation_batch_size can be set, got {sorted(unknown)}"))
        g = st.baseline.get("num_generations")  # unset: TRL's 8, or the nearest feasible G
        b = st.baseline.get("generation_batch_size")
        if g is not None and space.feasible and space.pair(int(g), int(b) if b else None) is None:
            problems.append(Problem(path="study.baseline.num_generations", message=f"baseline num_generations={g}{f' with generation_batch_size={b}' if b else ''} is not feasible here; feasible: {list(space.generations)}"))
    if st.sampler == "gp":
        try:
            import scipy  # noqa: F401
        except ImportError:
            problems.append(Problem(path="study.sampler", message="the gp sampler needs scipy: pip install scipy"))
    if st.storage and st.storage.startswith(("postgresql", "postgres")):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            try:
                import psycopg2  # noqa: F401
            except ImportError:
                problems.append(Problem(path="study.storage", message="PostgreSQL storage needs a driver: pip install 'grpo-ablate[postgres]'"))

    # budget
    b = sf.budget
    tmax = sf.trainer.get("max_steps")
    if isinstance(tmax, int) and tmax > 0 and b.max_steps is not None and tmax != b.max_steps:
        problems.append(Problem(path="trainer.max_steps", message=f"conflicts with budget.max_steps ({tmax} vs {b.max_steps}); keep budget.max_steps"))
    if (b.tokens or b.seconds) and b.max_steps is None and not (isinstance(tmax, int) and tmax > 0):
        warnings.append("budget: tokens/seconds without max_steps: trials run up to 10000 steps (the learning-rate schedule spans that)")

    # files
    for key, value in (("hardware.accelerate_config", sf.hardware.accelerate_config),):
        if value and not Path(value).exists():
            problems.append(Problem(path=key, message=f"file not found: {value}"))
    if sf.hardware.accelerate_config and Path(sf.hardware.accelerate_config).exists() and _accelerate_processes(sf.hardware.accelerate_config) is None and not sf.hardware.num_processes:
        problems.append(Problem(path="hardware.accelerate_config", message="has no num_processes; set it there or in hardware.num_processes"))
    ds = sf.data.dataset
    if ds and (ds.startswith((".", "/")) or ds.endswith((".jsonl", ".json", ".parquet", ".csv"))) and not Path(ds).exists():
        problems.append(Problem(path="data.dataset", message=f"local dataset file not found: {ds}"))
    if sf.data.task is not None:
        from grpo_ablate.tasks_catalog import builtin_task_names

        names = builtin_task_names()
        if sf.data.task not in names:
            problems.append(Problem(path="data.task", message=f"unknown built-in task {sf.data.task!r}{_did_you_mean(sf.data.task, names)}; built-in tasks: {names}"))
    for i, r in enumerate(sf.rewards):
        name = r if isinstance(r, str) else r.name
        problems += _check_reward_name(name, f"rewards.{i}")
    if sf.model.name_or_path.startswith("builtin:") and sf.model.name_or_path != "builtin:tiny":
        problems.append(Problem(path="model.name_or_path", message=f"unknown built-in model {sf.model.name_or_path!r}; use builtin:tiny, a hub id or a local folder"))
    if sf.model.name_or_path.startswith("builtin:") and sf.data.task is None:
        problems.append(Problem(path="model.name_or_path", message="builtin:tiny knows only the built-in tasks' characters; use it with data.task, or name a real model"))
    hw = sf.hardware
    if hw.gpus is not None:
        server = hw.vllm.server_gpus if hw.vllm.mode == "server" else 0
        world = _world_size(sf)
        if world + server > hw.gpus and (world > 1 or server):
            problems.append(Problem(path="hardware.gpus", message=(
                f"{world} training process(es){f' + {server} vLLM server GPU(s)' if server else ''} do not fit in "
                f"{hw.gpus} GPU(s) per trial; raise hardware.gpus or lower num_processes (accelerate config) "
                f"to {max(1, hw.gpus - server)}")))
    if sf.hardware.vllm.mode != "none" and not sf.hardware.gpus and sf.hardware.vllm.mode == "server":
        problems.append(Problem(path="hardware.gpus", message="vLLM server mode needs hardware.gpus (GPUs per trial, server included)"))
    return problems


def _check_reward_name(name: str, path: str) -> list[Problem]:
    from grpo_ablate.tasks_catalog import builtin_reward_names

    if ":" in name:
        mod, _, fn = name.partition(":")
        if not mod or not fn:
            return [Problem(path=path, message=f"expected package.module:function, got {name!r}")]
        return []
    names = builtin_reward_names()
    if name not in names:
        return [Problem(path=path, message=f"unknown reward {name!r}{_did_you_mean(name, names)}; built-in rewards: {names}, or package.module:function")]
    return []
