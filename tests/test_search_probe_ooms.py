"""The probe's out-of-memory pairs in the study: the sampler's own params, a violated constraint, no fallback.

    pytest tests/test_search_probe_ooms.py

A multivariate TPE models only the params every finished trial shares with the same
distribution; a recorded OOM trial in params of its own made it sample the study's params
independently (Optuna logs "... is sampled independently ..."). The tests ask a real
TPESampler with that warning switched on, over a real journal study.
"""

from __future__ import annotations

import logging
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from grpo_ablate.config import load_study
from grpo_ablate.preflight.probe_file import Probe, ProbePoint, save_probe
from grpo_ablate.study.lifecycle import suggest_params
from grpo_ablate.study.runner import StudyRunner
from grpo_ablate.study.setup import open_study, record_probe_ooms

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
    save_probe(tmp_path / "run", Probe(study="ooms", points=points, total_seconds=1.0, one_trial_estimate_s=10.0))
    return load_study(path)


def _tpe_proposals(study, ostudy, n: int, caplog, group: bool = False) -> list:
    """n proposals of a multivariate TPE, each told back: a pair the probe saw run out of memory is
    told as OOM, as the lifecycle would. Without groups TPE is the strictest about one shared space;
    searched batches are conditional params, which need `group` (as search/samplers.py sets it)."""
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
                cell = suggest_params(trial, study)
                oom = (cell.arm.num_generations, cell.arm.generation_batch_size) in ooms
                trial.set_constraint("oom", 1.0 if oom else -1.0)
                tpe.tell(trial, [0.1 * cell.arm.num_generations])  # larger G scores higher: the boundary matters
                cells.append(cell)
    finally:
        optuna.logging.disable_propagation()
    return cells


def _probe(study):
    from grpo_ablate.preflight.probe_file import load_probe

    return load_probe(study.output_dir)


def test_an_oom_pair_the_sampler_can_propose_is_recorded_in_its_own_params(tmp_path, caplog):
    study = _study(tmp_path, batches="")  # TRL's batch (16) for every G: the probe leaves (8, 16) in the space
    assert "8x16" in {p.label for p in study.space.feasible}
    ostudy, _ = open_study(study)
    assert record_probe_ooms(ostudy, study) == 2 and record_probe_ooms(ostudy, study) == 0  # one per temperature
    recorded = ostudy.get_trials()
    proposed = ostudy.ask()
    suggest_params(proposed, study)
    for t in recorded:  # what the lifecycle draws, name for name and distribution for distribution
        assert t.distributions == proposed.distributions and t.params["num_generations_rank"] == 2
        assert t.state == optuna.trial.TrialState.COMPLETE and t.system_attrs["constraints:oom"] > 0
    assert sorted(t.params["temperature"] for t in recorded) == [0.7, 1.0]
    ostudy.tell(proposed, state=optuna.trial.TrialState.FAIL)
    assert StudyRunner.finished_count(SimpleNamespace(ostudy=ostudy)) == (0, 0)  # taught the sampler, ran nothing

    cells = _tpe_proposals(study, ostudy, 16, caplog)
    assert not [r.message for r in caplog.records if FALLBACK in r.message]
    assert {c.arm.num_generations for c in cells} >= {2, 4}


def test_the_old_pair_param_made_multivariate_tpe_fall_back(tmp_path, caplog):
    """The check above can fail: an OOM trial in a param of its own is what it catches."""
    study = _study(tmp_path, batches="")
    ostudy, _ = open_study(study)
    ostudy.add_trial(optuna.trial.create_trial(
        params={"probe_pair": "8x16"}, distributions={"probe_pair": optuna.distributions.CategoricalDistribution(["8x16"])},
        values=[0.0], constraints={"oom": 1.0}, user_attrs={"role": "probe"}))
    _tpe_proposals(study, ostudy, 8, caplog)
    assert [r.message for r in caplog.records if FALLBACK in r.message]


@pytest.mark.parametrize("temperature", ["[0.7, 1.0]", "{low: 0.5, high: 1.2}", "0.9"])
def test_a_pair_out_of_the_space_is_never_proposed_and_not_recorded(tmp_path, caplog, temperature):
    study = _study(tmp_path, batches="[16, 32]", temperature=temperature)  # searched batches: the probe takes its OOMs out
    assert {p.label for p in study.space.feasible} == {"2x16", "2x32", "4x16"}
    ostudy, _ = open_study(study)
    assert record_probe_ooms(ostudy, study) == 0  # nothing true to teach about a point no proposal can reach
    cells = _tpe_proposals(study, ostudy, 16, caplog, group=True)
    assert not [r.message for r in caplog.records if FALLBACK in r.message]
    pairs = {(c.arm.num_generations, c.arm.generation_batch_size) for c in cells}
    assert not pairs & {(8, 16), (4, 32)} and pairs <= {(2, 16), (2, 32), (4, 16)}
