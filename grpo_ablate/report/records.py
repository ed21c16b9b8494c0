"""Reading a study: its Optuna storage and its trial folders, as `TrialRecord`s and table rows.

    python -c "from grpo_ablate.report.records import load_trials; \
print(len(load_trials('runs/tiny-cpu/study.journal', 'tiny-cpu')[1]))"

Tolerant of what a crashed trial leaves behind: missing files, a half-written last line,
absent metric keys. Failure reasons are masked as they are read (`masked`), and so are the
study's config and storage URL when `data.build_report_data` takes them: no stage after this
one holds a password.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from grpo_ablate.contract.metrics import read_jsonl  # the one torn-line-tolerant reader of trial files
from grpo_ablate.report.evaluation import read_eval
from grpo_ablate.records import trial_record as record
from grpo_ablate.storage.store import mask_url
from grpo_ablate.records.trial_record import outcome_of
from grpo_ablate.core.vocab import DIAGNOSTIC_METRICS, GROUPS_FILE, METRICS_FILE, Arm, finite, generations_text
from grpo_ablate.config import Problem, StudyError
from grpo_ablate.storage.store import local_file, open_storage

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = [
    "TrialRecord",
    "TrialFiles",
    "load_trials",
    "record_from_trial",
    "outcome_of",
    "read_trial_files",
    "diagnostics",
    "trial_columns",
    "steps_rows",
    "groups_rows",
    "group_completions",
    "masked",
]


def masked(value: Any) -> Any:
    """The value with every URL's password hidden, in every string however deeply nested.

    A study's stored `config` carries its storage URL, and a failure reason can quote one.
    """
    if isinstance(value, str):
        return "".join(mask_url(part) for part in re.split(r"(\s+)", value))
    if isinstance(value, Mapping):
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(masked(v) for v in value)
    return value


@dataclass(frozen=True)
class TrialRecord:
    """One Optuna trial as the report sees it."""

    number: int
    state: str  # Optuna's TrialState name
    outcome: str  # an Outcome's value
    reason: str | None
    role: str  # why the trial ran: "baseline", "num_generations=4", "grid", a sampler's name
    config: Arm | None  # None when the trial never recorded its knobs
    seed: int | None
    params: dict[str, Any]
    metrics: dict[str, float | None]
    values: tuple[float, ...] | None
    trial_dir: Path | None
    duration_s: float | None = None
    datetime_start: str | None = None


def record_from_trial(ft: "FrozenTrial", names: Sequence[str],
                      diagnostics: Mapping[str, float | None] | None = None) -> TrialRecord:
    """A FrozenTrial's metrics `names` (as the ledger recorded them) plus the diagnostics read from its folder."""
    metrics: dict[str, float | None] = {m: finite(v) for m, v in record.recorded_metrics(ft, names).items()}
    for k, v in (diagnostics or {}).items():
        metrics[k] = finite(v)
    seed = record.seed_of(ft)
    if seed is None:
        seed = ft.params.get("seed")  # planned studies before the seed left the params
    tdir = record.trial_dir(ft)
    reason = record.reason(ft)
    return TrialRecord(
        number=ft.number,
        state=ft.state.name,
        outcome=record.outcome(ft).value,
        reason=masked(reason) if reason else None,
        role=record.role_of(ft),
        config=record.trial_arm(ft),  # a trial that failed before its attrs has only params
        seed=int(seed) if isinstance(seed, (int, float)) and not isinstance(seed, bool) else None,
        params=dict(ft.params),
        metrics=metrics,
        values=tuple(float(v) for v in ft.values) if ft.values is not None else None,
        trial_dir=Path(tdir) if tdir else None,
        duration_s=ft.duration.total_seconds() if ft.duration is not None else None,
        datetime_start=ft.datetime_start.isoformat(timespec="seconds") if ft.datetime_start else None,
    )


