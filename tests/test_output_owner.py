"""One study per output folder, checked before anything is created (issue 23, items 1 and 4).

    pytest tests/test_output_owner.py

Real CLI processes on a real folder; no trial runs here (every refusal comes before one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import optuna
import pytest

from helpers import cli_env, cli_inprocess, run_cli
from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.storage.store import open_storage
from grpo_ablate.study.owner import OWNER_FILE, claim_output_dir, read_owner


def _args(out, name: str) -> list[str]:
    return ["studies/tiny-cpu.yaml", "--set", f"study.name={name}", "--set", f"study.output_dir={out}"]


def _one_line(res: subprocess.CompletedProcess) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stdout + res.stderr
    return lines[0]


def test_a_second_study_is_refused_by_every_command_that_writes_the_folder(tmp_path):
    out = tmp_path / "shared"
    claim_output_dir(load_study("studies/tiny-cpu.yaml", ["study.name=s1", f"study.output_dir={out}"]))
    assert read_owner(out) == {"study": "s1", "storage": "study.journal"}
    before = sorted(p.name for p in out.iterdir())
    for command in (["run", "--no-report"], ["probe"], ["advise"], ["report"], ["run-one"]):
        res = cli_inprocess(command[0], *_args(out, "s2"), *command[1:])
        line = _one_line(res)
        assert str(out) in line and "'s1'" in line and "'s2'" in line and "study.output_dir" in line, (command, line)
    assert sorted(p.name for p in out.iterdir()) == before  # no journal, no trial folder, no report


def test_the_same_study_on_another_storage_is_another_owner(tmp_path):
    out = tmp_path / "o"
    claim_output_dir(load_study("studies/tiny-cpu.yaml", ["study.name=s1", f"study.output_dir={out}"]))
    with pytest.raises(StudyError, match="belongs to the study 's1' .storage study.journal."):
        claim_output_dir(load_study("studies/tiny-cpu.yaml", [
            "study.name=s1", f"study.output_dir={out}", f"study.storage={tmp_path / 'other.journal'}"]))
    claim_output_dir(load_study("studies/tiny-cpu.yaml", ["study.name=s1", f"study.output_dir={out}"]))  # its owner: fine


_CLAIM = """
import sys
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.study.owner import claim_output_dir
study = load_study("studies/tiny-cpu.yaml", [f"study.name={sys.argv[1]}", f"study.output_dir={sys.argv[2]}"])
sys.stdin.readline()  # both start claiming together
try:
    claim_output_dir(study)
except StudyError:
    sys.exit(2)
"""


def test_two_studies_claiming_a_new_folder_at_once_one_wins(tmp_path):
    out = tmp_path / "race"
    procs = [subprocess.Popen([sys.executable, "-c", _CLAIM, name, str(out)], stdin=subprocess.PIPE, env=cli_env(),
                              text=True) for name in ("a", "b")]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    codes = [p.wait(timeout=120) for p in procs]
    assert sorted(codes) == [0, 2]
    winner = "ab"[codes.index(0)]
    assert json.loads((out / OWNER_FILE).read_text())["study"] == winner
    assert [p.name for p in out.iterdir()] == [OWNER_FILE]  # no temporary file left


def test_a_failing_warm_start_creates_nothing(tmp_path):
    out = tmp_path / "w"
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: [this is not a study\n")
    for source in (str(tmp_path / "missing-study-name"), str(bad)):
        res = run_cli("run", *_args(out, "warm"), "--warm-start", source, "--no-report", timeout=300)
        line = _one_line(res)
        assert "--warm-start" in line and source in line, line
    assert not out.exists()  # not even the folder: checked before anything was created
    other = tmp_path / "other.journal"  # a storage that exists but holds no such study
    optuna.create_study(study_name="someone-else", storage=open_storage(str(other)))
    res = run_cli("run", *_args(out, "warm"), "--warm-start", "nope", "--warm-start-storage", str(other),
                  "--no-report", timeout=300)
    assert "no study named 'nope'" in _one_line(res)
    assert not out.exists()


def test_probe_on_a_study_that_has_started_is_refused_up_front(tmp_path):
    from grpo_ablate.study.setup import describe_study, open_study

    out = tmp_path / "p"
    study = load_study("studies/tiny-cpu.yaml", ["study.name=started", f"study.output_dir={out}"])
    ostudy, created = open_study(study, completions_per_trial(study))
    describe_study(ostudy, study, baseline_arm(study))
    res = run_cli("probe", *_args(out, "started"), timeout=300)
    line = _one_line(res)
    assert "'started' already exists" in line and "probe before" in line.lower(), line
    assert not (out / "probe.json").exists() and not (out / "probe").exists()


def test_a_folder_from_before_owners_with_trial_folders_refuses_a_new_study(tmp_path):
    out = tmp_path / "legacy"
    (out / "trials" / "00000").mkdir(parents=True)
    (out / "trials" / "00000" / "metrics.jsonl").write_text('{"step": 1}\n')
    res = run_cli("run", *_args(out, "newcomer"), "--no-report", timeout=300)
    assert "already holds trial folders" in _one_line(res)
    assert (out / "trials" / "00000" / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert not (out / OWNER_FILE).exists()
