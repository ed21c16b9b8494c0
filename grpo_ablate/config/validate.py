"""The meaning checks: a parsed study file becomes a Study, or a StudyError with every problem.

    grpo-ablate validate studies/tiny-cpu.yaml

All layers run before anything is reported: the schema (types, unknown keys with a
did-you-mean), the trainer keys against the installed TRL, and the meaning (feasible
(num_generations, generation_batch_size) pairs on this hardware, temperature > 0, objectives,
sampler and pruner, budget, names, places).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from grpo_ablate.config.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.config.hardware import space_for, world_size
from grpo_ablate.config.names import check_names
from grpo_ablate.config.places import check_places
from grpo_ablate.config.schema import FloatRange, IntRange, StudyFile, model_at
from grpo_ablate.config.study import Study
from grpo_ablate.config.trainer_fields import check_trainer_keys
from grpo_ablate.space import FeasibleSpace
from grpo_ablate.vocab import METRICS, SEARCHED_KEYS

__all__ = ["validate_dict", "objective_metrics"]


def objective_metrics() -> list[str]:
    """The metrics a study may optimise (vocab.Metric.optimisable)."""
    return sorted(name for name, m in METRICS.items() if m.optimisable)


def validate_dict(raw: dict[str, Any], source: str = "", problems: list[Problem] | None = None) -> Study:
    """Raises StudyError with every problem found, those passed in first."""
    problems = list(problems or [])
    if isinstance(raw.get("trainer"), dict):
        search = raw.get("search") if isinstance(raw.get("search"), dict) else {}
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
    problems += _check_gpus(sf)
    problems += check_names(sf)
    problems += check_places(sf)
    if problems:
        raise StudyError(problems, source)
    return Study(file=sf, path=None, space=space, warnings=warnings)


# ---------------------------------------------------------------- schema


def schema_problems(err: ValidationError) -> list[Problem]:
    """Pydantic's errors as key paths and messages; a union's alternatives give one line per path."""
    by_path: dict[str, Problem] = {}
    for e in err.errors():
        loc = [str(x) for x in e["loc"] if not _is_union_tag(x)]
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
        by_path.setdefault(path, problem)
    return list(by_path.values())


def _is_union_tag(x: Any) -> bool:
    return isinstance(x, str) and (x in {"list[int]", "list[float]", "float", "str", "int"} or
                                   x.startswith(("list[", "function-", "literal[", "IntRange", "FloatRange", "RewardSpec")))


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
            f"no (num_generations, generation_batch_size) pair is feasible on this hardware: {reasons}. "
            f"Nearest that would work: {hint}")))
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
    if st.sampler in ("grid", "ablation") and isinstance(search.temperature, FloatRange):
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
        if st.sampler not in ("grid", "ablation"):
            problems.append(Problem(path="study.racing", message=(
                f"racing applies to the grid and ablation samplers, not {st.sampler}; remove study.racing")))
        elif len(st.seeds) < st.racing.first_round_seeds:
            problems.append(Problem(path="study.racing.first_round_seeds", message=(
                f"the first round needs {st.racing.first_round_seeds} seeds but study.seeds has {len(st.seeds)}")))
        if len(st.objectives) > 1:
            problems.append(Problem(path="study.racing", message="racing compares one objective; keep one"))
    if st.sampler == "gp":
        import importlib.util

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
    return problems


def _check_gpus(sf: StudyFile) -> list[Problem]:
    problems: list[Problem] = []
    hw = sf.hardware
    server = hw.vllm.server_gpus if hw.vllm.mode == "server" else 0
    if hw.gpus is not None:
        world = world_size(sf)
        if world + server > hw.gpus and (world > 1 or server):
            problems.append(Problem(path="hardware.gpus", message=(
                f"{world} training process(es){f' + {server} vLLM server GPU(s)' if server else ''} do not fit in "
                f"{hw.gpus} GPU(s) per trial; raise hardware.gpus or lower num_processes (accelerate config) "
                f"to {max(1, hw.gpus - server)}")))
    if hw.vllm.mode == "server" and not hw.gpus:
        problems.append(Problem(path="hardware.gpus", message="vLLM server mode needs hardware.gpus (GPUs per trial, server included)"))
    return problems
