"""The meaning checks: a parsed study file becomes a StudyConfig, or a StudyError with every problem.

    grpo-ablate validate studies/tiny-cpu.yaml

All layers run before anything is reported: the schema (types, unknown keys with a
did-you-mean), the trainer keys against the installed TRL, and the meaning (feasible
(num_generations, generation_batch_size) pairs on this hardware, temperature > 0, objectives,
sampler and pruner, budget, names, places), and the inputs (a local dataset's first rows, each
reward function bound to TRL's call: config/inputs.py).
"""

from __future__ import annotations

import importlib.util
import math
import os
from typing import Any

from pydantic import ValidationError

from grpo_ablate.core.attention import attn_problems
from grpo_ablate.core.precision import CPU_CHANGES_LEAD
from grpo_ablate.core.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.config.hardware import batch_shape, space_for, world_size
from grpo_ablate.config.inputs import check_inputs
from grpo_ablate.config.names import check_names
from grpo_ablate.core.bounds import REWARD_ROWS_NEEDED
from grpo_ablate.core.cost import warmup_steps
from grpo_ablate.config.places import check_places, is_local_dataset
from grpo_ablate.config.cpu_run import cpu_run_changes
from grpo_ablate.config.schema import FloatRange, IntRange, Objective, StudyFile, model_at
from grpo_ablate.config.study import StudyConfig
from grpo_ablate.config.trainer_fields import check_trainer_keys
from grpo_ablate.core.space import FeasibleSpace
from grpo_ablate.core.schedule import parse_generations
from grpo_ablate.stats.model import MIN_SEEDS
from grpo_ablate.core.vocab import METRICS, SEARCHED_KEYS, Schedule
from grpo_ablate.files.probe_file import probe_path
from grpo_ablate.core.prompt_file import prompt_file_problem

__all__ = ["validate_dict", "objective_metrics", "EVALUATION_OBJECTIVE"]

# A study with held-out evaluation optimises this unless it names its own objectives.
EVALUATION_OBJECTIVE = "eval_final_reward"


def objective_metrics() -> list[str]:
    """The metrics a study may optimise (vocab.Metric.optimisable)."""
    return sorted(name for name, m in METRICS.items() if m.optimisable)


def validate_dict(raw: dict[str, Any], source: str = "", problems: list[Problem] | None = None, *,
                  reads_only: bool = False) -> StudyConfig:
    """Raises StudyError with every problem found, those passed in first. `reads_only`: the command only reads the
    study's folder and storage (config/places.check_places)."""
    problems = list(problems or [])
    if isinstance(raw.get("trainer"), dict):
        search = searched if isinstance(searched := raw.get("search"), dict) else {}
        problems += check_trainer_keys(raw["trainer"], search)
    try:
        sf = StudyFile.model_validate(raw)
    except ValidationError as e:
        problems += schema_problems(e)
        raise StudyError(problems, source) from None
    warnings: list[str] = []
    space = space_for(sf)
    problems += _check_search(sf, space)
    problems += _check_study(sf, space)
    problems += _check_budget(sf, warnings)
    problems += _check_branching(sf)
    problems += _check_script(sf)
    problems += _check_gpus(sf)
    _note_cpu_precision(sf, warnings)
    problems += _check_trackers(sf, warnings)
    problems += _check_preflight(sf, warnings)
    problems += _check_evaluation(sf)
    problems += _check_values(sf)
    problems += _check_prompt_files(sf)
    problems += _check_attention(sf)
    problems += check_names(sf)
    problems += check_places(sf, reads_only=reads_only)
    problems += check_inputs(sf, warnings)  # the dataset's first rows and each reward, on this machine
    if problems:
        raise StudyError(problems, source)
    return StudyConfig(file=sf, path=None, space=space, warnings=warnings)


# ---------------------------------------------------------------- schema


