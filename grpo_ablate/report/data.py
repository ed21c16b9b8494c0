"""Report data: everything the ablation report says, extracted from the study and trial folders.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
print(collect(load_study('studies/tiny-cpu.yaml')).recommendation)"

Pure extraction, no plotting and no HTML: the numbers here are what tests assert on, and
what `summary.json` (read by `grpo-ablate compare`) carries. Two layers:

- reading (`collect`, `load_trials`, `read_jsonl`): Optuna storage + each trial's
  metrics.jsonl / groups.jsonl into `TrialRecord`s and DataFrames; tolerant of what a crashed
  trial leaves behind (missing files, a half-written last line, absent metric keys);
- judging (`summarize_arms`, `best_per_objective`, `baseline_deltas`, `find_warnings`,
  `prompt_variance`, `recommendation`, ...): plain functions of those records.

An "arm" is one configuration (num_generations, generation_batch_size, temperature); its seeds
are its repetitions. Arm statistics use completed trials only (pruned trials stopped early and
OOM trials never trained), except the diagnostics behind the warnings (distinct completions,
truncation, zero reward spread), which use every trial that logged them.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pandas as pd

from grpo_ablate.metrics import read_jsonl  # one torn-line-tolerant reader for every trial file
from grpo_ablate.report.stats import Difference, MetricStat, difference, finite, stat

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import Study

__all__ = [
    "Config",
    "TrialRecord",
    "ArmSummary",
    "Best",
    "Delta",
    "Finding",
    "MetricDoc",
    "ReportData",
    "HEADLINE_METRICS",
    "DIAGNOSTIC_METRICS",
    "OUTCOMES",
    "collect",
    "build_report_data",
    "load_trials",
    "record_from_trial",
    "read_jsonl",
    "summarize_arms",
    "find_baseline",
    "best_per_objective",
    "baseline_deltas",
    "find_warnings",
    "prompt_variance",
    "success_rate",
    "zero_spread_probability",
    "pareto_front",
    "param_importances",
    "recommendation",
    "metric_docs",
    "summary_dict",
    "trials_frame",
]

# ---------------------------------------------------------------- vocabulary

OUTCOMES = ("completed", "pruned", "oom", "failed", "interrupted", "running")

# Trial user attrs the objective writes for every trial (None/absent for failed ones).
HEADLINE_METRICS = (
    "reward_per_hour",
    "final_reward",
    "reward_gain",
    "start_reward",
    "stability_variance",
    "samples_per_second",
    "tokens_per_second",
    "reward_per_million_tokens",
    "peak_memory_mb",
    "train_seconds",
    "load_seconds",
)

# Per-trial means derived here from the trial's files; they back the warnings.
DIAGNOSTIC_METRICS = ("frac_reward_zero_std", "completions_clipped_ratio", "distinct_frac")

# The ablation arm names that are really sampler names (adaptive samplers have no arms).
_SAMPLER_ARMS = frozenset({"tpe", "random", "gp", "grid", "nsga2", "cmaes", "sampler", ""})

# Warning thresholds. Each is the point past which the data says the trial wasted its budget.
NEAR_DUPLICATE_DISTINCT_FRAC = 0.5  # under half of a group's completions distinct: G is buying duplicates
TRUNCATED_CLIPPED_RATIO = 0.5  # most completions cut at max_completion_length: rewards judge cut-offs
ZERO_SPREAD_FRACTION = 0.5  # most groups with equal rewards: most prompts give no gradient
LOW_TEMPERATURE = 0.7  # below this, duplicates are the sampler's doing rather than the model's certainty


@dataclass(frozen=True)
class MetricDoc:
    """How the report names, reads and orders a metric."""

    name: str
    direction: str  # "maximize" | "minimize"
    description: str
    label: str
    unit: str = ""

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "maximize"


# Used only when grpo_ablate.metrics (the source of truth) lacks a name, e.g. the report's own
# diagnostics, or when reading a study written by a version with other metric names.
_FALLBACK_DOCS: dict[str, tuple[str, str]] = {  # name -> (direction, plain-words definition)
    "reward_per_hour": ("maximize", "Reward gained (final minus start) per hour of training wall time."),
    "final_reward": ("maximize", "Mean reward over the last steps of the trial."),
    "reward_gain": ("maximize", "Final reward minus the reward at the start of training."),
    "start_reward": ("maximize", "Mean reward over the first steps, before training changed much."),
    "stability_variance": ("minimize", "How much the reward curve fluctuates around its trend; lower is steadier."),
    "samples_per_second": ("maximize", "Completions generated and trained on per second of training."),
    "tokens_per_second": ("maximize", "Tokens processed per second of training."),
    "reward_per_million_tokens": ("maximize", "Reward gained per million tokens processed: sample efficiency."),
    "peak_memory_mb": ("minimize", "Highest accelerator (or process) memory seen during the trial, in MB."),
    "train_seconds": ("minimize", "Training wall time of the trial, in seconds."),
    "load_seconds": ("minimize", "Time to load the model, data and trainer before the first step, in seconds."),
    "frac_reward_zero_std": (
        "minimize",
        "Share of prompt groups whose completions all got the same reward: such groups have zero "
        "advantage and teach nothing (TRL's frac_reward_zero_std, averaged over steps).",
    ),
    "completions_clipped_ratio": (
        "minimize",
        "Share of completions cut off at max_completion_length (averaged over steps).",
    ),
    "distinct_frac": (
        "maximize",
        "Share of a group's completions that differ from each other (averaged over groups); low "
        "means the G samples are near duplicates.",
    ),
}


# Short human names for tables and axes; anything else reads as its name with spaces.
_LABELS = {
    "peak_memory_mb": "peak memory (MB)",
    "samples_per_second": "samples/s",
    "tokens_per_second": "tokens/s",
    "reward_per_million_tokens": "reward per M tokens",
    "train_seconds": "train time (s)",
    "load_seconds": "load time (s)",
    "frac_reward_zero_std": "zero-spread groups",
    "completions_clipped_ratio": "truncated completions",
    "distinct_frac": "distinct completions",
}


def metric_docs(names: Iterable[str]) -> dict[str, MetricDoc]:
    """Definitions from grpo_ablate.metrics.METRICS, completed by the report's own fallbacks."""
    try:
        from grpo_ablate.metrics import METRICS  # type: ignore[import-not-found]
    except Exception:  # metrics module absent or broken: the report must still render
        METRICS = {}
    out: dict[str, MetricDoc] = {}
    for name in names:
        info = METRICS.get(name) if isinstance(METRICS, Mapping) else None
        fb_dir, fb_desc = _FALLBACK_DOCS.get(name, ("maximize", ""))
        direction = getattr(info, "direction", None) or fb_dir
        description = getattr(info, "description", None) or fb_desc
        label = getattr(info, "label", None) or _LABELS.get(name) or name.replace("_", " ")
        unit = getattr(info, "unit", None) or ""
        out[name] = MetricDoc(name, str(direction), str(description), str(label), str(unit))
    return out


