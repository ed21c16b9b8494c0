"""Racing and warm starts through `grpo-ablate run`: real trials of the tiny offline model."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from grpo_ablate.records.trial_record import WARM_ROLE
from grpo_ablate.storage.store import open_storage
from grpo_ablate.records import trial_record as record

pytestmark = pytest.mark.slow

RACE = ["--set", "budget.max_steps=3", "--set", "temperature=1.0", "--set", "study.sampler=grid", "--set", "num_generations=[2, 4]",
        "--set", "study.seeds=[0, 1, 2]", "--set", "study.workers=2",
        "--set", "study.racing={confidence: 0.95, first_round_seeds: 2}",
        "--set", "study.objectives=[{metric: final_reward}]"]


def _load(tmp: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=open_storage(str(tmp / name / "study.journal")))


def test_racing_grid_then_warm_started_tpe(study_here, tmp_path):
    res = study_here("run", "studies/tiny-cpu.yaml", *RACE, "--no-report",
                  "--set", "study.name=race", "--set", f"study.output_dir={tmp_path / 'race'}")
    assert res.returncode == 0, res.stdout + res.stderr
    st = _load(tmp_path, "race")
    trials = st.get_trials(deepcopy=False)
    race = record.study_attrs(st).racing
    assert race["round"] >= 1 and race["decided"]
    assert 4 <= len(trials) <= 6  # round 1 is both arms on seeds 0 and 1; round 2 only arms in contention
    assert all("seed" not in t.params and record.cell_key(t).endswith(f"|seed{record.seed_of(t)}") for t in trials)
    assert "racing" in res.stdout

    res = study_here("run", "studies/tiny-cpu.yaml", "--no-report", "--set", "budget.max_steps=3", "--set", "temperature=1.0",
                  # seed 3 is new: the race (three seeds, too few for its anytime rule to drop an arm) ran both
                  # arms on 0-2, so the best arm's warm-start trial needs a seed it has not run
                  "--set", "study.sampler=tpe", "--set", "num_generations=[2, 4]", "--set", "study.seeds=[0, 1, 2, 3]",
                  # one: neither arm was dropped, so both are queued as the best arms, and the second is a
                  # hint left past n_trials (said aloud below, exit 0)
                  "--set", "study.n_trials=1", "--set", "study.objectives=[{metric: final_reward}]",
                  "--set", "study.name=warm", "--set", f"study.output_dir={tmp_path / 'warm'}",
                  "--warm-start", "race", "--warm-start-storage", str(tmp_path / "race" / "study.journal"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warm start from 'race'" in res.stdout
    assert "Note: 1 queued trial(s) did not run" in res.stdout  # the second warm arm: a hint past n_trials, said aloud
    warm = _load(tmp_path, "warm")
    ran = [t for t in warm.get_trials(deepcopy=False) if not record.is_copy(t)]
    assert record.role_of(ran[0]) == WARM_ROLE and ran[0].state == optuna.trial.TrialState.COMPLETE
    # the race's results were imported (same model, task and hardware); none of its cells runs again
    imported = {record.cell_key(t) for t in warm.get_trials(deepcopy=False) if record.is_copy(t)}
    assert imported and record.cell_key(ran[0]) not in imported