def load_trials(storage_url: str, study_name: str) -> tuple[record.StudyAttrs, list["FrozenTrial"]]:
    """The study's attributes and trials; a StudyError naming the fix when there is no such study."""
    import optuna  # lazy: Optuna only when trials are read; every command imports this module


    # opening creates a missing journal/SQLite file; a report must not conjure an empty study
    local = local_file(storage_url)
    if local is not None and not local.exists():
        raise StudyError([Problem(path="study.storage", message=(
            f"no study at {mask_url(str(local))}: run `grpo-ablate run` on this study first"))])
    storage = open_storage(storage_url)
    try:
        st = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise StudyError([Problem(path="study.name", message=(
            f"no study named {study_name!r} in {mask_url(storage_url)} (found: {names or 'none'})"))]) from None
    return record.study_attrs(st), st.get_trials(deepcopy=False)


# ---------------------------------------------------------------- trial folders


@dataclass
class TrialFiles:
    """What a trial folder held: its per-step and per-group rows."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0
    evals: list[dict[str, Any]] = field(default_factory=list)  # eval.jsonl, in point order


def read_trial_files(trial_dir: Path | None) -> TrialFiles:
    if trial_dir is None:
        return TrialFiles()
    steps, bad1 = read_jsonl(trial_dir / METRICS_FILE)
    groups, bad2 = read_jsonl(trial_dir / GROUPS_FILE)
    evals, bad3 = read_eval(trial_dir)
    return TrialFiles(steps, groups, bad1 + bad2 + bad3, evals)


def diagnostics(files: TrialFiles) -> dict[str, float | None]:
    """The trial's means of the registry's diagnostic metrics (they back the warnings)."""
    def mean_of(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
        xs = [v for v in (finite(r.get(key)) for r in rows) if v is not None]
        return math.fsum(xs) / len(xs) if xs else None

    # distinct_frac is logged per prompt group; the others per step
    return {m: mean_of(files.groups if m == "distinct_frac" else files.steps, m) for m in DIAGNOSTIC_METRICS}


def _prompt_text(prompt: Any) -> str:
    """Conversational prompts (lists of messages) become 'role: content' lines."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in prompt)
    return json.dumps(prompt, ensure_ascii=False)


def _scalar(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return json.dumps(v, ensure_ascii=False)


def trial_columns(r: TrialRecord) -> dict[str, Any]:
    """The columns that say which trial a row belongs to, on every row of every table."""
    c = r.config
    return {
        "trial": r.number,
        "role": r.role,
        "config": c.key if c else None,
        "num_generations": generations_text(c.num_generations) if c else None,
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
    base = trial_columns(r)
    out = []
    total = 0.0
    have = any(finite(s.get("completion_tokens")) is not None for s in steps)
    for s in steps:
        row = {**base, **{k: _scalar(v) for k, v in s.items() if k not in base}}
        if "num_generations" in s:  # the G in force at this step (differs from the arm's under a schedule)
            row["g_in_force"] = _scalar(s["num_generations"])
        if have:
            total += finite(s.get("completion_tokens")) or 0.0
            row["generated_tokens"] = total
        else:
            row["generated_tokens"] = finite(s.get("num_tokens"))
        out.append(row)
    return out


def group_completions(g: Mapping[str, Any]) -> tuple[list[str], list[float | None]]:
    """A group's completions and their rewards, paired.

    groups.jsonl now keeps `completions: [{"text", "reward"}]`, every completion of the group
    within the writer's size cap; older files kept a few texts (`completions: [str]`) and,
    at most, a separate `rewards` list, which is paired by position when it is as long.
    """
    comps = g.get("completions") or []
    if not isinstance(comps, list):
        comps = [comps]
    if comps and all(isinstance(c, Mapping) for c in comps):
        return [str(c.get("text", "")) for c in comps], [finite(c.get("reward")) for c in comps]
    texts = [str(c) for c in comps]
    rewards = g.get("rewards")
    if isinstance(rewards, list) and len(rewards) == len(texts):
        return texts, [finite(x) for x in rewards]
    return texts, [None] * len(texts)


def groups_rows(r: TrialRecord, groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    base = trial_columns(r)
    out = []
    for g in groups:
        texts, rewards = group_completions(g)
        out.append({
            **base,
            "step": g.get("step"),
            "prompt": _prompt_text(g.get("prompt", "")),
            "group_size": g.get("num_generations"),
            "reward_mean": finite(g.get("reward_mean")),
            "reward_var": finite(g.get("reward_var")),
            "distinct_frac": finite(g.get("distinct_frac")),
            "completions": texts,
            "rewards": rewards,
            "arm": r.config.label if r.config else None,
        })
    return out
