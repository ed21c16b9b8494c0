"""Pruning on a held-out objective reports at the evaluation points every arm shares (in completions)."""

from __future__ import annotations

import json

import optuna

from grpo_ablate.config import load_study
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.study.lifecycle import Registry, TrialLifecycle
from grpo_ablate.storage.store import open_artifact_store
from grpo_ablate.core.vocab import EVAL_FILE
from helpers import TINY_CPU as TINY


def test_held_out_objective_is_reported_at_the_evaluation_points(tmp_path):
    study = load_study(TINY, ["study.sampler=tpe", "study.pruner=median", "temperature=1.0",
                              f"study.output_dir={tmp_path}"])
    assert study.metric_names == ["eval_final_reward"]  # the demo has evaluation: the held-out default
    ostudy = optuna.create_study(direction="maximize", pruner=optuna.pruners.NopPruner())
    life = TrialLifecycle(study, ostudy, ostudy._storage, open_artifact_store(tmp_path), Registry(), workers=1,
                          heartbeat=False, say=lambda _: None, plan=resolve_plan(study))
    trial = ostudy.ask()
    run = Registry().register(trial.number, tmp_path / "t0")
    on_progress = life._progress(trial, run)
    evals = run.trial_dir / EVAL_FILE
    points = [(0, 0.0), (320, 0.25), (640, 0.5)]
    written = 0
    for step in range(1, 21):  # 32 completions per step; an evaluation lands every 10 steps
        while written < len(points) and points[written][0] <= step * 32:
            with evals.open("a") as f:
                f.write(json.dumps({"point": written, "completions": points[written][0], "reward": points[written][1],
                                    "generated_tokens": points[written][0] * 3.0, "train_seconds": step}) + "\n")
            written += 1
        on_progress({"step": step, "completions": 32, "reward": 0.5, "train_seconds": float(step)})
    reported = ostudy.trials[0].intermediate_values  # the running trial, as stored
    assert reported == {320: 0.25, 640: 0.5}  # the held-out reward at each shared point; point 0 is the start
