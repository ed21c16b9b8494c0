"""A trial's per-step rows from what TRL itself writes: `trainer_state.json`'s log history, any TRL since 0.14.

A command trial (trainer/command_worker.py) runs the user's own training script on the user's TRL, which
this package never imports. What every TRL release writes is the Trainer's `log_history` (in
`trainer_state.json`, at each checkpoint and at the end) and one printed line per log; this module turns
those into the rows the built-in recorder writes (trainer/callbacks.py MetricsRecorder, metrics.jsonl), so
`metrics.summarize`, the report's curves and the answer read a command trial as any other. Pure: no torch.

What each TRL release logs per optimizer step (read in each release's grpo_trainer.py; `LOGGED_SINCE`):

| metric                       | 0.14-0.15 | 0.16 | 0.17 | 0.18 | 0.19+ (1.16 checked) |
|------------------------------|-----------|------|------|------|----------------------|
| reward, reward_std, kl        | yes       | yes  | yes  | yes  | yes (kl when beta != 0) |
| per-reward mean              | rewards/<f> | rewards/<f> | rewards/<f>/mean | same | same |
| completion length            | completion_length | same | completions/mean_length | same | same |
| num_tokens (tokens/s)        | -         | yes  | yes  | yes  | yes |
| clip ratio                   | -         | clip_ratio | clip_ratio/* | same | same |
| frac_reward_zero_std         | -         | -    | -    | yes  | yes |
| entropy                      | -         | -    | -    | -    | yes |

A metric a release does not log is absent from the rows (and None in the summary), never invented.
Throughput needs training seconds per row, which `log_history` does not hold: they come from the arrival
times of the printed log lines (`seconds_by_step`), anchored to the Trainer's own `train_runtime`;
without them a row's seconds are interpolated by step over train_runtime, and the rows say so
(`timing: "interpolated"`).

    python -m grpo_ablate.trainer.log_history runs/x/trials/00000/trainer/checkpoint-8/trainer_state.json
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = ["LOGGED_SINCE", "END_KEYS", "TIMING_INTERPOLATED", "TIMING_LOGGED", "is_step_entry", "read_log_history",
           "rows_from_log_history", "step_row"]

# The first TRL release that logs each headline metric (module docstring's table), for the report's words.
LOGGED_SINCE = {"reward": "0.14", "reward_std": "0.14", "kl": "0.14", "completions_mean_length": "0.14",
                "num_tokens": "0.16", "clip_ratio": "0.16", "frac_reward_zero_std": "0.18", "entropy": "0.19"}
END_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"})
TIMING_LOGGED = "logged"  # seconds from the printed log lines' arrival times
TIMING_INTERPOLATED = "interpolated"  # seconds spread over train_runtime by step

# TRL's names -> the recorder's (slashes make awkward columns), older releases' names included.
_RENAMED = {
    "completion_length": "completions_mean_length",  # TRL 0.14-0.16
    "completions/mean_length": "completions_mean_length",
    "completions/min_length": "completions_min_length",
    "completions/max_length": "completions_max_length",
    "completions/clipped_ratio": "completions_clipped_ratio",
    "completions/mean_terminated_length": "completions_mean_terminated_length",
    "completions/min_terminated_length": "completions_min_terminated_length",
    "completions/max_terminated_length": "completions_max_terminated_length",
}


def read_log_history(path: str | Path) -> list[dict[str, Any]]:
    """The `log_history` of a trainer_state.json (its own folder's, when given a checkpoint folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / "trainer_state.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    history = raw.get("log_history") if isinstance(raw, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{path}: no log_history list (not a Trainer's trainer_state.json)")
    return [e for e in history if isinstance(e, dict)]


def is_step_entry(entry: Mapping[str, Any]) -> bool:
    """A per-step training log (not the end-of-training summary, not an evaluation's)."""
    return "step" in entry and not (END_KEYS & set(entry)) and not any(str(k).startswith("eval_") for k in entry)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def step_row(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One log entry with the recorder's names: legacy per-reward keys (`rewards/<f>`) get `/mean`."""
    row: dict[str, Any] = {}
    for key, value in entry.items():
        name = _RENAMED.get(key, key)
        if name.startswith("rewards/") and name.count("/") == 1:
            name += "/mean"  # TRL 0.14-0.16 logged the per-reward mean without the suffix
        row[name] = _clean(value)
    return row


def _runtime(history: list[Mapping[str, Any]]) -> float | None:
    for entry in reversed(history):
        value = entry.get("train_runtime")
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            return float(value)
    return None


def rows_from_log_history(history: Iterable[Mapping[str, Any]], *, generated_per_step: float, round_steps: int = 1,
                          completions_trained: int, num_generations: int | None,
                          seconds_by_step: Mapping[int, float] | None = None, last_step: int | None = None,
                          after_step: int = 0) -> list[dict[str, Any]]:
    """metrics.jsonl rows (the recorder's fields) for the log entries of steps after `after_step`.

    A reward row holds the completions its generation round made (`generated_per_step` x `round_steps`,
    the plan's), as the recorder counts them: TRL logs rewards only on the steps that generated.
    `seconds_by_step`: training seconds at each step's log, where the log lines were timed; else the
    train_runtime of the summary entry spread over the steps up to `last_step` (the run's max_steps).
    """
    history = list(history)
    steps = [e for e in history if is_step_entry(e) and int(e["step"]) > after_step]
    runtime = _runtime(history)
    end = last_step or (int(steps[-1]["step"]) if steps else 0)
    made = int(round(generated_per_step * max(1, round_steps)))
    rows: list[dict[str, Any]] = []
    for entry in steps:
        step = int(entry["step"])
        row: dict[str, Any] = {"step": step}
        if seconds_by_step and step in seconds_by_step:
            row["train_seconds"], row["timing"] = round(float(seconds_by_step[step]), 4), TIMING_LOGGED
        elif runtime is not None and end > 0:
            row["train_seconds"], row["timing"] = round(runtime * step / end, 4), TIMING_INTERPOLATED
        row.update({k: v for k, v in step_row(entry).items() if k != "step"})
        if num_generations is not None:
            row["num_generations"] = num_generations
        generated = "reward" in entry
        row["completions"] = made if generated else 0
        row["completions_trained"] = completions_trained
        if generated and row.get("completions_mean_length") is not None:
            row["completion_tokens"] = round(float(row["completions_mean_length"]) * made, 2)
        rows.append(row)
    return rows


def _main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.log_history <trainer_state.json or checkpoint folder>", file=sys.stderr)
        return 2
    for row in rows_from_log_history(read_log_history(argv[0]), generated_per_step=0, completions_trained=0,
                                     num_generations=None):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
