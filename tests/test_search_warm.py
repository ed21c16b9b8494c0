"""Warm starts: a new study queues the finished study's best arm first, and learns from its results when they match."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from grpo_ablate.config import load_study
from grpo_ablate.vocab import ARM_ATTR
from grpo_ablate.search.warm import warm_start
from grpo_ablate.vocab import COPY_ATTR, WARM_ROLE
from grpo_ablate.study.lifecycle import suggest_params
from grpo_ablate.study.setup import describe_study, open_study
from helpers import ROOT

optuna.logging.set_verbosity(optuna.logging.ERROR)
TINY = str(ROOT / "studies/tiny-cpu.yaml")
VALUE = {2: 0.5, 4: 0.9, 8: 0.7}  # G=4 is the previous best


def tpe_study(tmp_path: Path, name: str, *extra: str):
    journal = tmp_path / "journal.log"
    return load_study(TINY, ["study.sampler=tpe", f"study.name={name}", "num_generations=[2, 4, 8]",
                             "study.seeds=[0, 1]", f"study.storage={journal}", f"study.output_dir={tmp_path / name}",
                             "study.objectives=[{metric: final_reward}]", *extra])


def finished_study(tmp_path: Path):
    study = tpe_study(tmp_path, "old")
    ostudy, created = open_study(study)
    assert created
    describe_study(ostudy, study)
    for _ in range(8):  # a real (hand-told) TPE study on the journal file
        trial = ostudy.ask()
        cell = suggest_params(trial, study)
        for k, v in cell.as_attrs().items():
            trial.set_user_attr(k, v)
        trial.set_constraint("oom", -1.0)
        ostudy.tell(trial, VALUE[cell.arm.num_generations] + 0.01 * cell.seed)
    return study, ostudy


def test_warm_start_enqueues_previous_best_first_and_feeds_the_sampler(tmp_path):
    old, old_ostudy = finished_study(tmp_path)
    best_g = max({t.user_attrs["num_generations"] for t in old_ostudy.trials}, key=lambda g: VALUE[g])
    new = tpe_study(tmp_path, "new")
    ostudy, _ = open_study(new)
    describe_study(ostudy, new)
    message = warm_start(ostudy, new, "old")
    assert "gave the sampler its 8 finished trial(s)" in message, message
    waiting = ostudy.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert waiting[0].user_attrs["role"] == WARM_ROLE
    copies = [t for t in ostudy.trials if t.user_attrs.get(COPY_ATTR)]
    assert len(copies) == 8 and all(t.state == TrialState.COMPLETE for t in copies)
    first = ostudy.ask()  # the queue comes before the sampler's own proposals
    cell = suggest_params(first, new)
    assert cell.arm.num_generations == best_g
    assert first.user_attrs[ARM_ATTR] == cell.arm.key


def test_warm_start_from_other_hardware_only_enqueues(tmp_path):
    finished_study(tmp_path)
    new = tpe_study(tmp_path, "other-hw", "trainer.per_device_train_batch_size=16")
    ostudy, _ = open_study(new)
    message = warm_start(ostudy, new, "old")
    assert "not given to the sampler because hardware" in message, message
    assert not [t for t in ostudy.trials if t.user_attrs.get(COPY_ATTR)]
    cell = suggest_params(ostudy.ask(), new)
    assert cell.arm.num_generations == 4
