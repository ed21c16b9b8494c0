"""One path rule (config/load.py): a relative path in a study file means from the study file's
folder, whatever the current directory; one given on the command line, from the current one.

Generated: relative paths (nested, with `..`) for the storage (a journal path, `journal:NAME`,
`sqlite:///NAME`), the output folder, the dataset, the recipe and the accelerate config, loaded
from the study's folder and from another folder. Once a second study was created in a second
database and overwrote the first one's trial folders, because `sqlite:///s.db` meant another file
from another folder.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import cli_inprocess
from grpo_ablate.config import load_study

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_segment = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)
_relative = st.tuples(st.integers(0, 1), st.lists(_segment, min_size=1, max_size=3)).map(
    lambda t: "/".join([".."] * t[0] + t[1]))
_storages = st.sampled_from(["{p}.journal", "journal:{p}.journal", "sqlite:///{p}.db", "SQLite:///{p}.db?timeout=5"])


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(text)
    return path


def _loaded_from(cwd: Path, study: Path, *sets: str):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return load_study(study, list(sets))
    finally:
        os.chdir(old)


@SETTINGS
@given(out=_relative, store=_relative, kind=_storages, data=_relative, acc=_relative)
def test_relative_paths_in_a_study_file_are_from_its_folder(out, store, kind, data, acc):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        folder, elsewhere = root / "a" / "b", root / "c"
        elsewhere.mkdir(parents=True)
        for rel, content in ((data + ".jsonl", '{"prompt": "1+1=", "answer": "2"}\n'), (acc + ".yaml", "num_processes: 1\n")):
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        storage = kind.format(p=store)
        study = _write(folder, f"study: {{name: t, output_dir: {out}, storage: '{storage}'}}\n"
                               "model: {name_or_path: builtin:tiny}\n"
                               f"data: {{dataset: {data}.jsonl}}\n"
                               f"hardware: {{accelerate_config: {acc}.yaml}}\n"
                               "search: {num_generations: [2, 4]}\nbudget: {max_steps: 5}\n")
        here, there = _loaded_from(folder, study), _loaded_from(elsewhere, study)
        for s in (here, there):
            assert s.output_dir == Path(os.path.normpath(folder / out))
            assert s.data.dataset == os.path.normpath(folder / f"{data}.jsonl")
            assert s.hardware.accelerate_config == os.path.normpath(folder / f"{acc}.yaml")
        assert here.storage_url == there.storage_url
        where = os.path.normpath(folder / store)
        assert where in here.storage_url, here.storage_url


@SETTINGS
@given(out=_relative)
def test_a_relative_path_on_the_command_line_is_from_the_current_folder(out):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        study = _write(root / "a", "study: {name: t}\nmodel: {name_or_path: builtin:tiny}\ndata: {task: addition}\n"
                                   "search: {num_generations: [2, 4]}\nbudget: {max_steps: 5}\n")
        (root / "c").mkdir()
        s = _loaded_from(root / "c", study, f"study.output_dir={out}", f"study.storage=sqlite:///{out}.db")
        assert s.output_dir == Path(os.path.normpath(root / "c" / out))
        assert s.storage_url == f"sqlite:///{os.path.normpath(root / 'c' / out)}.db"


def test_set_trainer_from_merges_the_recipe_as_the_file_key_does(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("learning_rate: 3.0e-6\nmax_completion_length: 48\n")
    study = _write(tmp_path / "s", "study: {name: t}\nmodel: {name_or_path: builtin:tiny}\ndata: {task: addition}\n"
                                   "search: {num_generations: [2, 4]}\nbudget: {max_steps: 5}\n")
    s = _loaded_from(tmp_path, study, "trainer_from=recipe.yaml")
    assert s.trainer["learning_rate"] == 3.0e-6 and s.trainer["max_completion_length"] == 48
    s = _loaded_from(tmp_path, study, "trainer_from=recipe.yaml", "trainer.learning_rate=1e-5")
    assert s.trainer["learning_rate"] == 1e-5  # the study's own keys (overrides too) win over the recipe


def test_report_from_another_folder_finds_the_study(tmp_path):
    import optuna

    from grpo_ablate.storage.store import open_storage

    study = _write(tmp_path / "proj", "study: {name: rel, output_dir: out, storage: 'sqlite:///s.db'}\n"
                                      "model: {name_or_path: builtin:tiny}\ndata: {task: addition}\n"
                                      "search: {num_generations: [2, 4]}\nbudget: {max_steps: 5}\n")
    s = _loaded_from(tmp_path / "proj", study)
    optuna.create_study(study_name="rel", storage=open_storage(s.storage_url), directions=s.directions)
    (tmp_path / "elsewhere").mkdir()
    res = cli_inprocess("report", "../proj/study.yaml", cwd=tmp_path / "elsewhere")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "proj" / "out" / "report.html").is_file()
    assert not list((tmp_path / "elsewhere").iterdir())  # no second database, no second run folder


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "postgresql://u@h/db", "sqlite:////abs/s.db"])
def test_urls_that_are_not_relative_files_stay_as_written(tmp_path, url):
    study = _write(tmp_path, f"study: {{name: t, storage: '{url}'}}\nmodel: {{name_or_path: builtin:tiny}}\n"
                             "data: {task: addition}\nsearch: {num_generations: [2, 4]}\nbudget: {max_steps: 5}\n")
    assert load_study(study).storage_url == url
