"""Headline metrics of one trial, computed from its `metrics.jsonl` alone.

Anyone can recompute these from the file (one JSON object per optimizer step), so the formulas
are the documentation. Notation: the *reward rows* are the rows that carry a `reward` key
(steps on which completions were generated; other steps log no reward), r_1..r_n their rewards
in step order; T is `train_seconds` of the last row (training wall time since the first step
began, excluding Python start-up, model loading and trainer construction, which are reported
separately as load_seconds and build_seconds).

- k = max(1, ceil(n / 10)): the smoothing window, 10% of the reward rows.
- start_reward = mean(r_1..r_k); final_reward = mean(r_{n-k+1}..r_n).
- reward_gain = final_reward - start_reward.
- reward_per_hour = reward_gain / (T / 3600).  Reward gained per hour of training.
- stability_variance = Var(r_i - m_i), population variance, where m_i is the centred moving
  average of the reward over a window of 5 reward rows (i-2..i+2, truncated at the ends).
  The reward's jitter around its own trend: lower is steadier. Needs n >= 3.
- samples_per_second = sum(completions) / T, with `completions` the completions generated on
  that step (all processes). With num_iterations = 1 and steps_per_generation =
  gradient_accumulation_steps (TRL's defaults) every generated completion is trained on once,
  so this is also completions trained per second.
- tokens_per_second = num_tokens(last row) / T, with num_tokens TRL's running count of prompt
  plus completion tokens over all processes.
- reward_per_million_tokens = reward_gain / (G_tok / 1e6), with
  G_tok = sum(completions_mean_length * completions) the generated (completion) tokens.
- peak_memory_mb = max(peak_memory_mb): CUDA max allocated on GPU, peak RSS of the main
  process on CPU.
- frac_reward_zero_std = mean of TRL's frac_reward_zero_std over reward rows: the share of
  groups whose G completions all scored the same (no gradient from them).

Held-out evaluation, from `eval.jsonl` (one row per evaluation point, in point order; see
trainer/evaluation.py). Notation: e_0..e_m the rows' `reward` (mean held-out reward over prompts
x samples at the study's fixed decoding), e_0 scored before the first step, e_m at the end;
c_j, N_j, T_j the row's `completions`, `generated_tokens` (training completion tokens so far)
and `train_seconds` (training time so far, evaluation time excluded).

- eval_start_reward = e_0 (the row with point 0); eval_final_reward = e_m (the last row, m >= 1).
- eval_gain = e_m - e_0.
- eval_gain_per_hour = eval_gain / (T_m / 3600).  Training time only.
- eval_gain_per_million_tokens = eval_gain / (N_m / 1e6).
- eval_auc = sum_j (N_j - N_{j-1}) x (e_j + e_{j-1}) / 2, divided by (N_m - N_0): the trapezoid
  area under the held-out curve against generated tokens, per token; the mean held-out reward
  over the run, so an arm that learns early scores higher at equal end reward.
- eval_seconds = sum of the rows' `eval_seconds`: the time spent scoring, never in T.
- to target t (the study's `evaluation.target`, or start + target_fraction x the baseline
  arm's mean eval_gain, set by the report): j* = the first row with e_j >= t;
  completions_to_target = c_j*, tokens_to_target = N_j*, seconds_to_target = T_j*,
  target_reached = True. No such row: the trial is censored at its budget, target_reached =
  False and the three values are those of the last row (c_m, N_m, T_m): shown as "not
  reached", never as if reached.

Metrics that need more rows than the file has are None (a trial pruned after one step has no
stability). The functions accept a partial file (a trial still running or one that crashed).

    python -m grpo_ablate.contract.metrics runs/tiny/trials/0/metrics.jsonl
    python -m grpo_ablate.contract.metrics runs/tiny/trials/00000     # metrics.jsonl and eval.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from grpo_ablate.core.vocab import EVAL_FILE, HEADLINE_METRICS, METRICS_FILE, RESULT_FILE

__all__ = [
    "SMOOTHING_FRACTION",
    "STABILITY_WINDOW",
    "read_jsonl",
    "read_rows",
    "read_timings",
    "summarize",
    "summarize_eval",
    "summarize_file",
    "summarize_trial",
    "to_target",
]

EVAL_KEYS = (
    "eval_start_reward", "eval_final_reward", "eval_gain", "eval_gain_per_hour",
    "eval_gain_per_million_tokens", "eval_auc", "eval_seconds",
)

# target metric -> the eval.jsonl field that measures it
TARGET_COLUMNS = {"completions_to_target": "completions", "tokens_to_target": "generated_tokens",
                  "seconds_to_target": "train_seconds"}

SMOOTHING_FRACTION = 0.1
STABILITY_WINDOW = 5


def read_jsonl(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a .jsonl file and how many lines were unreadable.

    A trial killed mid-write leaves a torn last line; it is counted and skipped, not fatal.
    """
    rows: list[dict[str, Any]] = []
    bad = 0
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    bad += 1
                    continue
                if isinstance(obj, dict):
                    rows.append(obj)
                else:
                    bad += 1
    except FileNotFoundError:
        return [], 0
    except (OSError, UnicodeDecodeError):
        return [], 1
    return rows, bad


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl; a torn last line (a crash mid-write) is skipped, not fatal."""
    return read_jsonl(path)[0]


def _num(value: Any) -> float | None:
    """A finite float, or None for missing/None/NaN values."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _moving_average(values: Sequence[float], window: int) -> list[float]:
    half = window // 2
    out = []
    for i in range(len(values)):
        lo, hi = max(0, i - half), min(len(values), i + half + 1)
        out.append(_mean(values[lo:hi]))
    return out