def schema_problems(err: ValidationError) -> list[Problem]:
    """Pydantic's errors as key paths and messages; a union's alternatives give one line per path.

    When a value fails every alternative of a union (`temperature: [.nan]` is neither a list of
    finite floats nor a range), the alternative that got deeper into the value explains it: the
    shallow "should be a dictionary" lines of the others are dropped.
    """
    by_path: dict[str, Problem] = {}
    from_union: set[str] = set()
    for e in err.errors():
        raw = [str(x) for x in e["loc"]]
        # a top-level key, and the unknown key itself, are the user's words, never union tags
        loc = [x for i, x in enumerate(raw)
               if i == 0 or (i == len(raw) - 1 and e["type"] == "extra_forbidden") or not _is_union_tag(x)]
        path = ".".join(loc)
        if e["type"] == "extra_forbidden":
            parent = model_at(loc[:-1])
            hint = did_you_mean(loc[-1], list(parent.model_fields) if parent else [])
            problem = Problem(path=path, message=f"unknown key{hint}")
        elif e["type"] == "missing":
            problem = Problem(path=path, message="is required")
        else:
            got = e.get("input")
            msg = e["msg"].removeprefix("Value error, ")
            shown = "" if isinstance(got, dict) else f" (got {echo(got)})"
            problem = Problem(path=path, message=f"{msg}{shown}")
            if len(loc) < len(raw):
                from_union.add(path)
        by_path.setdefault(path, problem)
    deeper = {p for p in by_path for q in by_path if q.startswith(p + ".")}
    return [pr for p, pr in by_path.items() if not (p in from_union and p in deeper)]


def _is_union_tag(x: Any) -> bool:
    return isinstance(x, str) and (x in {"list[int]", "list[float]", "float", "str", "int"} or
                                   x.startswith(("list[", "function-", "literal[", "constrained-", "IntRange", "FloatRange", "RewardSpec")))


# ---------------------------------------------------------------- meaning


def _check_search(sf: StudyFile, space: FeasibleSpace) -> list[Problem]:
    problems: list[Problem] = []
    search = sf.search
    g = search.num_generations
    if isinstance(g, IntRange) and g.low > g.high:
        problems.append(Problem(path="search.num_generations",
                                message=f"`low <= high` must hold, got low={g.low}, high={g.high}"))
    elif not space.feasible:
        hint = "; ".join(space.suggestions)
        reasons = "; ".join(sorted({r.reason for r in space.rejected}))[:600]
        problems.append(Problem(path="search.num_generations", message=(
            f"no (num_generations, generation_batch_size) pair is feasible on this hardware: {reasons}"
            + (f". Nearest that would work: {hint}" if hint else ""))))
    problems += _check_schedules(sf, space)
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
    bad = next((v for v in temps if v <= 0), None)
    if bad is not None:
        problems.append(Problem(path="search.temperature", message=(
            f"must be > 0 (0 means greedy decoding: the G completions of a group would be identical), got {bad}")))
    return problems


def _check_schedules(sf: StudyFile, space: FeasibleSpace) -> list[Problem]:
    """A G schedule is asked for by name, so one that cannot run is an error, not a silent skip."""
    problems: list[Problem] = []
    g = sf.search.num_generations
    if isinstance(g, IntRange):
        return problems
    step_budget = sf.budget.max_steps or sf.budget.completions or isinstance(sf.trainer.get("max_steps"), int)
    for i, value in enumerate(g):
        if not isinstance(value, str):
            continue
        path = f"search.num_generations.{i}"
        try:
            parsed = parse_generations(value)
        except ValueError as e:
            problems.append(Problem(path=path, message=str(e)))
            continue
        if not isinstance(parsed, Schedule):
            continue
        if space.pair(parsed) is None:
            reasons = "; ".join(sorted({r.reason for r in space.rejected if r.num_generations == parsed}))
            problems.append(Problem(path=path, message=(
                f"schedule {parsed.label} is not feasible on this hardware: {reasons or 'no generation batch fits every phase'}. "
                f"Every phase keeps the arm's generation batch, so each phase's G must divide it")))
        if parsed.kind != "schedule":  # a G policy decides per round in the trainer's own generation loop
            if sf.hardware.vllm.mode != "none" or sf.trainer.get("use_vllm"):
                problems.append(Problem(path=path, message=(
                    f"{parsed.label} generates through transformers only (trainer/scheduled.py), not vLLM; set "
                    f"hardware.vllm.mode: none, or use a fixed G or a G schedule")))
            aggregation = sf.trainer.get("multi_objective_aggregation", "sum_then_normalize")
            if aggregation != "sum_then_normalize":
                problems.append(Problem(path=path, message=(
                    f"{parsed.label} needs trainer.multi_objective_aggregation: sum_then_normalize, got {echo(aggregation)}")))
        if parsed.uses_progress and not step_budget:
            problems.append(Problem(path=path, message=(
                f"schedule {parsed.label} switches by progress, which needs a step budget: set budget.max_steps "
                f"or budget.completions (a tokens/seconds budget alone has no known length)")))
    return problems