# ---------------------------------------------------------------- records


@dataclass(frozen=True, order=True)
class Config:
    """One arm's configuration: the three knobs this tool decides."""

    num_generations: int
    generation_batch_size: int
    temperature: float

    @property
    def key(self) -> str:
        """Stable across studies (compare matches arms on it); plan.Cell.key without the seed."""
        return f"G{self.num_generations}xB{self.generation_batch_size}|T{self.temperature:g}"

    @property
    def short(self) -> str:
        return f"G={self.num_generations}, batch {self.generation_batch_size}, T={self.temperature:g}"

    @property
    def words(self) -> str:
        return (
            f"num_generations={self.num_generations}, generation_batch_size={self.generation_batch_size}, "
            f"temperature={self.temperature:g}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "num_generations": self.num_generations,
            "generation_batch_size": self.generation_batch_size,
            "temperature": self.temperature,
        }


@dataclass(frozen=True)
class TrialRecord:
    """One Optuna trial as the report sees it."""

    number: int
    state: str  # Optuna's TrialState name
    outcome: str  # one of OUTCOMES
    reason: str | None
    arm: str
    config: Config | None  # None when the trial never recorded its knobs
    seed: int | None
    params: dict[str, Any]
    metrics: dict[str, float | None]
    values: tuple[float, ...] | None
    trial_dir: Path | None
    duration_s: float | None = None
    datetime_start: str | None = None


def outcome_of(state: str, user_attrs: Mapping[str, Any], constraints: Mapping[str, float]) -> str:
    """The objective's own word when present, else what the Optuna state implies."""
    attr = user_attrs.get("outcome")
    if isinstance(attr, str) and attr in OUTCOMES:
        return attr
    if state == "PRUNED":
        return "pruned"
    if state == "FAIL":
        return "failed"
    if state == "COMPLETE":
        return "oom" if any((finite(v) or 0.0) > 0 for v in constraints.values()) else "completed"
    return "running"


def _config_from(user_attrs: Mapping[str, Any], params: Mapping[str, Any]) -> Config | None:
    g = user_attrs.get("num_generations", params.get("num_generations"))
    b = user_attrs.get("generation_batch_size")
    label = params.get("generation")
    if isinstance(label, str) and "x" in label:
        lg, lb = label.split("x", 1)
        g = g if g is not None else lg
        b = b if b is not None else lb
    t = user_attrs.get("temperature", params.get("temperature"))
    try:
        if g is None or b is None or t is None:
            return None
        return Config(int(g), int(b), float(t))
    except (TypeError, ValueError):
        return None


def record_from_trial(ft: "FrozenTrial", diagnostics: Mapping[str, float | None] | None = None) -> TrialRecord:
    """A FrozenTrial plus the diagnostics read from its folder."""
    ua = dict(ft.user_attrs)
    state = ft.state.name
    outcome = outcome_of(state, ua, ft.constraints)
    metrics: dict[str, float | None] = {m: finite(ua.get(m)) for m in HEADLINE_METRICS}
    for k, v in ua.items():  # objectives may name metrics beyond the headline set
        if k not in metrics and isinstance(v, (int, float)) and not isinstance(v, bool) and k not in (
            "num_generations", "generation_batch_size", "temperature", "seed", "retry_of",
        ):
            metrics[k] = finite(v)
    for k, v in (diagnostics or {}).items():
        metrics[k] = finite(v)
    seed = ua.get("seed", ft.params.get("seed"))
    tdir = ua.get("trial_dir")
    reason = ua.get("reason")
    values = tuple(float(v) for v in ft.values) if ft.values is not None else None
    return TrialRecord(
        number=ft.number,
        state=state,
        outcome=outcome,
        reason=str(reason) if reason not in (None, "") else None,
        arm=str(ua.get("role", ua.get("arm", "")) or ""),
        config=_config_from(ua, ft.params),
        seed=int(seed) if isinstance(seed, (int, float)) and not isinstance(seed, bool) else None,
        params=dict(ft.params),
        metrics=metrics,
        values=values,
        trial_dir=Path(tdir) if tdir else None,
        duration_s=ft.duration.total_seconds() if ft.duration is not None else None,
        datetime_start=ft.datetime_start.isoformat(timespec="seconds") if ft.datetime_start else None,
    )




