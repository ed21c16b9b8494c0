"""A trial's files as Optuna artifacts: the dashboard shows its headline metrics, metrics table and reward curve.

    grpo-ablate dashboard studies/tiny-cpu.yaml     # a trial's page lists these under Artifacts

The reward curve's title names the trial's arm and seed (vocab Cell labels), so a saved PNG
still says what it shows.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.core.vocab import HEADLINE_FILE, METRICS, METRICS_FILE, REWARD_CURVE_FILE, Cell, finite
from grpo_ablate.contract.metrics import read_rows, summarize_trial
from grpo_ablate.records.trial_record import cell_of

if TYPE_CHECKING:
    import optuna

__all__ = ["upload_trial_artifacts", "reward_plot", "curve_title", "headline_rows"]



def curve_title(number: int, cell: Cell | None) -> str:
    """"trial 3: G=8, batch 64, T=0.9, seed 1 (baseline)" from the trial's cell; "trial 3" without one."""
    if cell is None:
        return f"trial {number}"
    role = f" ({cell.role})" if cell.role else ""
    return f"trial {number}: {cell.arm.label}, seed {cell.seed}{role}"


def headline_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per headline metric the trial measured: name, label, value, unit, better."""
    rows = []
    for name, m in METRICS.items():
        value = finite(metrics.get(name))
        if m.headline and value is not None:
            better = {"maximize": "higher", "minimize": "lower"}.get(m.direction or "", "")
            rows.append({"metric": name, "label": m.label, "value": f"{value:.6g}", "unit": m.unit, "better": better})
    return rows


def upload_trial_artifacts(store: "optuna.artifacts.FileSystemArtifactStore", trial: "optuna.Trial", trial_dir: Path) -> None:
    """Attach the headline table, metrics.jsonl and the reward curve to the trial; OSErrors (a full disk) propagate."""
    # lazy: Optuna only when files are uploaded; every command imports study/
    from optuna.artifacts import upload_artifact


    metrics = trial_dir / METRICS_FILE
    if not (metrics.exists() and metrics.stat().st_size):
        return
    rows = headline_rows(summarize_trial(trial_dir))
    if rows:
        table = trial_dir / HEADLINE_FILE
        with table.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        upload_artifact(artifact_store=store, file_path=str(table), study_or_trial=trial, mimetype="text/csv")
    upload_artifact(artifact_store=store, file_path=str(metrics), study_or_trial=trial, mimetype="application/jsonl")
    png = trial_dir / REWARD_CURVE_FILE
    if reward_plot(metrics, png, curve_title(trial.number, cell_of(trial))):
        upload_artifact(artifact_store=store, file_path=str(png), study_or_trial=trial, mimetype="image/png")


def reward_plot(metrics_path: Path, out: Path, title: str) -> bool:
    """Mean reward over training seconds as a PNG; False when there are fewer than two points."""
    from matplotlib.figure import Figure  # no pyplot: its global figure registry grows in a long sweep


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
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    return True