def _check_study(sf: StudyFile, space: FeasibleSpace) -> list[Problem]:
    """Objectives, seeds, sampler, pruner and the ablation baseline."""
    problems: list[Problem] = []
    st, search = sf.study, sf.search
    allowed = objective_metrics()
    for i, o in enumerate(st.objectives):
        if o.metric not in allowed:
            what = (f"{echo(o.metric)} has no direction or is not measured per trial" if o.metric in METRICS
                    else f"unknown metric {echo(o.metric)}{did_you_mean(o.metric, allowed)}")
            problems.append(Problem(path=f"study.objectives.{i}.metric", message=f"{what}; choose from {allowed}"))
    if not st.objectives:
        problems.append(Problem(path="study.objectives", message="give at least one objective"))
    if len(st.objectives) > 1 and st.pruner != "none":
        problems.append(Problem(path="study.pruner", message=(
            f"Optuna cannot prune multi-objective studies; set pruner: none or keep one objective "
            f"(got {len(st.objectives)} objectives)")))
    if not st.seeds:
        problems.append(Problem(path="study.seeds", message="give at least one seed"))
    if st.is_planned and isinstance(search.temperature, FloatRange):
        problems.append(Problem(path="search.temperature", message=(
            f"the {st.sampler} sampler needs a list of temperatures, not a range; e.g. [0.7, 1.0]")))
    if st.sampler == "ablation":
        unknown = set(st.baseline) - set(SEARCHED_KEYS)
        if unknown:
            problems.append(Problem(path="study.baseline", message=(
                f"only {', '.join(SEARCHED_KEYS)} can be set, got {echo(sorted(unknown))}")))
        g = st.baseline.get("num_generations")  # unset: TRL's 8, or the nearest feasible G
        b = st.baseline.get("generation_batch_size")
        if g is not None and space.feasible and space.pair(int(g), int(b) if b else None) is None:
            with_b = f" with generation_batch_size={b}" if b else ""
            problems.append(Problem(path="study.baseline.num_generations", message=(
                f"baseline num_generations={g}{with_b} is not feasible here; feasible: {list(space.generations)}")))
    if st.racing is not None:
        if not st.is_planned:
            problems.append(Problem(path="study.racing", message=(
                f"racing applies to the grid and ablation samplers, not {st.sampler}; remove study.racing")))
        elif len(set(st.seeds)) < MIN_SEEDS:
            problems.append(Problem(path="study.seeds", message=(
                f"a race decides, and nothing is tested from fewer than {MIN_SEEDS} seeds per arm (stats/model.py), "
                f"but study.seeds has {len(set(st.seeds))}: give at least {MIN_SEEDS} seeds, or remove study.racing "
                f"for a study that only measures")))
        elif len(st.seeds) < st.racing.first_round_seeds:
            problems.append(Problem(path="study.racing.first_round_seeds", message=(
                f"the first round needs {st.racing.first_round_seeds} seeds but study.seeds has {len(st.seeds)}")))
        if len(st.objectives) > 1:
            problems.append(Problem(path="study.racing", message="racing compares one objective; keep one"))
        if st.racing.design == "elimination" and not (st.min_effect or 0) > 0:
            problems.append(Problem(path="study.min_effect", message=(
                "racing.design elimination selects the best against an indifference zone of study.min_effect, "
                "and its seeds grow as 1/min_effect^2; set it explicitly, e.g. study.min_effect: 0.02")))
        if st.racing.method == "betting" and st.objectives:
            m = METRICS.get(st.objectives[0].metric)
            if m is None or m.low is None or m.high is None:
                problems.append(Problem(path="study.racing.method", message=(
                    f"the betting sequence needs an objective with a known range, and {st.objectives[0].metric} has "
                    f"none; use method: t (the default) or a bounded objective such as eval_final_reward")))
    if st.sampler == "gp":
        if importlib.util.find_spec("scipy") is None:
            problems.append(Problem(path="study.sampler", message="the gp sampler needs scipy: pip install scipy"))
    return problems


