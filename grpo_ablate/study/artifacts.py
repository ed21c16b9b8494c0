"""A trial's files as Optuna artifacts: the dashboard shows its metrics table and reward curve."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from grpo_ablate.vocab import METRICS_FILE, REWARD_CURVE_FILE

if TYPE_CHECKING:
    import optuna

__all__ = ["upload_trial_artifacts", "reward_plot"]


def upload_trial_artifacts(store: "optuna.artifacts.FileSystemArtifactStore", trial: "optuna.Trial", trial_dir: Path) -> None:
    """Attach metrics.jsonl and its reward curve to the trial; OSErrors (a full disk) propagate."""
    from optuna.artifacts import upload_artifact

    metrics = trial_dir / METRICS_FILE
    if not (metrics.exists() and metrics.stat().st_size):
        return
    upload_artifact(artifact_store=store, file_path=str(metrics), study_or_trial=trial, mimetype="application/jsonl")
    png = trial_dir / REWARD_CURVE_FILE
    if reward_plot(metrics, png, f"trial {trial.number}"):
        upload_artifact(artifact_store=store, file_path=str(png), study_or_trial=trial, mimetype="image/png")


def reward_plot(metrics_path: Path, out: Path, title: str) -> bool:
    """Mean reward over training seconds as a PNG; False when there are fewer than two points."""
    from matplotlib.figure import Figure  # no pyplot: its global figure registry grows in a long sweep

    from grpo_ablate.metrics import read_rows

    xs, ys = [], []
    for row in read_rows(metrics_path):
        if row.get("reward") is not None:
            xs.append(row.get("train_seconds", row.get("step")))
            ys.append(row["reward"])
    if len(xs) < 2:
        return False
    fig = Figure(figsize=(5, 3), dpi=90)
    ax = fig.subplots()
    ax.plot(xs, ys, lw=1.2)
    ax.set_xlabel("training seconds")
    ax.set_ylabel("mean reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    return True
