"""A storage URL read once (storage_url.locate): what storage.py and study/setup.py decide by."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_ablate.config import StudyError, load_study
from grpo_ablate.storage.url import locate
from grpo_ablate.study.setup import check_warm_source, started_study
from helpers import ROOT

TINY = str(ROOT / "studies/tiny-cpu.yaml")


def test_a_location_says_what_the_url_names():
    journal = locate("journal:runs/a:b.journal")
    assert (journal.database, journal.file, journal.sqlite) == (False, Path("runs/a:b.journal"), False)
    lite = locate("SQLite:///tmp/x.db?timeout=5")
    assert (lite.url, lite.database, lite.file, lite.sqlite) == ("sqlite:///tmp/x.db?timeout=5", True, Path("tmp/x.db"), True)  # three slashes: relative
    server = locate("postgresql://me:hunter22@db.example/optuna")
    assert (server.database, server.file, server.sqlite) == (True, None, False)
    assert "hunter22" not in server.masked
    assert server.scrub("OperationalError: password hunter22 rejected for postgresql://me:hunter22@db.example/optuna") \
        .count("hunter22") == 0


def test_a_warm_start_by_name_without_its_journal_is_refused_with_the_masked_url(tmp_path):
    study = load_study(TINY, [f"output_dir={tmp_path / 'out'}"])
    with pytest.raises(StudyError, match="there is no journal .*missing.journal"):
        check_warm_source(study, "other-study", str(tmp_path / "missing.journal"))
    assert not (tmp_path / "missing.journal").exists()  # asking created nothing


def test_a_study_whose_journal_is_missing_or_empty_has_not_started(tmp_path):
    study = load_study(TINY, [f"output_dir={tmp_path / 'out'}"])
    assert started_study(study) is None
    journal = Path(study.storage_url.removeprefix("journal:"))
    journal.parent.mkdir(parents=True)
    journal.touch()
    assert started_study(study) is None and journal.stat().st_size == 0