def _check_budget(sf: StudyFile, warnings: list[str]) -> list[Problem]:
    problems: list[Problem] = []
    b = sf.budget
    tmax = sf.trainer.get("max_steps")
    steps_set = isinstance(tmax, int) and not isinstance(tmax, bool) and tmax > 0
    if steps_set and b.max_steps is not None and tmax != b.max_steps:
        problems.append(Problem(path="trainer.max_steps",
                                message=f"conflicts with budget.max_steps ({tmax} vs {b.max_steps}); keep budget.max_steps"))
    if (b.tokens or b.seconds) and b.max_steps is None and not steps_set:
        warnings.append("budget: tokens/seconds without max_steps: trials run up to 10000 steps "
                        "(the learning-rate schedule spans that)")
    cap = b.max_steps or (tmax if steps_set else None)
    if cap is not None:
        gbs = sf.trainer.get("generation_batch_size")
        gbs = gbs if isinstance(gbs, int) and not isinstance(gbs, bool) and gbs > 0 else None
        rows = batch_shape(sf).rounds(gbs).generating_steps(cap)  # num_iterations counted (space.Rounds)
        for o in sf.study.objectives:
            need = REWARD_ROWS_NEEDED.get(o.metric)
            if need is not None and rows < need:
                problems.append(Problem(path="budget.max_steps", message=(
                    f"{cap} step(s) log {rows} reward row(s), and the objective {o.metric} needs {need} "
                    f"(bounds.py): every trial would end without it; raise budget.max_steps")))
    return problems


def _check_script(sf: StudyFile) -> list[Problem]:
    """A command trial (`script`): one --num_generations per run, from step 0; a recipe the script reads."""
    if sf.script is None:
        return []
    problems: list[Problem] = []
    g = sf.search.num_generations
    for i, value in enumerate(g if isinstance(g, list) else []):
        if isinstance(value, str) and not value.strip().isdigit():
            problems.append(Problem(path=f"search.num_generations.{i}", message=(
                f"{value!r}: a G that changes during the run needs the built-in trainer; a script gets one "
                "--num_generations per trial (remove `script`, or search fixed G values)")))
    if sf.budget.branch_from is not None:
        problems.append(Problem(path="budget.branch_from", message=(
            "branching from a shared prefix needs the built-in trainer; with `script` every trial runs from step 0 "
            "(set budget.branch_from: none)")))
    if "{recipe}" in sf.script.command and not sf.trainer_from:
        problems.append(Problem(path="script.command", message=(
            "names {recipe}, but the study has no trainer_from: give the recipe file your script reads")))
    return problems


def _check_branching(sf: StudyFile) -> list[Problem]:
    """budget.branch_from: what a shared prefix needs, checked here on the file; grpo_ablate/plan/branching.py places
    the step (a share of a full run counted in epochs over the dataset is placed when the dataset is read)."""
    b = sf.budget
    raw = b.branch_from
    if raw is None:
        return []
    path = "budget.branch_from"
    problems: list[Problem] = []
    if sf.study.sampler not in ("grid", "ablation"):
        problems.append(Problem(path=path, message=(
            f"arms branch from a prefix planned per seed, which study.sampler {sf.study.sampler!r} has no plan for: "
            "use the grid or ablation sampler, or set budget.branch_from: none")))
    if b.max_steps is None and b.completions is None:
        problems.append(Problem(path=path, message=(
            "a branch trains its budget from the branch point on, counted in steps: give budget.max_steps or "
            "budget.completions (tokens or seconds alone cannot place its end)")))
    if b.lr_schedule == "compressed" or b.full_run is None:
        problems.append(Problem(path=path, message=(
            "every branch continues the learning-rate schedule of the full run from the branch point, so the "
            "schedule must be the full run's: set budget.full_run (max_steps, or num_train_epochs with "
            "num_generations) and leave budget.lr_schedule unset or `prefix`")))
    full = b.full_run.max_steps if b.full_run is not None else None
    # cost.py's rule, as the trial's scheduler counts it (None: a share of a run whose length the file does not give)
    step = raw if isinstance(raw, int) else warmup_steps(sf.trainer, full) if raw == "warmup" else None
    if raw == "warmup" and step == 0:
        problems.append(Problem(path=path, message=(
            "warmup, but the trainer has no warmup (trainer.warmup_steps unset or 0): give a step count instead")))
    if step and full is not None and step >= full:
        problems.append(Problem(path=path, message=(
            f"the branch point, step {step}, is not inside the full run's {full} steps (budget.full_run.max_steps): "
            "branch earlier")))
    return problems


