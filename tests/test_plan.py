"""Planned samplers: the ablation is one factor at a time around the baseline; the grid is the full product."""

from __future__ import annotations

from pathlib import Path

from grpo_ablate.config import load_study
from grpo_ablate.plan import cell_params, pair_param, study_plan

ROOT = Path(__file__).resolve().parents[1]
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
    # batches searched: the pair itself is the param, so only feasible pairs exist
    assert pair_param(study, 8, 64) == ("generation", "8x64")
    assert cell_params(study, cells[0]) == {"generation": "8x32", "temperature": 1.0, "seed": 0}


def test_grid_is_full_product():
    study = load_study(TINY, ["study.sampler=grid", "num_generations=[2, 4]", "temperature=[0.7, 1.0]", "study.seeds=[0, 1]"])
    cells = study_plan(study)
    assert len(cells) == 2 * 2 * 2 == len({c.key for c in cells})


def test_baseline_falls_back_to_nearest_feasible_g():
    study = load_study(TINY, ["num_generations=[2, 4]", "study.baseline={}"])
    assert study_plan(study)[0].arm.num_generations == 4  # TRL's G=8 is not searched; the nearest is