def _variance(values: Sequence[float]) -> float:
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / len(values)


def summarize(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline metrics of one trial from its per-step rows (see the module docstring)."""
    rows = [r for r in rows if isinstance(r, Mapping)]
    rows.sort(key=lambda r: _num(r.get("step")) or 0.0)
    out: dict[str, Any] = {name: None for name in HEADLINE_METRICS}
    out.update(steps=0, start_reward=None, completions=0, generated_tokens=0.0, frac_reward_zero_std=None)
    if not rows:
        return out

    out["steps"] = int(_num(rows[-1].get("step")) or len(rows))
    seconds = max((_num(r.get("train_seconds")) or 0.0) for r in rows)
    out["train_seconds"] = seconds if seconds > 0 else None

    rewards = [v for v in (_num(r.get("reward")) for r in rows) if v is not None]
    n = len(rewards)
    if n:
        k = max(1, math.ceil(n * SMOOTHING_FRACTION))
        out["start_reward"] = _mean(rewards[:k])
        out["final_reward"] = _mean(rewards[-k:])
        # One reward row has no "change": gain needs two distinct windows' worth of rows.
        if n >= 2:
            out["reward_gain"] = out["final_reward"] - out["start_reward"]
    if n >= 3:
        ma = _moving_average(rewards, STABILITY_WINDOW)
        out["stability_variance"] = _variance([r - m for r, m in zip(rewards, ma)])

    zero_std = [v for v in (_num(r.get("frac_reward_zero_std")) for r in rows) if v is not None]
    if zero_std:
        out["frac_reward_zero_std"] = _mean(zero_std)

    completions = sum(int(_num(r.get("completions")) or 0) for r in rows)
    generated_tokens = sum(
        (_num(r.get("completions_mean_length")) or 0.0) * (_num(r.get("completions")) or 0.0) for r in rows
    )
    out["completions"] = completions
    out["generated_tokens"] = generated_tokens
    num_tokens = max((_num(r.get("num_tokens")) or 0.0) for r in rows)

    if seconds > 0:
        hours = seconds / 3600.0
        if out["reward_gain"] is not None:
            out["reward_per_hour"] = out["reward_gain"] / hours
        out["samples_per_second"] = completions / seconds
        out["tokens_per_second"] = num_tokens / seconds if num_tokens else None
    if out["reward_gain"] is not None and generated_tokens > 0:
        out["reward_per_million_tokens"] = out["reward_gain"] / (generated_tokens / 1e6)

    memory = [v for v in (_num(r.get("peak_memory_mb")) for r in rows) if v is not None]
    out["peak_memory_mb"] = max(memory) if memory else None
    return out


def summarize_file(path: str | Path) -> dict[str, Any]:
    """`summarize` over a metrics.jsonl (missing or partial files give None metrics)."""
    return summarize(read_rows(path))


def _eval_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows with a finite reward, in point order."""
    kept = [r for r in rows if isinstance(r, Mapping) and _num(r.get("reward")) is not None]
    kept.sort(key=lambda r: (_num(r.get("point")) or 0.0, _num(r.get("completions")) or 0.0))
    return kept


def summarize_eval(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The held-out metrics of one trial from its eval.jsonl rows (see the module docstring)."""
    out: dict[str, Any] = {k: None for k in EVAL_KEYS}
    all_rows = [r for r in rows if isinstance(r, Mapping)]
    seconds = [v for v in (_num(r.get("eval_seconds")) for r in all_rows) if v is not None]
    out["eval_seconds"] = sum(seconds) if seconds else None
    rows = _eval_rows(all_rows)
    if not rows:
        return out
    first, last = rows[0], rows[-1]
    if _num(first.get("point")) == 0:
        out["eval_start_reward"] = _num(first["reward"])
    if len(rows) >= 2:
        out["eval_final_reward"] = _num(last["reward"])
    start, final = out["eval_start_reward"], out["eval_final_reward"]
    if start is None or final is None:
        return out
    gain = final - start
    out["eval_gain"] = gain
    hours = (_num(last.get("train_seconds")) or 0.0) / 3600.0
    if hours > 0:
        out["eval_gain_per_hour"] = gain / hours
    tokens = [_num(r.get("generated_tokens")) or 0.0 for r in rows]
    if tokens[-1] > 0:
        out["eval_gain_per_million_tokens"] = gain / (tokens[-1] / 1e6)
    span = tokens[-1] - tokens[0]
    if span > 0:
        rewards = [float(_num(r["reward"])) for r in rows]  # type: ignore[arg-type]
        area = sum((tokens[j] - tokens[j - 1]) * (rewards[j] + rewards[j - 1]) / 2 for j in range(1, len(rows)))
        out["eval_auc"] = area / span
    return out


def to_target(rows: Iterable[Mapping[str, Any]], target: float) -> dict[str, Any]:
    """Completions, tokens and training seconds until the held-out reward first reached `target`.

    Never reached: target_reached False and the values of the last row (the budget spent): the
    trial is censored there. No rows at all: the values are None.
    """
    rows = _eval_rows(rows)
    hit = next((r for r in rows if float(_num(r["reward"])) >= target), None)  # type: ignore[arg-type]
    at = hit if hit is not None else (rows[-1] if rows else None)
    out: dict[str, Any] = {"target_reached": hit is not None}
    for key, column in TARGET_COLUMNS.items():
        out[key] = None if at is None else (_num(at.get(column)) or 0.0)
    return out


def read_timings(trial_dir: str | Path) -> dict[str, float]:
    """load_seconds / build_seconds / train_seconds / startup_seconds from result.json, when written."""
    path = Path(trial_dir) / RESULT_FILE
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    timings = raw.get("timings") if isinstance(raw, dict) else None  # a hand-edited or foreign file
    if not isinstance(timings, dict):
        return {}
    return {str(k): float(v) for k, v in timings.items() if _num(v) is not None}


def summarize_trial(trial_dir: str | Path) -> dict[str, Any]:
    """`summarize_file(<trial_dir>/metrics.jsonl)` plus the load/build seconds kept out of the rates,
    and summarize_eval's keys when the trial has an eval.jsonl."""
    out = summarize_file(Path(trial_dir) / METRICS_FILE)
    eval_path = Path(trial_dir) / EVAL_FILE
    if eval_path.exists():
        out.update(summarize_eval(read_jsonl(eval_path)[0]))
    timings = read_timings(trial_dir)
    for key in ("startup_seconds", "load_seconds", "build_seconds"):
        out[key] = timings.get(key)
    return out


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print a trial's headline metrics from its metrics.jsonl (and eval.jsonl).")
    parser.add_argument("path", help="a metrics.jsonl or a trial folder")
    args = parser.parse_args(argv)
    p = Path(args.path)
    summary = summarize_trial(p) if p.is_dir() else summarize_file(p)
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
