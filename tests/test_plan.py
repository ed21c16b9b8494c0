"""Planned samplers: the ablation is one factor at a time around the baseline; the grid is the full product."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_ablate.config import load_study
from grpo_ablate.plan.cells import advised_arms, resolved_trial_count, study_plan
from grpo_ablate.study.ledger import cell_params
from grpo_ablate.files.advise_file import ADVISED_ARMS_KEY
from grpo_ablate.files.owned import Owner
from grpo_ablate.commands.plan_words import plan_json, plan_text
from grpo_ablate.core.vocab import ADVISE_FILE, Arm
from helpers import ROOT

TINY = str(ROOT / "studies/tiny-cpu.yaml")


def test_tiny_ablation_plan_baseline_first_seed_major():
    cells = study_plan(load_study(TINY))
    assert [(c.role, c.seed) for c in cells] == [
        (role, s) for s in range(4) for role in ("baseline", "num_generations=2", "temperature=0.3")
    ]
    assert cells[0].arm.num_generations == 8


def test_ablation_with_temperatures_and_batches():
    study = load_study(TINY, ["num_generations=[4, 8]", "temperature=[0.7, 1.0]", "generation_batch_size=[32, 64]",
                              "study.seeds=[0]", "study.baseline={num_generations: 8, temperature: 1.0, generation_batch_size: 32}"])
    cells = study_plan(study)
    arms = {c.role: (c.arm.num_generations, c.arm.generation_batch_size, c.arm.temperature) for c in cells}
    assert arms == {
        "baseline": (8, 32, 1.0),
        "num_generations=4": (4, 32, 1.0),
        "temperature=0.7": (8, 32, 0.7),
        "generation_batch_size=64": (8, 64, 1.0),
    }
    # batches searched: the pair itself is the param, so only feasible pairs exist; the seed rides in the cell
    assert cell_params(study, cells[0].arm)[0] == {"generation": "8x32", "temperature": 1.0}
    assert list(cell_params(study, cells[0].arm)[1]["generation"].choices) == [p.label for p in study.space.feasible]


def test_grid_is_full_product():
    study = load_study(TINY, ["study.sampler=grid", "num_generations=[2, 4]", "temperature=[0.7, 1.0]", "study.seeds=[0, 1]"])
    cells = study_plan(study)
    assert len(cells) == 2 * 2 * 2 == len({c.key for c in cells})


def test_baseline_falls_back_to_nearest_feasible_g():
    study = load_study(TINY, ["num_generations=[2, 4]", "study.baseline={}"])
    assert study_plan(study)[0].arm.num_generations == 4  # TRL's G=8 is not searched; the nearest is


def _with_advised(tmp_path: Path, *overrides: str, arms: list[dict]):
    (tmp_path / "run").mkdir(exist_ok=True)
    owner = Owner.of(load_study(TINY, [f"study.output_dir={tmp_path / 'run'}", *overrides]))
    (tmp_path / "run" / ADVISE_FILE).write_text(json.dumps({"owner": vars(owner), "shortlist": [], ADVISED_ARMS_KEY: arms}))
    return load_study(TINY, [f"study.output_dir={tmp_path / 'run'}", *overrides])


def test_an_advised_arm_joins_the_ablation_on_every_seed_and_is_counted(tmp_path):
    before = load_study(TINY, [f"study.output_dir={tmp_path / 'run'}"])
    assert resolved_trial_count(before) == 12 and advised_arms(before) == []
    new = {"num_generations": 2, "generation_batch_size": 32, "temperature": 0.3}  # G=2 and T=0.3 at once: no factor has it
    study = _with_advised(tmp_path, arms=[new])
    cells = study_plan(study)
    assert [(c.role, c.seed) for c in cells] == [
        (role, s) for s in range(4) for role in ("baseline", "num_generations=2", "temperature=0.3", "advise")
    ]
    assert {c.arm.key for c in cells if c.role == "advise"} == {"G2xB32|T0.3"}
    assert resolved_trial_count(study) == 16 == plan_json(study)["n_trials"] == len(plan_json(study)["plan"])
    assert "Trial plan (16 trials" in plan_text(study)


def test_an_advised_arm_the_ablation_has_or_cannot_run_changes_nothing(tmp_path):
    already = {"num_generations": 2, "generation_batch_size": 32, "temperature": 1.0}  # the G factor's arm
    foreign = {"num_generations": 8, "generation_batch_size": 32, "temperature": 0.7}  # T=0.7 is not searched
    study = _with_advised(tmp_path, arms=[already, foreign])
    assert advised_arms(study) == [Arm(2, 32, 1.0)]
    cells = study_plan(study)
    assert resolved_trial_count(study) == 12 and all(c.role != "advise" for c in cells)
    assert next(c for c in cells if c.arm.key == "G2xB32|T1").role == "num_generations=2"
