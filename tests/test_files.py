"""Trust no file the tool reads back: probe.json, advise.json and summary.json, real files on disk,
read by the real CLI (in-process): exit 2 with one line naming the path and the fix, no traceback."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from grpo_ablate.commands.cli import main
from grpo_ablate.config import load_study
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import Probe, ProbePoint, load_probe, save_probe
from grpo_ablate.core.vocab import ADVISE_FILE, PROBE_FILE


def _study(tmp_path: Path, name: str = "owned", memory_limit_mb: int | None = None) -> Path:
    path = tmp_path / f"{name}.yaml"
    hardware = f"hardware: {{memory_limit_mb: {memory_limit_mb}}}\n" if memory_limit_mb else ""
    path.write_text(textwrap.dedent(f"""\
        study: {{name: {name}, output_dir: {tmp_path / 'run'}, sampler: ablation, seeds: [0]}}
        model: {{name_or_path: builtin:tiny}}
        data: {{task: addition, num_prompts: 200}}
        trainer: {{per_device_train_batch_size: 16, max_completion_length: 6, beta: 0.0}}
        search: {{num_generations: [2, 4, 8], generation_batch_size: [16, 32]}}
        budget: {{max_steps: 10}}
        """) + hardware)
    return path


def _probe(owner: Owner) -> Probe:
    return Probe(owner=owner, points=[ProbePoint(2, 16, True, "completed", seconds_per_step=0.1),
                                      ProbePoint(8, 32, False, "oom", reason="cap")], total_seconds=2.0)


def _refused(capsys, *args: str) -> str:
    code = main(list(args))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture()
def study_path(tmp_path: Path) -> Path:
    return _study(tmp_path)


def test_a_written_probe_reads_back_and_removes_its_oom_pair(study_path, tmp_path, capsys):
    owner = Owner.of(load_study(study_path))
    save_probe(tmp_path / "run", _probe(owner))
    probe = load_probe(tmp_path / "run", owner)
    assert probe is not None and probe.owner == owner and [p.fits for p in probe.points] == [True, False]
    assert "8x32" not in {p.label for p in load_study(study_path).space.feasible}
    assert main(["plan", str(study_path)]) == 0
    capsys.readouterr()


def test_a_truncated_probe_is_refused_not_ignored(study_path, tmp_path, capsys):
    save_probe(tmp_path / "run", _probe(Owner.of(load_study(study_path))))
    text = (tmp_path / "run" / PROBE_FILE).read_text()
    (tmp_path / "run" / PROBE_FILE).write_text(text[: len(text) // 2])  # the OOM pair is in the lost half
    err = _refused(capsys, "plan", str(study_path))
    assert str(tmp_path / "run" / PROBE_FILE) in err and "not valid JSON" in err and "delete it" in err


def test_fits_as_a_string_is_not_fitting(study_path, tmp_path, capsys):
    save_probe(tmp_path / "run", _probe(Owner.of(load_study(study_path))))
    raw = json.loads((tmp_path / "run" / PROBE_FILE).read_text())
    raw["points"][1]["fits"] = "false"
    (tmp_path / "run" / PROBE_FILE).write_text(json.dumps(raw))
    err = _refused(capsys, "plan", str(study_path))
    assert "points.1.fits" in err and "boolean" in err and "'false'" in err


@pytest.mark.parametrize("edit, needle", [
    (lambda raw: raw.pop("points"), "points: field required"),
    (lambda raw: raw.pop("owner"), "owner: field required"),
    (lambda raw: raw["points"][0].update(num_generations="2"), "points.0.num_generations"),
    (lambda raw: raw.update(points={"2": 16}), "points"),
    (lambda raw: raw["points"].append(None), "points.2"),
])
def test_a_missing_or_mistyped_field_is_one_line_not_a_traceback(study_path, tmp_path, capsys, edit, needle):
    save_probe(tmp_path / "run", _probe(Owner.of(load_study(study_path))))
    raw = json.loads((tmp_path / "run" / PROBE_FILE).read_text())
    edit(raw)
    (tmp_path / "run" / PROBE_FILE).write_text(json.dumps(raw))
    for command in ("validate", "plan"):
        err = _refused(capsys, command, str(study_path))
        assert needle in err and PROBE_FILE in err


def test_a_probe_of_another_study_or_hardware_is_not_applied(tmp_path, capsys):
    other = _study(tmp_path, name="other")  # same output_dir, another study's name
    save_probe(tmp_path / "run", _probe(Owner.of(load_study(other))))
    mine = _study(tmp_path, name="mine")
    err = _refused(capsys, "plan", str(mine))
    assert "written for another study" in err and "'other'" in err and "'mine'" in err
    (tmp_path / "run" / PROBE_FILE).unlink()  # the fix the message gives
    save_probe(tmp_path / "run", _probe(Owner.of(load_study(mine))))
    capped = _study(tmp_path, name="mine", memory_limit_mb=2048)  # the probe ran without this cap
    err = _refused(capsys, "plan", str(capped))
    assert "hardware" in err and "memory_limit_mb=2048" in err


def test_advise_json_truncated_or_foreign_is_refused(study_path, tmp_path, capsys):
    owner = Owner.of(load_study(study_path))
    arm = {"num_generations": 4, "generation_batch_size": 32, "temperature": 1.0}
    good = json.dumps({"owner": vars(owner), "advised_arms": [arm]})
    (tmp_path / "run" / ADVISE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "run" / ADVISE_FILE).write_text(good)
    assert main(["plan", str(study_path)]) == 0
    assert "advise" in capsys.readouterr().out
    (tmp_path / "run" / ADVISE_FILE).write_text(good[:-20])  # the enqueued arm must not silently leave the plan
    err = _refused(capsys, "plan", str(study_path))
    assert ADVISE_FILE in err and "grpo-ablate advise" in err
    (tmp_path / "run" / ADVISE_FILE).write_text(json.dumps({"owner": {**vars(owner), "model": "Qwen/Qwen3-8B"},
                                                            "advised_arms": [arm]}))
    err = _refused(capsys, "plan", str(study_path))
    assert "'Qwen/Qwen3-8B'" in err and "builtin:tiny" in err


@pytest.mark.parametrize("text, needle", [
    ('{"arms": [{"key": "G8xB32|T1", "metrics": {"final_reward": {"mean": 0.5', "not valid JSON"),
    ('{"arms": [{"key": "G8xB32|T1", "metrics": {"final_reward": {"mean": "0.5"}}}]}', "arms.0.metrics.final_reward.mean"),
    ('{"arms": "none"}', "arms"),
    ('{"arms": [], "objectives": [{"metric": "final_reward", "direction": "up"}]}', "objectives.0.direction"),
    ('[1, 2]', "not a grpo-ablate summary.json"),
])
def test_a_broken_summary_is_exit_2_with_the_path(tmp_path, capsys, text, needle):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"objectives": [{"metric": "final_reward", "direction": "maximize"}],
                                "arms": [{"key": "G8xB32|T1", "metrics": {"final_reward": {"mean": 0.5}}}]}))
    bad = tmp_path / "summary.json"
    bad.write_text(text)
    err = _refused(capsys, "compare", str(good), str(bad))
    assert str(bad) in err and needle in err and "grpo-ablate report" in err
    assert main(["compare", str(good), str(good)]) == 0
    capsys.readouterr()
