"""Every file the tool reads goes through one safe reader (grpo_ablate/core/safe_read.py): every
(file kind x reader) pair, on real FIFOs (os.mkfifo), real symlinks to /dev/zero and real folders.

The contract: a regular file only, else exit 2 with one line naming the path; never a hang (each
case runs under an alarm that turns a blocked open() into a failure), never a read until memory
runs out. And the byte-order mark where the format allows one: an Excel CSV dataset, a reward
module saved by a Windows editor, a study file.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Callable

import pytest
from helpers import MINIMAL_STUDY, cli_inprocess, watchdog
from grpo_ablate.core.errors import StudyError
from grpo_ablate.core.safe_read import read_bytes, read_text
from grpo_ablate.storage.store import open_storage

WATCHDOG_S = 30  # far above any honest answer (milliseconds); a blocked open() never returns at all


def make_kind(path: Path, kind: str) -> None:
    """`path` made into a file of `kind`: what a user may point a setting at by mistake."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        raise AssertionError(kind)


def _study(folder: Path, extra: str = "") -> Path:
    path = folder / "study.yaml"
    out = folder / "out"
    path.write_text(textwrap.dedent(MINIMAL_STUDY).replace("  name: t\n", f"  name: t\n  output_dir: {out}\n") + extra)
    return path


# each reader: (where the bad file goes, the command that reads it) -> the CLI's arguments
def _study_file(tmp: Path) -> tuple[Path, list[str]]:
    return tmp / "bad.yaml", ["validate", str(tmp / "bad.yaml")]


def _recipe(tmp: Path) -> tuple[Path, list[str]]:
    return tmp / "recipe.yaml", ["validate", str(_study(tmp, "trainer_from: recipe.yaml\n"))]


def _accelerate(tmp: Path) -> tuple[Path, list[str]]:
    return tmp / "acc.yaml", ["validate", str(_study(tmp, "hardware: {accelerate_config: acc.yaml}\n"))]


def _dataset(tmp: Path) -> tuple[Path, list[str]]:
    study = _study(tmp).read_text().replace("data: {task: addition}", "data: {dataset: data.csv}")
    (tmp / "study.yaml").write_text(study)
    return tmp / "data.csv", ["validate", str(tmp / "study.yaml")]


def _reward(tmp: Path) -> tuple[Path, list[str]]:
    return tmp / "my_reward.py", ["validate", str(_study(tmp, "rewards: ['my_reward:score']\n"))]


def _probe(tmp: Path) -> tuple[Path, list[str]]:
    return tmp / "out" / "probe.json", ["plan", str(_study(tmp))]


def _advise(tmp: Path) -> tuple[Path, list[str]]:  # an ablation's plan reads the arms advise added
    return tmp / "out" / "advise.json", ["plan", str(_study(tmp)), "--set", "study.sampler=ablation"]


def _summary(tmp: Path) -> tuple[Path, list[str]]:
    good = tmp / "good.json"
    good.write_text(json.dumps({"arms": []}))
    return tmp / "summary.json", ["compare", str(good), str(tmp / "summary.json")]


def _journal(tmp: Path) -> tuple[Path, list[str]]:
    return tmp / "j.journal", ["validate", str(_study(tmp)), "--set", f"study.storage={tmp / 'j.journal'}"]


READERS: dict[str, Callable[[Path], tuple[Path, list[str]]]] = {
    "study file": _study_file, "recipe": _recipe, "accelerate config": _accelerate, "dataset": _dataset,
    "reward module": _reward, "probe.json": _probe, "advise.json": _advise, "summary.json": _summary,
    "journal": _journal,
}


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_file_that_is_not_a_regular_file_is_exit_2_never_a_hang(tmp_path, reader, kind):
    """The whole class, enumerated: every reader the CLI has, every kind of file that is not one."""
    tmp = tmp_path
    bad, argv = READERS[reader](tmp)
    make_kind(bad, kind)
    with watchdog(WATCHDOG_S):
        code, out, err = cli_inprocess(*argv)
    assert code == 2 and "Traceback" not in err, (reader, kind, code, out, err)
    assert bad.name in err, (reader, kind, err)
    if kind == "folder" and reader in ("dataset", "summary.json"):
        return  # a folder is a kind these take: a saved dataset, a run folder holding summary.json
    assert any(w in err for w in ("not a regular file", "is a folder", "FIFO", "device")), (reader, kind, err)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
def test_the_journal_opened_by_run_is_refused_not_read(tmp_path, kind):
    """`run` opens the journal through open_storage: a FIFO there once hung it forever."""
    path = tmp_path / "study.journal"
    make_kind(path, kind)
    with watchdog(WATCHDOG_S), pytest.raises(StudyError, match="not a regular file|is a folder"):
        open_storage(str(path))


def test_a_size_bound_keeps_dev_zero_out_of_memory(tmp_path):
    big = tmp_path / "zero.json"
    big.symlink_to("/dev/zero")
    with watchdog(WATCHDOG_S), pytest.raises(StudyError, match="not a regular file"):
        read_bytes(big, "probe", 1 << 20)
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:
        f.truncate(10 << 20)  # a sparse 10 MiB regular file
    with pytest.raises(StudyError, match="larger than 1 MiB"):
        read_text(huge, "study file", 1 << 20)


# ------------------------------------------------------------------ byte-order marks, where the format allows one


def test_an_excel_csv_with_a_bom_is_a_dataset(tmp_path):
    data = tmp_path / "data.csv"
    data.write_bytes(b"\xef\xbb\xbfprompt,answer\n1+1=,2\n2+2=,4\n")
    study = _study(tmp_path).read_text().replace("data: {task: addition}", "data: {dataset: data.csv}")
    (tmp_path / "study.yaml").write_text(study)
    res = cli_inprocess("validate", str(tmp_path / "study.yaml"))
    assert res.returncode == 0, res.stderr


def test_a_reward_module_starting_with_a_bom_is_valid_python(tmp_path):
    (tmp_path / "my_reward.py").write_bytes(b"\xef\xbb\xbfdef score(prompts, completions, **kwargs):\n"
                                            b"    return [0.0 for _ in completions]\n")
    res = cli_inprocess("validate", str(_study(tmp_path, "rewards: ['my_reward:score']\n")))
    assert res.returncode == 0, res.stderr


def test_a_study_file_with_a_bom_reads(tmp_path):
    path = _study(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    res = cli_inprocess("validate", str(path))
    assert res.returncode == 0, res.stderr
