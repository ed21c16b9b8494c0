"""A branch start is a resume (issue 52 item 1): what a branch starts from is checked as a resume checks its own
checkpoint, against the prefix spec today's study file builds; a prefix that fails is trained again, never a lost
seed. The real CLI on the tiny model, its trials in the suite's warm session (fixtures_warm.study_here).

Round 5's cases, each a seed of one study whose prefixes ran first (`--n-trials` stops the run after them):
seed 0's prefix checkpoint has its tensors zeroed in place (same size: only the hashes tell); seed 0's original is
copied over seed 1's (another seed's prefix: only the spec fingerprint tells); seed 2's is removed. The rerun sets
each branch aside, trains each prefix again and starts every branch from its new prefix. A second study is edited
between its prefix and its branches (learning_rate): the prefix is trained again under the new file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest

from grpo_ablate.records import trial_record as record
from grpo_ablate.storage.store import open_storage
from grpo_ablate.contract import checkpoints
from helpers import write_study

pytestmark = pytest.mark.slow

STUDY = """\
study:
  name: verified
  sampler: ablation
  baseline: {num_generations: 4, temperature: 1.0}
  seeds: SEEDS
  workers: 1
  output_dir: OUT
model: {name_or_path: "builtin:tiny"}
data: {task: addition, num_prompts: 200}
trainer:
  learning_rate: LR
  per_device_train_batch_size: 8
  max_completion_length: 6
  beta: 0.0
search:
  num_generations: [4]
budget:
  max_steps: 2
  branch_from: 2
  full_run: {max_steps: 100}
"""


def _study(folder: Path, seeds: str, lr: str = "2.0e-4") -> Path:
    return write_study(folder, STUDY.replace("OUT", str(folder / "out")).replace("SEEDS", seeds).replace("LR", lr))


def _trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="verified", storage=open_storage(f"journal:///{out / 'study.journal'}")).get_trials()


def _point(ft) -> Path:
    return Path(record.trial_dir(ft)) / "checkpoints" / "checkpoint-2"


def _zero_tensors(weights: Path) -> None:
    data = bytearray(weights.read_bytes())
    head = 8 + int.from_bytes(data[:8], "little")
    weights.write_bytes(bytes(data[:head]) + bytes(len(data) - head))  # same size, every weight 0


def test_a_damaged_swapped_or_removed_prefix_is_trained_again_and_every_branch_starts_from_a_verified_one(
        tmp_path, study_here):
    path = _study(tmp_path, "[0, 1, 2]")
    out = tmp_path / "out"
    first = study_here("run", str(path), "--no-report", "--n-trials", "3")  # the three prefixes, no branch yet
    assert first.returncode in (0, 1), first.stdout[-3000:] + first.stderr[-3000:]
    prefixes = {record.seed_of(t): t for t in _trials(out) if record.is_prefix(t)}
    assert sorted(prefixes) == [0, 1, 2] and all(record.outcome(t).value == "completed" for t in prefixes.values())
    assert "Trials: completed 3, queued 3" in first.stdout  # the branches are queued, not "running"
    original = tmp_path / "seed0-original"
    shutil.copytree(_point(prefixes[0]), original)
    _zero_tensors(_point(prefixes[0]) / "model.safetensors")
    shutil.rmtree(_point(prefixes[1]))
    shutil.copytree(original, _point(prefixes[1]))  # seed 0's prefix where seed 1's was
    shutil.rmtree(_point(prefixes[2]))

    again = study_here("run", str(path), "--no-report")
    text = again.stdout + again.stderr
    assert again.returncode == 0, text[-4000:]
    assert "model.safetensors does not match the SHA-256 written with it" in text, text[-4000:]
    assert "was written for another trial spec" in text and "its checkpoint at step 2 is gone" in text, text[-4000:]
    trials = _trials(out)
    for seed in (0, 1, 2):
        mine = [t for t in trials if record.seed_of(t) == seed]
        done = [t for t in mine if record.outcome(t).value == "completed"]
        new_prefix = max((t for t in done if record.is_prefix(t)), key=lambda t: t.number)
        branch = [t for t in done if not record.is_prefix(t)]
        assert new_prefix.number != prefixes[seed].number and record.retry_of(new_prefix) == prefixes[seed].number
        assert len(branch) == 1 and record.branched_from(branch[0]) == (new_prefix.number, 2)
        spec = json.loads((Path(record.trial_dir(branch[0])) / "spec.json").read_text())
        assert spec["start_from"]["checkpoint"] == str(_point(new_prefix))
        assert checkpoints.verify(checkpoints.Checkpoint(_point(new_prefix), 2), spec["start_from"]["fingerprint"]) is None
        aside = [t for t in mine if record.awaits_prefix(t)]  # each branch was set aside once, never failed
        assert len(aside) == 1 and record.outcome(aside[0]).value == "interrupted"
        assert not [t for t in mine if record.outcome(t).value == "failed"]


def test_a_prefix_of_an_earlier_study_file_is_trained_again_before_any_branch_starts(tmp_path, study_here):
    path = _study(tmp_path, "[0]")
    out = tmp_path / "out"
    first = study_here("run", str(path), "--n-trials", "1")  # the prefix; its branch is queued, not run
    assert first.returncode in (0, 1), first.stdout[-3000:] + first.stderr[-3000:]
    counts = json.loads((out / "summary.json").read_text())["trials"]  # round 5: a queued cell was counted "running"
    assert counts["queued"] == 1 and counts["running"] == 0, counts
    old = next(t for t in _trials(out) if record.is_prefix(t))
    _study(tmp_path, "[0]", lr="5.0e-4")  # edited between the prefix and its branches

    again = study_here("run", str(path), "--no-report")
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "seed 0's prefix ran under an earlier version of the study file: queued to train again" in again.stdout
    trials = _trials(out)
    new = max((t for t in trials if record.is_prefix(t)), key=lambda t: t.number)
    branch = next(t for t in trials if not record.is_prefix(t) and record.outcome(t).value == "completed")
    assert new.number != old.number and record.spec_fingerprint(new) != record.spec_fingerprint(old)
    assert record.branched_from(branch) == (new.number, 2)  # never the old file's prefix
    assert json.loads((Path(record.trial_dir(new)) / "spec.json").read_text())["trainer"]["learning_rate"] == 5.0e-4
    # the branch queued when the old prefix completed, if asked before the new prefix ended, was set aside, not failed
    assert not [t for t in trials if record.outcome(t).value == "failed"]