def _prompt_text(prompt: Any) -> str:
    """Conversational prompts (lists of messages) become 'role: content' lines."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in prompt)
    return json.dumps(prompt, ensure_ascii=False)


def _diagnostics(steps: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    def mean_of(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
        xs = [v for v in (finite(r.get(key)) for r in rows) if v is not None]
        return math.fsum(xs) / len(xs) if xs else None

    return {
        "frac_reward_zero_std": mean_of(steps, "frac_reward_zero_std"),
        "completions_clipped_ratio": mean_of(steps, "completions_clipped_ratio"),
        "distinct_frac": mean_of(groups, "distinct_frac"),
    }


def _scalar(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return json.dumps(v, ensure_ascii=False)


@dataclass
class TrialFiles:
    """What a trial folder held, already flattened for DataFrames."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0


def read_trial_files(trial_dir: Path | None) -> TrialFiles:
    if trial_dir is None:
        return TrialFiles()
    steps, bad1 = read_jsonl(trial_dir / "metrics.jsonl")
    groups, bad2 = read_jsonl(trial_dir / "groups.jsonl")
    return TrialFiles(steps, groups, bad1 + bad2)


def _trial_columns(r: TrialRecord) -> dict[str, Any]:
    c = r.config
    return {
        "trial": r.number,
        "arm": r.arm,
        "config": c.key if c else None,
        "num_generations": c.num_generations if c else None,
        "generation_batch_size": c.generation_batch_size if c else None,
        "temperature": c.temperature if c else None,
        "seed": r.seed,
        "outcome": r.outcome,
    }


