"""`grpo-ablate report --out ELSEWHERE` on a study it may only read (issues 43 and 52): a real read-only mount.
The report is written elsewhere and nothing in the study's folder changes: not a byte, not a new file.

As root, chmod 0555 does not stop a write (round 5 found this test passing on chmod while a real read-only
mount was refused by validate's permission-bit check): the study is bind-mounted read-only, which stops root
too, and where the tool decides whether a folder can be written it asks the kernel (statvfs, then a real file).

    pytest tests/test_report_readonly.py
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from _report_fixtures import SeedRun, make_custom_study
from helpers import ROOT, read_only_bind
from grpo_ablate.commands.cli import main
from grpo_ablate.config.places import read_only_mount, writable_dir_problem
from grpo_ablate.core.vocab import Arm


def _state(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file and folder under `folder`: size, modification time and (files) content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, p.read_bytes() if p.is_file() else b"")
    return out


def _study(tmp_path: Path) -> Path:
    arms = {"baseline": (Arm(8, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.3 + 0.1 * s)) for s in (0, 1, 2)}),
            "num_generations=2": (Arm(2, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.36 + 0.1 * s)) for s in (0, 1, 2)})}
    return make_custom_study(tmp_path / "disk", arms, evaluation={"num_prompts": 4})[1]


def _report(out: Path, *extra: str) -> int:
    return main(["report", str(ROOT / "studies/tiny-cpu.yaml"), "--set", "study.name=custom",
                 "--set", f"study.output_dir={out}", *extra])


def test_report_out_elsewhere_reads_a_study_on_a_read_only_mount_and_writes_nothing_into_it(tmp_path, capsys):
    disk = _study(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "report.html"
    with read_only_bind(disk, tmp_path / "mount") as mounted:
        assert read_only_mount(mounted) and os.stat(mounted).st_mode & stat.S_IWUSR  # the bits still say writable
        before = _state(mounted)
        code = _report(mounted, "--out", str(elsewhere))
        after = _state(mounted)
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert after == before  # no byte written, no file made: not the note, not the artifact, no lock
    assert elsewhere.exists() and (elsewhere.parent / "summary.json").exists() and "Answer:" in printed
    assert "was only read (the report went elsewhere), so the study's note in the dashboard is unchanged" in printed


def test_a_read_only_mount_is_refused_where_the_command_would_write_and_said_so(tmp_path, capsys):
    """Without --out (or --out inside the study) the report writes into the folder: refused before any work, exit 2."""
    disk = _study(tmp_path)
    with read_only_bind(disk, tmp_path / "mount") as mounted:
        problem = writable_dir_problem(mounted / "sub")
        code = _report(mounted)
        inside = _report(mounted, "--out", str(mounted / "report.html"))
    err = capsys.readouterr().err
    assert problem is not None and "read-only file system" in problem
    assert code == 2 and inside == 2 and "study.output_dir" in err and "read-only file system" in err, err


def test_root_may_write_where_the_bits_say_no_and_the_check_agrees(tmp_path):
    """chmod 0555 stops other users, not root: the check is the kernel's answer, not the permission bits'."""
    folder = tmp_path / "bits"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert (writable_dir_problem(folder) is None) == (os.geteuid() == 0)
        assert list(folder.iterdir()) == []  # the check's file is gone
    finally:
        folder.chmod(0o755)
