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

Metrics that need more rows than the file has are None (a trial pruned after one step has no
stability). The functions accept a partial file (a trial still running or one that crashed).

    python -m grpo_ablate.metrics runs/tiny/trials/0/metrics.jsonl
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from grpo_ablate.vocab import HEADLINE_METRICS, METRICS_FILE, RESULT_FILE

__all__ = [
    "SMOOTHING_FRACTION",
    "STABILITY_WINDOW",
    "read_jsonl",
    "read_rows",
    "read_timings",
    "summarize",
    "summarize_file",
    "summarize_trial",
]

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


def read_timings(trial_dir: str | Path) -> dict[str, float]:
    """load_seconds / build_seconds / train_seconds / startup_seconds from result.json, when written."""
    path = Path(trial_dir) / RESULT_FILE
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    timings = raw.get("timings") or {}
    return {k: float(v) for k, v in timings.items() if _num(v) is not None}


def summarize_trial(trial_dir: str | Path) -> dict[str, Any]:
    """`summarize_file(<trial_dir>/metrics.jsonl)` plus the load/build seconds kept out of the rates."""
    out = summarize_file(Path(trial_dir) / METRICS_FILE)
    timings = read_timings(trial_dir)
    for key in ("startup_seconds", "load_seconds", "build_seconds"):
        out[key] = timings.get(key)
    return out


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Print a trial's headline metrics from its metrics.jsonl.")
    parser.add_argument("path", help="a metrics.jsonl or a trial folder")
    args = parser.parse_args(argv)
    p = Path(args.path)
    summary = summarize_trial(p) if p.is_dir() else summarize_file(p)
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