def steps_rows(r: TrialRecord, steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The trial's steps with its knobs on every row, plus `generated_tokens`.

    generated_tokens is the running sum of `completion_tokens` (tokens the policy generated);
    TRL's own `num_tokens` also counts prompt tokens, so it is the fallback only.
    """
    base = _trial_columns(r)
    out = []
    total = 0.0
    have = any(finite(s.get("completion_tokens")) is not None for s in steps)
    for s in steps:
        row = {**base, **{k: _scalar(v) for k, v in s.items() if k not in base}}
        if have:
            total += finite(s.get("completion_tokens")) or 0.0
            row["generated_tokens"] = total
        else:
            row["generated_tokens"] = finite(s.get("num_tokens"))
        out.append(row)
    return out


def groups_rows(r: TrialRecord, groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    base = _trial_columns(r)
    out = []
    for g in groups:
        comps = g.get("completions") or []
        out.append({
            **base,
            "step": g.get("step"),
            "prompt": _prompt_text(g.get("prompt", "")),
            "group_size": g.get("num_generations"),
            "reward_mean": finite(g.get("reward_mean")),
            "reward_var": finite(g.get("reward_var")),
            "distinct_frac": finite(g.get("distinct_frac")),
            "completions": [str(x) for x in comps] if isinstance(comps, list) else [str(comps)],
        })
    return out


# ---------------------------------------------------------------- arms


@dataclass(frozen=True)
class ArmSummary:
    """One configuration over its seeds."""

    name: str
    config: Config
    trials: tuple[int, ...]
    seeds: tuple[int, ...]  # seeds of the completed trials
    outcomes: dict[str, int]
    metrics: dict[str, MetricStat]  # completed trials only (diagnostics: every trial that logged them)
    is_baseline: bool = False

    @property
    def n(self) -> int:
        return len(self.seeds) if self.seeds else self.outcomes.get("completed", 0)

    @property
    def title(self) -> str:
        """What tables and legends call the arm."""
        return self.name if self.name != self.config.short else self.config.short


def _arm_name(arms: Iterable[str], config: Config) -> str:
    names = sorted({a for a in arms if a and a.lower() not in _SAMPLER_ARMS})
    if "baseline" in names:
        return "baseline"
    return names[0] if len(names) == 1 else config.short


def summarize_arms(records: Sequence[TrialRecord], metric_names: Sequence[str], baseline: Config | None = None) -> list[ArmSummary]:
    """Group trials by configuration; baseline first, then by G, batch, temperature."""
    by_config: dict[Config, list[TrialRecord]] = defaultdict(list)
    for r in records:
        if r.config is not None:
            by_config[r.config].append(r)
    arms: list[ArmSummary] = []
    for cfg, rs in by_config.items():
        done = [r for r in rs if r.outcome == "completed"]
        metrics: dict[str, MetricStat] = {}
        for m in metric_names:
            pool = rs if m in DIAGNOSTIC_METRICS else done
            metrics[m] = stat(r.metrics.get(m) for r in pool)
        arms.append(ArmSummary(
            name=_arm_name((r.arm for r in rs), cfg),
            config=cfg,
            trials=tuple(sorted(r.number for r in rs)),
            seeds=tuple(sorted(r.seed for r in done if r.seed is not None)),
            outcomes=dict(Counter(r.outcome for r in rs)),
            metrics=metrics,
            is_baseline=(baseline is not None and cfg == baseline),
        ))
    arms.sort(key=lambda a: (not a.is_baseline, a.config))
    return arms


def find_baseline(attr: Mapping[str, Any] | None, configs: Iterable[Config], arm_names: Mapping[Config, str] | None = None) -> Config | None:
    """The configuration the study called its baseline, if any trial ran it.

    Matches the keys the baseline attr gives (missing ones match anything); an arm named
    "baseline" wins a tie, then the smallest configuration.
    """
    configs = sorted(set(configs))
    names = arm_names or {}
    named = [c for c in configs if names.get(c) == "baseline"]
    if not attr:
        return named[0] if named else None

    def matches(c: Config) -> bool:
        g, b, t = attr.get("num_generations"), attr.get("generation_batch_size"), attr.get("temperature")
        return (
            (g is None or int(g) == c.num_generations)
            and (b is None or int(b) == c.generation_batch_size)
            and (t is None or math.isclose(float(t), c.temperature, rel_tol=1e-9, abs_tol=1e-12))
        )

    hits = [c for c in configs if matches(c)]
    for c in hits:
        if c in named:
            return c
    return hits[0] if hits else (named[0] if named else None)


@dataclass(frozen=True)
class Best:
    metric: str
    direction: str
    arm: ArmSummary
    stat: MetricStat


def best_per_objective(arms: Sequence[ArmSummary], objectives: Sequence[tuple[str, str]]) -> dict[str, Best | None]:
    """The arm with the best mean per objective; ties go to more seeds, then to the baseline."""
    out: dict[str, Best | None] = {}
    for metric, direction in objectives:
        cands = [a for a in arms if metric in a.metrics and a.metrics[metric].mean is not None]
        if not cands:
            out[metric] = None
            continue
        sign = 1.0 if direction == "maximize" else -1.0
        best = max(cands, key=lambda a: (sign * a.metrics[metric].mean, a.metrics[metric].n, a.is_baseline))  # type: ignore[operator]
        out[metric] = Best(metric, direction, best, best.metrics[metric])
    return out


# ---------------------------------------------------------------- deltas in words


def fmt(x: float | None, digits: int = 3) -> str:
    """Three significant digits, no scientific notation for everyday magnitudes."""
    if x is None or not math.isfinite(x):
        return "–"
    if x == 0:
        return "0"
    mag = abs(x)
    if mag >= 1e6 or mag < 1e-3:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(mag))))
    text = f"{x:,.{decimals}f}"
    return text


def fmt_stat_short(s: MetricStat | None) -> str:
    """'1.24 ± 0.10' for table cells whose seed count is shown once per row."""
    if s is None or s.mean is None:
        return "–"
    if s.half_width is None:
        return fmt(s.mean)
    return f"{fmt(s.mean)} ± {fmt(s.half_width, 2)}"


def fmt_stat(s: MetricStat | None) -> str:
    """'1.24 ± 0.10 (3 seeds)'; a single seed says so rather than pretending to certainty."""
    if s is None or s.mean is None:
        return "–"
    if s.half_width is None:
        return f"{fmt(s.mean)} (1 seed)"
    return f"{fmt(s.mean)} ± {fmt(s.half_width, 2)} ({s.n} seeds)"


@dataclass(frozen=True)
class Delta:
    metric: str
    arm: str
    baseline: MetricStat
    value: MetricStat
    diff: Difference
    better: bool | None  # None: no change
    words: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline.mean,
            "value": self.value.mean,
            "delta": self.diff.delta,
            "relative": self.diff.relative,
            "ci95": list(self.diff.ci95) if self.diff.ci95 else None,
            "clear": self.diff.clear,
            "better": self.better,
            "words": self.words,
        }


def delta_words(doc: MetricDoc, arm_title: str, base_title: str, value: MetricStat, base: MetricStat, diff: Difference, better: bool | None) -> str:
    """One sentence a person can act on: how much, which way, and whether noise could explain it."""
    how = f"({fmt(value.mean)} vs {fmt(base.mean)})"
    if diff.delta == 0:
        return f"{arm_title}: {doc.label} is the same as {base_title} {how}."
    if diff.relative is not None:
        size = f"{abs(diff.relative) * 100:.0f}% {'higher' if diff.delta > 0 else 'lower'}"
    else:
        size = f"{fmt(abs(diff.delta))} {'higher' if diff.delta > 0 else 'lower'}"
    verdict = "better" if better else "worse"
    if diff.clear is True:
        noise = f"a difference larger than the seed-to-seed spread ({value.n} vs {base.n} seeds)"
    elif diff.clear is False:
        noise = f"within the seed-to-seed spread, so not a reliable difference ({value.n} vs {base.n} seeds)"
    else:
        noise = "from a single seed, so the seed-to-seed spread is unknown"
    return f"{arm_title}: {doc.label} is {size} than {base_title} {how}: {verdict}, {noise}."


def baseline_deltas(arms: Sequence[ArmSummary], docs: Mapping[str, MetricDoc]) -> dict[str, dict[str, Delta]]:
    """Every arm against the baseline arm, per metric, in numbers and in words."""
    base = next((a for a in arms if a.is_baseline), None)
    if base is None:
        return {}
    out: dict[str, dict[str, Delta]] = {}
    for arm in arms:
        if arm.is_baseline:
            continue
        row: dict[str, Delta] = {}
        for metric, doc in docs.items():
            a, b = base.metrics.get(metric), arm.metrics.get(metric)
            if a is None or b is None:
                continue
            diff = difference(a, b)
            if diff is None:
                continue
            better = None if diff.delta == 0 else ((diff.delta > 0) == doc.higher_is_better)
            words = delta_words(doc, arm.title, f"the baseline ({base.config.short})", b, a, diff, better)
            row[metric] = Delta(metric, arm.name, a, b, diff, better, words)
        out[arm.name] = row
    return out


# ---------------------------------------------------------------- warnings


@dataclass(frozen=True)
class Finding:
    """A warning the data supports, with the trials that show it."""

    kind: str  # near_duplicates | truncated | zero_spread | oom | failed | interrupted | running | single_seed | no_baseline | unreadable
    message: str
    trials: tuple[int, ...] = ()
    severity: str = "warning"  # warning | info

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "message": self.message, "trials": list(self.trials)}


def zero_spread_probability(p: float, num_generations: int) -> float:
    """Chance that G samples of a binary reward with success rate p all agree: p^G + (1-p)^G."""
    return p**num_generations + (1 - p) ** num_generations


def find_warnings(records: Sequence[TrialRecord], arms: Sequence[ArmSummary], bad_lines: int = 0,
                  success_p: float | None = None) -> list[Finding]:
    """Problems worth a person's attention, each stated with the numbers behind it."""
    out: list[Finding] = []
    for a in arms:
        d = a.metrics.get("distinct_frac")
        if d is not None and d.mean is not None and d.mean < NEAR_DUPLICATE_DISTINCT_FRAC:
            head = f"{a.title}: only {d.mean * 100:.0f}% of each group's completions are distinct on average"
            if a.config.temperature < LOW_TEMPERATURE:
                advice = (f"; temperature {a.config.temperature:g} is too low for G={a.config.num_generations} "
                          f"(raise the temperature or lower num_generations: duplicates add cost, not contrast).")
            else:
                advice = (f" at temperature {a.config.temperature:g}: the G={a.config.num_generations} samples mostly "
                          f"repeat each other, so a larger G buys duplicates rather than contrast. Raise the "
                          f"temperature or use a smaller G (with short exact answers some repetition is expected "
                          f"as the model learns).")
            out.append(Finding("near_duplicates", head + advice, a.trials))
    for a in arms:
        c = a.metrics.get("completions_clipped_ratio")
        if c is not None and c.mean is not None and c.mean > TRUNCATED_CLIPPED_RATIO:
            out.append(Finding(
                "truncated",
                f"{a.title}: {c.mean * 100:.0f}% of completions were cut off at max_completion_length; "
                f"the reward is judging unfinished answers (raise trainer.max_completion_length).",
                a.trials,
            ))
    for a in arms:
        z = a.metrics.get("frac_reward_zero_std")
        if z is not None and z.mean is not None and z.mean > ZERO_SPREAD_FRACTION:
            expect = ""
            if success_p is not None and 0 <= success_p <= 1:
                expect = (f" (a binary reward at the measured success rate {success_p:.2f} predicts "
                          f"{zero_spread_probability(success_p, a.config.num_generations) * 100:.0f}%)")
            out.append(Finding(
                "zero_spread",
                f"{a.title}: {z.mean * 100:.0f}% of groups had no reward spread{expect}; those prompts give "
                f"zero advantage and no gradient (raise num_generations, or use easier/harder prompts).",
                a.trials,
            ))
    ooms = [r for r in records if r.outcome == "oom" and r.config is not None]
    if ooms:
        out.append(_oom_finding(records, ooms))
    failed = [r for r in records if r.outcome == "failed"]
    by_reason: dict[str, list[TrialRecord]] = defaultdict(list)
    for r in failed:
        by_reason[r.reason or "no reason recorded"].append(r)
    for reason, rs in sorted(by_reason.items(), key=lambda kv: kv[1][0].number):
        which = ", ".join(f"#{r.number}" + (f" ({r.config.short})" if r.config else "") for r in rs)
        out.append(Finding("failed", f"{len(rs)} trial(s) failed: {which}. Reason: {_clip(reason, 400)}",
                           tuple(r.number for r in rs)))
    # interrupted trials are re-queued by the study, running ones belong to live workers: news, not faults
    for kind, text in (("interrupted", "were interrupted (a resumed study retries them)"),
                       ("running", "were still running when this report was written")):
        rs = [r for r in records if r.outcome == kind]
        if rs:
            out.append(Finding(kind, f"{len(rs)} trial(s) {text}: " + ", ".join(f"#{r.number}" for r in rs) + ".",
                               tuple(r.number for r in rs), severity="info"))
    ran = [a for a in arms if a.n > 0]
    if ran and all(a.n == 1 for a in ran) and len(ran) > 1:
        out.append(Finding(
            "single_seed",
            "Every configuration ran one seed: differences between them may be seed noise. "
            "Add seeds (study.seeds) before trusting a small difference.",
            severity="info",
        ))
    if ran and not any(a.is_baseline for a in arms):
        out.append(Finding("no_baseline", "The baseline configuration was not run: no deltas vs baseline.",
                           severity="info"))
    if bad_lines:
        out.append(Finding("unreadable", f"{bad_lines} line(s) of trial metrics/groups files were unreadable "
                           f"(usually a trial stopped mid-write) and were skipped.", severity="info"))
    return out


def _oom_finding(records: Sequence[TrialRecord], ooms: Sequence[TrialRecord]) -> Finding:
    """Where memory ran out, whether that configuration is at the edge (some seeds fit) or beyond it."""
    def size(c: Config) -> tuple[int, int]:
        return (c.generation_batch_size, c.num_generations)

    oom_cfgs = sorted({r.config for r in ooms if r.config is not None}, key=size)
    first = oom_cfgs[0]
    parts = []
    for c in oom_cfgs:
        n_oom = sum(1 for r in ooms if r.config == c)
        n_all = sum(1 for r in records if r.config == c)
        edge = " (other seeds fit: at the edge of memory)" if any(
            r.config == c and r.outcome == "completed" for r in records) else ""
        parts.append(f"{c.short}: {n_oom} of {n_all} trial(s){edge}")
    msg = (f"Out of memory began at num_generations={first.num_generations} with generation batch "
           f"{first.generation_batch_size}. " + "; ".join(parts) + ".")
    clean = [r.config for r in records if r.outcome == "completed" and r.config is not None and r.config not in oom_cfgs]
    if clean:
        big = max(clean, key=size)
        msg += f" The largest configuration that never ran out of memory: {big.short}."
    return Finding("oom", msg, tuple(r.number for r in ooms))


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ---------------------------------------------------------------- prompts and groups


PROMPT_COLUMNS = ["prompt", "groups", "trials", "mean_reward_var", "max_reward_var", "mean_reward",
                  "mean_distinct_frac", "example_completions"]


def prompt_variance(groups: pd.DataFrame) -> pd.DataFrame:
    """Prompts ranked by how much rewards vary within their groups: where the model is unsure.

    Each prompt's score is the mean within-group reward variance over every group it appeared
    in (all trials, all steps); its example completions come from its most varied group.
    """
    if groups.empty or "reward_var" not in groups:
        return pd.DataFrame(columns=PROMPT_COLUMNS)
    g = groups[groups["reward_var"].notna()]
    if g.empty:
        return pd.DataFrame(columns=PROMPT_COLUMNS)
    by = g.groupby("prompt", sort=False)
    out = by.agg(
        groups=("reward_var", "size"),
        trials=("trial", "nunique"),
        mean_reward_var=("reward_var", "mean"),
        max_reward_var=("reward_var", "max"),
        mean_reward=("reward_mean", "mean"),
        mean_distinct_frac=("distinct_frac", "mean"),
    )
    top = by["reward_var"].idxmax()  # row label of each prompt's most varied group
    out["example_completions"] = [list(c) for c in g.loc[top.loc[out.index].to_numpy(), "completions"]]
    out = out.reset_index()[PROMPT_COLUMNS]
    out[["groups", "trials"]] = out[["groups", "trials"]].astype(int)
    return out.sort_values(["mean_reward_var", "groups", "prompt"], ascending=[False, False, True],
                           kind="stable").reset_index(drop=True)


def success_rate(records: Sequence[TrialRecord], groups: pd.DataFrame, steps: pd.DataFrame) -> tuple[float | None, bool]:
    """The mean reward of completed trials, as the success rate p of a binary reward.

    Returns (p, in_unit_range); p is clipped to [0, 1] and in_unit_range says whether the
    rewards looked like probabilities at all (the p^G + (1-p)^G curve assumes they do).
    """
    done = {r.number for r in records if r.outcome == "completed"}
    vals: pd.Series
    if not groups.empty and "reward_mean" in groups:
        vals = groups.loc[groups["trial"].isin(done), "reward_mean"].dropna()
    else:
        vals = pd.Series(dtype=float)
    if vals.empty and not steps.empty and "reward" in steps:
        vals = pd.to_numeric(steps.loc[steps["trial"].isin(done), "reward"], errors="coerce").dropna()
    if vals.empty:
        return None, False
    p = float(vals.mean())
    unit = bool(vals.min() >= 0 and vals.max() <= 1)
    return min(1.0, max(0.0, p)), unit


# ---------------------------------------------------------------- multi-objective and importance


def pareto_front(points: Sequence[tuple[int, Sequence[float]]], directions: Sequence[str]) -> set[int]:
    """Numbers of the non-dominated points (no other point at least as good everywhere, better somewhere)."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    scored = [(n, [s * v for s, v in zip(signs, vals)]) for n, vals in points]
    front = set()
    for n, v in scored:
        dominated = any(
            all(o >= x for o, x in zip(ov, v)) and any(o > x for o, x in zip(ov, v))
            for m, ov in scored if m != n
        )
        if not dominated:
            front.add(n)
    return front


def param_importances(frozen: Sequence["FrozenTrial"], feasible: set[int],
                      objectives: Sequence[tuple[str, str]]) -> tuple[dict[str, dict[str, float]], str | None]:
    """Optuna's parameter importances per objective, over completed feasible trials only.

    OOM trials are COMPLETE with a violated constraint; their objective values are not results,
    so they are left out by copying the feasible trials into an in-memory study per objective.
    Returns (importances, note): the note says why nothing could be computed.
    """
    import optuna

    trials = [t for t in frozen if t.number in feasible and t.values is not None]
    varying = {k for t in trials for k in t.params if len({repr(u.params.get(k)) for u in trials}) > 1}
    if len(trials) < 3 or not varying:
        return {}, "needs at least 3 completed trials with a parameter that varies"
    out: dict[str, dict[str, float]] = {}
    notes = []
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the scratch studies are not news
    try:
        return _importances(trials, varying, objectives, out, notes)
    finally:
        optuna.logging.set_verbosity(verbosity)


def _importances(trials: Sequence["FrozenTrial"], varying: set[str], objectives: Sequence[tuple[str, str]],
                 out: dict[str, dict[str, float]], notes: list[str]) -> tuple[dict[str, dict[str, float]], str | None]:
    import optuna

    for i, (metric, direction) in enumerate(objectives):
        st = optuna.create_study(direction=direction)
        for t in trials:
            if i >= len(t.values):
                continue
            st.add_trial(optuna.trial.create_trial(
                params=t.params, distributions=t.distributions, value=t.values[i],
            ))
        try:
            imp = optuna.importance.get_param_importances(st, params=sorted(varying))
        except Exception as e:  # evaluator limits (too few distinct values, ...) are not report errors
            notes.append(f"{metric}: {type(e).__name__}: {e}")
            continue
        out[metric] = {k: float(v) for k, v in imp.items()}
    return out, ("; ".join(notes) or None)


# ---------------------------------------------------------------- the answer


def recommendation(best: Mapping[str, Best | None], deltas: Mapping[str, Mapping[str, Delta]],
                   arms: Sequence[ArmSummary], objectives: Sequence[tuple[str, str]],
                   docs: Mapping[str, MetricDoc]) -> str:
    """The sentence a person acts on, judged on the first objective."""
    if not objectives:
        return "The study has no objectives: nothing to recommend."
    primary = objectives[0][0]
    b = best.get(primary)
    if b is None:
        return "No configuration completed yet: nothing to recommend. Run (or resume) the study."
    label = docs[primary].label if primary in docs else primary
    base = next((a for a in arms if a.is_baseline), None)
    cfg = b.arm.config.words
    if base is None:
        text = (f"Use {cfg}: it had the best {label}, {fmt_stat(b.stat)}. The baseline was not run, "
                f"so there is no comparison to the default.")
    elif b.arm.is_baseline:
        text = f"Keep the baseline ({cfg}): no other configuration beat its {label}, {fmt_stat(b.stat)}."
    else:
        d = deltas.get(b.arm.name, {}).get(primary)
        bs = base.metrics.get(primary)
        pct = (f"{abs(d.diff.relative) * 100:.0f}% {'higher' if d.diff.delta > 0 else 'lower'}"
               if d is not None and d.diff.relative is not None else "different")
        versus = f"{fmt(b.stat.mean)} vs {fmt(bs.mean if bs else None)} for the baseline {base.config.short}"
        if d is not None and d.diff.clear:
            text = (f"Use {cfg}: its {label} was {pct} than the baseline's ({versus}), "
                    f"more than the seed-to-seed spread explains.")
        elif d is not None and d.diff.clear is False:
            text = (f"Keep the baseline ({base.config.words}) for now: {b.arm.config.short} had the best {label} "
                    f"({pct}: {fmt(b.stat.mean)} vs {fmt(bs.mean if bs else None)}), but the difference is within "
                    f"the seed-to-seed spread; add seeds (study.seeds) to confirm it.")
        else:
            text = (f"Try {cfg}: it had the best {label} ({pct} than the baseline: {versus}), from a single "
                    f"seed per configuration; add seeds (study.seeds) before switching for good.")
    for metric, _ in objectives[1:]:
        o = best.get(metric)
        if o is not None and o.arm.config != b.arm.config:
            olabel = docs[metric].label if metric in docs else metric
            text += f" For {olabel} the best was {o.arm.config.short} ({fmt_stat(o.stat)}): see the Pareto front."
    return text


# ---------------------------------------------------------------- everything together


@dataclass
class ReportData:
    """All the report shows; built by `collect` (storage) or `build_report_data` (tests)."""

    study_name: str
    objectives: list[tuple[str, str]]
    docs: dict[str, MetricDoc]
    records: list[TrialRecord]
    arms: list[ArmSummary]
    baseline: Config | None
    best: dict[str, Best | None]
    deltas: dict[str, dict[str, Delta]]
    warnings: list[Finding]
    steps: pd.DataFrame
    groups: pd.DataFrame
    prompts: pd.DataFrame
    success_p: float | None
    success_p_unit: bool
    pareto: set[int]
    importances: dict[str, dict[str, float]]
    importance_note: str | None
    recommendation: str
    config: dict[str, Any]
    versions: dict[str, Any]
    hardware: str | None
    baseline_attr: dict[str, Any]
    storage_url: str | None = None
    generated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.outcome for r in self.records)
        return {k: int(c.get(k, 0)) for k in OUTCOMES}

    @property
    def metric_names(self) -> list[str]:
        return list(self.docs)


def _objectives(user_attrs: Mapping[str, Any], fallback: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    objs = user_attrs.get("objectives")
    out: list[tuple[str, str]] = []
    if isinstance(objs, list):
        for o in objs:
            if isinstance(o, dict) and o.get("metric"):
                m = str(o["metric"])
                d = o.get("direction") or metric_docs([m])[m].direction
                out.append((m, str(d)))
    return out or list(fallback)


def build_report_data(
    study_name: str,
    study_user_attrs: Mapping[str, Any],
    frozen: Sequence["FrozenTrial"],
    fallback_objectives: Sequence[tuple[str, str]] = (("reward_per_hour", "maximize"),),
    fallback_config: Mapping[str, Any] | None = None,
    storage_url: str | None = None,
) -> ReportData:
    """Extract everything from a study's attrs and trials (and the trial folders they point to)."""
    objectives = _objectives(study_user_attrs, fallback_objectives)
    records: list[TrialRecord] = []
    step_rows: list[dict[str, Any]] = []
    group_rows: list[dict[str, Any]] = []
    bad_lines = 0
    for ft in sorted(frozen, key=lambda t: t.number):
        tdir = ft.user_attrs.get("trial_dir")
        files = read_trial_files(Path(tdir) if tdir else None)
        bad_lines += files.bad_lines
        r = record_from_trial(ft, _diagnostics(files.steps, files.groups))
        records.append(r)
        step_rows += steps_rows(r, files.steps)
        group_rows += groups_rows(r, files.groups)
    steps = pd.DataFrame(step_rows)
    groups = pd.DataFrame(group_rows)

    names = list(HEADLINE_METRICS)
    for m, _ in objectives:
        if m not in names:
            names.insert(0, m)
    names += list(DIAGNOSTIC_METRICS)
    docs = metric_docs(names)
    for m, d in objectives:  # the study's direction wins for its objectives
        docs[m] = MetricDoc(m, d, docs[m].description, docs[m].label, docs[m].unit)

    baseline_attr = dict(study_user_attrs.get("baseline") or {})
    provisional = summarize_arms(records, [])
    baseline = find_baseline(baseline_attr, [a.config for a in provisional], {a.config: a.name for a in provisional})
    arms = summarize_arms(records, names, baseline)
    best = best_per_objective(arms, objectives)
    deltas = baseline_deltas(arms, docs)
    p, unit = success_rate(records, groups, steps)
    warnings = find_warnings(records, arms, bad_lines, p if unit else None)

    feasible_done = [r for r in records if r.outcome == "completed" and r.values is not None]
    pareto = pareto_front([(r.number, r.values) for r in feasible_done], [d for _, d in objectives]) \
        if len(objectives) > 1 else set()  # type: ignore[misc]
    importances, note = param_importances(frozen, {r.number for r in feasible_done}, objectives)

    return ReportData(
        study_name=study_name,
        objectives=objectives,
        docs=docs,
        records=records,
        arms=arms,
        baseline=baseline,
        best=best,
        deltas=deltas,
        warnings=warnings,
        steps=steps,
        groups=groups,
        prompts=prompt_variance(groups),
        success_p=p,
        success_p_unit=unit,
        pareto=pareto,
        importances=importances,
        importance_note=note,
        recommendation=recommendation(best, deltas, arms, objectives, docs),
        config=dict(study_user_attrs.get("config") or fallback_config or {}),
        versions=dict(study_user_attrs.get("versions") or {}),
        hardware=study_user_attrs.get("hardware"),
        baseline_attr=baseline_attr,
        storage_url=storage_url,
    )


def load_trials(storage_url: str, study_name: str) -> tuple[dict[str, Any], list["FrozenTrial"]]:
    """The study's user attrs and trials; a StudyError naming the fix when there is no such study."""
    import optuna

    from grpo_ablate.config import Problem, StudyError
    from grpo_ablate.storage import is_rdb_url, open_storage

    # opening creates a missing journal/SQLite file; a report must not conjure an empty study
    local = storage_url[len("sqlite:///"):] if storage_url.startswith("sqlite:///") else (
        None if is_rdb_url(storage_url) else storage_url.removeprefix("journal:"))
    if local is not None and not os.path.exists(local):
        raise StudyError([Problem(path="study.storage", message=(
            f"no study at {local}: run `grpo-ablate run` on this study first"))])
    storage = open_storage(storage_url)
    try:
        st = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise StudyError([Problem(path="study.name", message=(
            f"no study named {study_name!r} in {storage_url} (found: {names or 'none'})"))]) from None
    return dict(st.user_attrs), st.get_trials(deepcopy=False)


def collect(study: "Study") -> ReportData:
    """Everything the report needs for a loaded study file."""
    try:
        fallback = list(zip(study.metric_names, study.directions))
    except Exception:  # metrics module not importable: directions from the report's table
        fallback = [(m, metric_docs([m])[m].direction) for m in study.metric_names]
    attrs, frozen = load_trials(study.storage_url, study.study.name)
    return build_report_data(study.study.name, attrs, frozen, fallback, study.to_dict(), study.storage_url)


# ---------------------------------------------------------------- machine-readable exports


def summary_dict(data: ReportData) -> dict[str, Any]:
    """summary.json: the stable contract `grpo-ablate compare` and CI read."""
    best: dict[str, Any] = {}
    for metric, b in data.best.items():
        best[metric] = None if b is None else {
            "arm": b.arm.name,
            "params": b.arm.config.as_dict(),
            "mean": b.stat.mean,
            "ci95": list(b.stat.ci95) if b.stat.ci95 else None,
            "n": b.stat.n,
        }
    arms = [{
        "arm": a.name,
        "key": a.config.key,
        **a.config.as_dict(),
        "n": a.n,
        "is_baseline": a.is_baseline,
        "outcomes": a.outcomes,
        "metrics": {m: s.as_dict() for m, s in a.metrics.items()},
    } for a in data.arms]
    base = next((a for a in data.arms if a.is_baseline), None)
    return {
        "schema": 1,
        "study": data.study_name,
        "generated_at": data.generated_at,
        "objectives": [{"metric": m, "direction": d} for m, d in data.objectives],
        "metrics": {m: {"direction": d.direction, "description": d.description} for m, d in data.docs.items()},
        "recommendation": data.recommendation,
        "best": best,
        "arms": arms,
        "baseline": ({"arm": base.name, **base.config.as_dict()} if base else None),
        "deltas_vs_baseline": {arm: {m: d.as_dict() for m, d in row.items()} for arm, row in data.deltas.items()},
        "warnings": [w.as_dict() for w in data.warnings],
        "versions": data.versions,
        "hardware": data.hardware,
        "trials": data.counts,
    }


def trials_frame(data: ReportData) -> pd.DataFrame:
    """trials.csv: one row per trial with its knobs, outcome, objective values and metrics."""
    rows = []
    for r in data.records:
        row = _trial_columns(r)
        row.update({
            "state": r.state,
            "reason": r.reason,
            "params": json.dumps(r.params, sort_keys=True),
            "duration_s": r.duration_s,
            "datetime_start": r.datetime_start,
            "trial_dir": str(r.trial_dir) if r.trial_dir else None,
        })
        for i, (m, _) in enumerate(data.objectives):
            row[f"value_{m}"] = r.values[i] if r.values is not None and i < len(r.values) else None
        row.update(r.metrics)
        rows.append(row)
    return pd.DataFrame(rows)
