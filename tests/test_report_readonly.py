"""`grpo-ablate report --out ELSEWHERE` on a study it may only read (issue 43): a read-only mount, or
another user's folder. The report is written elsewhere and nothing in the study's folder changes:
not a byte, not a new file (as root, chmod does not stop a write, so the test checks the folder
itself rather than trusting the permission bits).

    pytest tests/test_report_readonly.py
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from _report_fixtures import SeedRun, make_custom_study
from helpers import ROOT
from grpo_ablate.commands.cli import main
from grpo_ablate.vocab import Arm


def _state(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file and folder under `folder`: size, modification time and (files) content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, p.read_bytes() if p.is_file() else b"")
    return out


def _chmod_tree(folder: Path, writable: bool) -> None:
    for dirpath, _, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            (Path(dirpath) / name).chmod(0o644 if writable else 0o444)
        Path(dirpath).chmod(0o755 if writable else 0o555)


def test_report_out_elsewhere_reads_a_read_only_study_and_writes_nothing_into_it(tmp_path, capsys):
    arms = {"baseline": (Arm(8, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.3 + 0.1 * s)) for s in (0, 1, 2)}),
            "num_generations=2": (Arm(2, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.36 + 0.1 * s)) for s in (0, 1, 2)})}
    _, out = make_custom_study(tmp_path / "mount", arms, evaluation={"num_prompts": 4})
    before = _state(out)
    elsewhere = tmp_path / "elsewhere" / "report.html"
    _chmod_tree(out, writable=False)
    try:
        assert not os.stat(out).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        code = main(["report", str(ROOT / "studies/tiny-cpu.yaml"), "--set", "study.name=custom",
                     "--set", f"study.output_dir={out}", "--out", str(elsewhere)])
    finally:
        _chmod_tree(out, writable=True)
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert _state(out) == before  # no byte written, no file made: not the note, not the artifact, no lock
    assert elsewhere.exists() and (elsewhere.parent / "summary.json").exists() and "Answer:" in printed
    assert "was only read (the report went elsewhere), so the study's note in the dashboard is unchanged" in printed