def _check_gpus(sf: StudyFile) -> list[Problem]:
    problems: list[Problem] = []
    hw = sf.hardware
    server = hw.vllm.server_gpus if hw.vllm.mode == "server" else 0
    if hw.gpus:  # 0: a CPU study, whose processes (and vLLM server) share the CPU
        world = world_size(sf)
        if world + server > hw.gpus and (world > 1 or server):
            problems.append(Problem(path="hardware.gpus", message=(
                f"{world} training process(es){f' + {server} vLLM server GPU(s)' if server else ''} do not fit in "
                f"{hw.gpus} GPU(s) per trial; raise hardware.gpus or lower num_processes (accelerate config) "
                f"to {max(1, hw.gpus - server)}")))
    if hw.vllm.mode == "server" and hw.gpus is None:
        problems.append(Problem(path="hardware.gpus", message="vLLM server mode needs hardware.gpus (GPUs per trial, server "
                                                              "included; 0 on a CPU, where the server shares it)"))
    return problems


def _note_cpu_precision(sf: StudyFile, warnings: list[str]) -> None:
    """Where trials run on the CPU: what they change of the study's precision and DeepSpeed settings."""
    changes = cpu_run_changes(sf)
    if changes:
        warnings.append(CPU_CHANGES_LEAD + "; ".join(changes))


# Tracker name -> the module its report_to integration imports.
_TRACKER_MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio", "mlflow": "mlflow",
                    "comet_ml": "comet_ml", "swanlab": "swanlab"}


def _check_trackers(sf: StudyFile, warnings: list[str]) -> list[Problem]:
    """Each tracker importable here (the trials run in this environment): study.trackers' a problem, the trainer's
    (a recipe's) report_to a warning, as the study may be planned on a machine other than the trials'."""
    problems: list[Problem] = []
    named: list[str]
    if sf.study.trackers is not None:
        named, where = [str(n) for n in sf.study.trackers], "study.trackers"
    else:  # the trainer's (a recipe's) report_to stays on in the trials: the same check
        given = sf.trainer.get("report_to")
        named, where = [given] if isinstance(given, str) else [str(n) for n in given or []], "trainer.report_to"
    for i, name in enumerate(named):
        module = _TRACKER_MODULES.get(str(name))
        if module is None or sf.script is not None:
            continue  # "none", "all", a name transformers knows; a command trial's script has its own environment
        if importlib.util.find_spec(module) is None:
            words = (f"{name} is not installed in this environment: pip install {module}, or set study.trackers: [] "
                     f"to run the trials without it")
            if where == "study.trackers":
                problems.append(Problem(path=f"{where}.{i}", message=words))
            else:
                warnings.append(f"{where}: {words} (trials here would fail at their start)")
    return problems


def _check_preflight(sf: StudyFile, warnings: list[str]) -> list[Problem]:
    """hardware.memory_limit_mb and search.generation_batch_size: probed (grpo-ablate probe)."""

    problems: list[Problem] = []
    limit = sf.hardware.memory_limit_mb
    if limit is not None and limit < 256:
        problems.append(Problem(path="hardware.memory_limit_mb", message=(
            f"must leave room for Python, torch and the model (>= 256 MiB), got {limit}")))
    if limit is not None and sf.hardware.gpus:
        warnings.append("hardware.memory_limit_mb caps the CPU memory of a trial's processes; on GPUs, CUDA's "
                        "out-of-memory error decides")
    if sf.search.generation_batch_size == "probed":
        output_dir = sf.study.output_dir or os.path.join("runs", sf.study.name)
        if not probe_path(output_dir).is_file():
            warnings.append(f"search.generation_batch_size is `probed` but {output_dir}/probe.json does not exist: "
                            "run `grpo-ablate probe STUDY` first; until then every `auto` batch is searched")
    return problems


_INTEGER_KEYS = ("num_generations", "generation_batch_size")


