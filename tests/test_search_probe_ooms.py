"""The probe's out-of-memory pairs never reach the sampler's proposals, and cost it nothing.

    pytest tests/test_search_probe_ooms.py

They leave the study's space (config/hardware.py), so no sampler can propose them, and they are
not recorded as trials: one in params outside the space's distributions would make a
multivariate TPE sample every param independently (Optuna logs "... is sampled independently
..."). The tests ask a real TPESampler with that warning switched on, over a real journal study.
"""

from __future__ import annotations

import logging
import textwrap
import warnings
from pathlib import Path

import optuna
import pytest

from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.config import load_study
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import Probe, ProbePoint, save_probe
from grpo_ablate.study.ledger import suggest_cell
from grpo_ablate.study.setup import open_study

FALLBACK = "sampled independently"


def _study(tmp_path: Path, batches: str, temperature: str = "[0.7, 1.0]"):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(f"""\
        study: {{name: ooms, output_dir: {tmp_path / 'run'}, sampler: tpe, n_trials: 12}}
        model: {{name_or_path: builtin:tiny}}
        data: {{task: addition, num_prompts: 200}}
        trainer: {{per_device_train_batch_size: 16, max_completion_length: 6, beta: 0.0}}
        search:
          num_generations: [2, 4, 8]
          temperature: {temperature}
        """) + (f"  generation_batch_size: {batches}\n" if batches else "") + "budget: {max_steps: 10}\n")
    points = [ProbePoint(2, 16, True, "completed"), ProbePoint(4, 16, True, "completed"),
              ProbePoint(8, 16, False, "oom", reason="hardware.memory_limit_mb")]
    if batches:
        points += [ProbePoint(2, 32, True, "completed"), ProbePoint(4, 32, False, "oom", reason="cap")]
    save_probe(tmp_path / "run", Probe(owner=Owner.of(load_study(path)), points=points, total_seconds=1.0,
                                       one_trial_estimate_s=10.0))
    return load_study(path)


def _tpe_proposals(study, ostudy, n: int, caplog, group: bool = False) -> list:
    """n proposals of a multivariate TPE, each told back: a pair the probe saw run out of memory is
    told as OOM, as the lifecycle would. Without groups TPE is the strictest about one shared space;
    searched batches are conditional params, which need `group` (as study/search/samplers.py sets it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # multivariate is experimental; warn_independent_sampling deprecated
        sampler = optuna.samplers.TPESampler(seed=0, n_startup_trials=4, multivariate=True, group=group,
                                             warn_independent_sampling=True)
    tpe = optuna.load_study(study_name=ostudy.study_name, storage=ostudy._storage, sampler=sampler)
    ooms = {(p.num_generations, p.generation_batch_size) for p in Probe.ooms(_probe(study))}
    optuna.logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING, logger="optuna"):
            cells = []
            for _ in range(n):
                trial = tpe.ask()
                cell = suggest_cell(trial, study)
                oom = (cell.arm.num_generations, cell.arm.generation_batch_size) in ooms
                trial.set_constraint("oom", 1.0 if oom else -1.0)
                tpe.tell(trial, [0.1 * cell.arm.num_generations])  # larger G scores higher: the boundary matters
                cells.append(cell)
    finally:
        optuna.logging.disable_propagation()
    return cells


def _probe(study):
    from grpo_ablate.files.probe_file import load_probe

    return load_probe(study.output_dir, Owner.of(study))


@pytest.mark.parametrize("batches", ["[16, 32]", ""])
@pytest.mark.parametrize("temperature", ["[0.7, 1.0]", "{low: 0.5, high: 1.2}", "0.9"])
def test_a_pair_that_ran_out_of_memory_is_never_proposed(tmp_path, caplog, temperature, batches):
    """Searched batches, or TRL's own batch for every G: the probe's OOM pairs (and all above) leave the space."""
    study = _study(tmp_path, batches=batches, temperature=temperature)
    expected = {"2x16", "2x32", "4x16"} if batches else {"2x16", "4x16"}
    assert {p.label for p in study.space.feasible} == expected
    assert any("ran out of memory" in r.reason for r in study.space.rejected)
    ostudy, _ = open_study(study, completions_per_trial(study))
    cells = _tpe_proposals(study, ostudy, 16, caplog, group=bool(batches))
    assert not [r.message for r in caplog.records if FALLBACK in r.message]
    pairs = {f"{c.arm.num_generations}x{c.arm.generation_batch_size}" for c in cells}
    assert pairs <= expected
