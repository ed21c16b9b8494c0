"""Issue 23's tracebacks and unclear errors: each is exit 2 with one line, through the real CLI
called in-process, on real files (a FIFO, a read-only tmpfs, a long schedule's run folder)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from helpers import MINIMAL_STUDY, unavailable
from grpo_ablate.commands.cli import main
from grpo_ablate.study.trackers import MAX_RUN_NAME, run_name_of

STUDY = MINIMAL_STUDY


def _study(folder: Path, text: str = STUDY) -> Path:
    p = folder / "study.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def one_line_refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("setting, needle", [
    ("study.baseline={num_generations: .nan}", "study.baseline.num_generations"),
    ("study.baseline={num_generations: 2.5}", "whole number"),
    ("study.baseline={temperature: .inf}", "study.baseline.temperature"),
    ("search.temperature=[.nan]", "search.temperature.0"),
    ("search.temperature={low: .nan, high: 1.0}", "search.temperature.low"),
    ("search.temperature=.inf", "search.temperature"),
    ("trainer.temperature=.nan", "trainer.temperature"),
    ("trainer.temperature=-.inf", "trainer.temperature"),
    ("trainer.learning_rate=.nan", "trainer.learning_rate"),
    ("trainer.max_completion_length=-3", "trainer.max_completion_length"),
    ("trainer.seed=-1", "trainer.seed"),
    ("study.seeds=[0, -1]", "study.seeds.1"),
    ("study.sampler_seed=-5", "study.sampler_seed"),
    ("study.heartbeat_interval=100000000000000000000", "study.heartbeat_interval"),
    ("study.grace_period=100000000000000000000", "study.grace_period"),
    ("study.trial_timeout=1e300", "study.trial_timeout"),
    ("budget.seconds=.inf", "budget.seconds"),
    ("evaluation={temperature: .inf}", "evaluation.temperature"),
])
def test_non_finite_and_out_of_range_values_are_refused(tmp_path, capsys, setting, needle):
    line = one_line_refusal(capsys, "validate", str(_study(tmp_path)), "--set", "study.sampler=ablation",
                            "--set", setting)
    assert needle in line


@pytest.mark.parametrize("key", ["float", "int", "str", "list[int]"])
def test_a_top_level_key_named_like_a_type_is_an_unknown_key(tmp_path, capsys, key):
    study = _study(tmp_path, f"{json.dumps(key)}: 1\n" + STUDY)
    line = one_line_refusal(capsys, "validate", str(study))
    assert f"{key}: unknown key" in line


def test_infeasible_search_has_no_dangling_suggestion(tmp_path, capsys):
    """Only schedules asked for, none feasible: there is no nearest value to offer, so none is promised."""
    code = main(["validate", str(_study(tmp_path)), "--set", "search.num_generations=['3->6@50%']",
                 "--set", "trainer.per_device_train_batch_size=4"])
    err = capsys.readouterr().err
    assert code == 2 and "search.num_generations: no (num_generations" in err
    assert "Nearest that would work" not in err and not any(x.rstrip().endswith(":") for x in err.splitlines()[1:])


def test_a_fifo_is_refused_at_once_not_read(tmp_path, capsys):
    fifo = tmp_path / "recipe.yaml"
    os.mkfifo(fifo)
    line = one_line_refusal(capsys, "init", "--from", str(fifo), "--gpus", "0", "--out", str(tmp_path / "s.yaml"))
    assert "not a regular file" in line and str(fifo) in line
    assert "not a regular file" in one_line_refusal(capsys, "validate", str(fifo))
    assert not (tmp_path / "s.yaml").exists()


@pytest.fixture
def read_only_dir(tmp_path):
    """A real read-only tmpfs (root can write anywhere else, so a permission bit would not do)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        unavailable(f"cannot mount a read-only tmpfs here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_init_onto_a_read_only_file_system_names_the_users_file(tmp_path, capsys, read_only_dir):
    out = read_only_dir / "study.yaml"
    line = one_line_refusal(capsys, "init", "--task", "addition", "--out", str(out))
    assert str(out) in line and "read-only" in line and ".study.yaml." not in line


def test_init_validation_errors_name_the_users_file_not_a_temporary_one(tmp_path, capsys):
    out = tmp_path / "study.yaml"
    line = one_line_refusal(capsys, "init", "--task", "addition", "--gpus", "0", "--name", "a/b", "--out", str(out),
                             "--unpriced")
    assert str(out) in line and ".study.yaml." not in line
    assert list(tmp_path.iterdir()) == []  # nothing half-written, no temporary file left


def test_report_onto_a_read_only_file_system_is_one_line(tmp_path, capsys, read_only_dir):
    out = read_only_dir / "report.html"
    line = one_line_refusal(capsys, "report", str(_study(tmp_path)), "--out", str(out))
    assert "--out" in line and str(read_only_dir) in line


def test_an_os_error_on_a_named_path_is_one_line_wherever_it_happens(tmp_path, capsys, read_only_dir):
    """The CLI's last net: any OSError about a file becomes exit 2 naming it (here `run`'s output folder)."""
    line = one_line_refusal(capsys, "validate", str(_study(tmp_path)), "--set", f"study.output_dir={read_only_dir / 'x'}")
    assert "read-only" in line


def test_a_long_schedule_chain_gets_a_bounded_unique_run_name(tmp_path):
    from grpo_ablate.config import load_study
    from grpo_ablate.study.trackers import tracker_settings
    from grpo_ablate.core.schedule import parse_generations
    from grpo_ablate.core.vocab import Arm, Cell

    chain = "->".join(["2"] + [f"{4 if i % 2 else 2}@{i}%" for i in range(1, 60)])
    other = chain.replace("2@58%", "4@58%")
    study = load_study(_study(tmp_path), [f"study.output_dir={tmp_path / 'out'}", "trainer.report_to=[tensorboard]"])
    names = []
    for g in (chain, other):
        trainer, env = tracker_settings(study, Cell(Arm(parse_generations(g), 8, 1.0), 0, "grid"))
        names.append(trainer["run_name"])
        assert len(trainer["run_name"].encode()) <= MAX_RUN_NAME
        Path(env["TENSORBOARD_LOGGING_DIR"]).mkdir(parents=True)  # the folder the trial's TensorBoard writes
    assert names[0] != names[1]
    assert run_name_of("G4-B32-T0.9-s1") == "G4-B32-T0.9-s1"  # short names are unchanged
    assert run_name_of("é" * 200) == run_name_of("é" * 200) and len(run_name_of("é" * 200).encode()) <= MAX_RUN_NAME