def _check_values(sf: StudyFile) -> list[Problem]:
    """Values the schema cannot type: the free-form trainer section and the ablation baseline.

    Only finite numbers reach TRL (a NaN temperature or learning rate trains garbage without an
    error); lengths are positive, seeds are what numpy accepts, and a baseline G is a whole number.
    """
    problems: list[Problem] = []
    for path, value in _leaves(sf.trainer, "trainer"):
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(Problem(path=path, message=f"must be a finite number, got {value}"))
    t = sf.trainer
    if "temperature" in t and not _is_number(t["temperature"]):
        problems.append(Problem(path="trainer.temperature", message=f"must be a number > 0, got {echo(t['temperature'])}"))
    for key in ("seed", "data_seed"):
        v = t.get(key)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**32):
            problems.append(Problem(path=f"trainer.{key}", message=f"must be an integer from 0 to 2**32-1, got {echo(v)}"))
    for key, v in sf.study.baseline.items():
        if key in _INTEGER_KEYS and not (_is_number(v) and float(v).is_integer() and v >= 1):
            problems.append(Problem(path=f"study.baseline.{key}", message=f"must be a positive whole number, got {echo(v)}"))
        elif key == "temperature" and v <= 0:
            problems.append(Problem(path="study.baseline.temperature", message=f"must be > 0, got {v}"))
    return problems


def _check_prompt_files(sf: StudyFile) -> list[Problem]:
    """Every row of a local prompt file has a prompt: line numbers now, not "None" trained on later."""

    problems: list[Problem] = []
    column = sf.data.prompt_column
    sources = [("data.dataset", sf.data.dataset, sf.data.max_samples)]
    if sf.evaluation is not None:
        sources.append(("evaluation.dataset", sf.evaluation.dataset, None))
    for key, source, max_rows in sources:
        if source and is_local_dataset(source):
            problem = prompt_file_problem(source, column, max_rows)
            if problem:
                problems.append(Problem(path=key, message=problem))
    return problems


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}.{i}")]
    return [(path, value)]


def _check_evaluation(sf: StudyFile) -> list[Problem]:
    """The held-out evaluation: fixed decoding that means something, prompts apart from training.

    Also sets the default objective: with evaluation and no `study.objectives` in the file,
    the study maximises eval_final_reward (an explicit list is kept as written).
    """
    ev = sf.evaluation
    if ev is None:
        return [Problem(path=f"study.objectives[{i}].metric", message=(
            f"{o.metric} is measured on held-out prompts, and the study has no evaluation section: every trial "
            f"would fail after training; add `evaluation: {{num_prompts: 128}}` or choose another objective"))
            for i, o in enumerate(sf.study.objectives or []) if o.metric.startswith("eval_")]
    problems: list[Problem] = []
    if "objectives" not in sf.study.model_fields_set:
        sf.study.objectives = [Objective(metric=EVALUATION_OBJECTIVE)]
    if ev.temperature == 0 and ev.samples_per_prompt > 1:
        problems.append(Problem(path="evaluation.samples_per_prompt", message=(
            f"greedy evaluation (temperature 0) gives {ev.samples_per_prompt} identical samples per prompt; "
            "use 1, or set evaluation.temperature > 0")))
    if sf.data.task is not None and (ev.dataset is not None or ev.split is not None):
        problems.append(Problem(path="evaluation", message=(
            f"data.task {sf.data.task!r} has its own held-out prompts; leave out evaluation.dataset and evaluation.split")))
    if sf.data.dataset is not None and ev.dataset is None and ev.split is not None and ev.split == sf.data.split:
        problems.append(Problem(path="evaluation.split", message=(
            f"is the training split ({ev.split!r}): evaluation prompts must not be trained on; name another split, "
            "or leave it out to hold num_prompts out of the training data")))
    length = ev.max_completion_length or sf.trainer.get("max_completion_length")
    if length is not None and not (isinstance(length, int) and length >= 1):
        problems.append(Problem(path="evaluation.max_completion_length", message=f"must be a positive integer, got {length!r}"))
    return problems


def _check_attention(sf: StudyFile) -> list[Problem]:
    """model.attn_implementation: never a kernel from the hub; flash attention only where flash_attn is installed."""
    return [Problem(path="model.attn_implementation", message=m) for m in attn_problems(sf.model.attn_implementation)]
