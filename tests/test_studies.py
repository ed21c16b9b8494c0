"""Every shipped study file (studies/ and sweeps/) validates offline, and its plan is what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grpo_ablate.config import load_study
from grpo_ablate.plan.cells import study_plan
from helpers import ROOT



def _study_files() -> list[Path]:
    out = []
    for folder in ("studies", "sweeps"):
        for p in sorted((ROOT / folder).rglob("*.yaml")):
            data = yaml.safe_load(p.read_text())
            if isinstance(data, dict) and "study" in data:  # recipes and accelerate configs are not studies
                out.append(p)
    return out


def test_there_are_studies():
    names = {p.name for p in _study_files()}
    assert {"tiny-cpu.yaml", "qwen2.5-0.5b-gsm8k.yaml", "openr1-1.5b-numina-8gpu.yaml"} <= names


@pytest.mark.parametrize("path", _study_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_study_file_is_valid(path):
    study = load_study(path)
    assert study.space.feasible
    if study.is_planned:
        assert study_plan(study)


def test_openr1_study_matches_practice():
    study = load_study(ROOT / "studies/openr1-1.5b-numina-8gpu.yaml")
    assert study.world_size == 7
    assert study.space.shape.default_generation_batch_size == 1792
    assert set(study.space.generations) == {7, 8, 14, 16}
    cells = study_plan(study)
    assert cells[0].role == "baseline" and cells[0].arm.num_generations == 7
    # one factor at a time: every non-baseline arm differs from the baseline in exactly one setting
    base = cells[0]
    for c in cells:
        diffs = sum([c.arm.num_generations != base.arm.num_generations, c.arm.temperature != base.arm.temperature])
        assert diffs == (0 if c.role == "baseline" else 1), c
    assert len(cells) == len({c.key for c in cells}) == 2 * (1 + 3 + 1)
