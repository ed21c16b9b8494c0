"""Storage URLs (issue 23, item 5): every credential masked on every surface, and anything that
looks like a URL but is not one refused before it can become a journal file named after a password.

The CLI runs in-process (`grpo_ablate.commands.cli.main`) so these stay unit-fast; the storages are real
(journal files, SQLite databases SQLAlchemy opens).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import optuna
import pytest

from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.commands.cli import main
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.storage.store import canonical_url, is_rdb_url, mask_url, open_storage, url_problem
from grpo_ablate.records import trial_record as record
from helpers import MINIMAL_STUDY

SECRET = "Zq7-s3cr3t"
STUDY = MINIMAL_STUDY


def _study_file(tmp_path: Path) -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(textwrap.dedent(STUDY))
    return p


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ the masking function


@pytest.mark.parametrize("text, kept", [
    (f"postgresql://ablate:{SECRET}@db.example.org:5432/optuna", "postgresql://ablate:***@db.example.org:5432/optuna"),
    (f"postgresql://ablate:a/{SECRET}@db:5432/optuna", "postgresql://ablate:***@db:5432/optuna"),  # `/` in it
    (f"postgresql://ablate:a@{SECRET}@db/optuna", "@db/optuna"),  # an unencoded @ in it
    (f"postgresql://ablate@db/optuna?password={SECRET}&sslmode=require", "password=***"),
    (f"PostgreSQL://ablate@db/optuna?sslpassword={SECRET}", "sslpassword=***"),
    (f"postgresql://ablate@db/optuna?passfile=/home/a/.pgpass&PassWord={SECRET}", "passfile=/home/a/.pgpass"),
    (f"mssql+pyodbc:///?odbc_connect=DRIVER%3DODBC%3BUID%3Du%3BPWD%3D{SECRET}", "odbc_connect=***"),
    (f"mysql://u:{SECRET}@h/x?charset=utf8", "mysql://u:***@h/x?charset=utf8"),
    (f"host=db port=5432 password={SECRET} dbname=optuna", "host=db port=5432 password=*** dbname=optuna"),
    (f"host=db password = '{SECRET} x' dbname=optuna", "dbname=optuna"),
    (f"postgresql//ablate:{SECRET}@db/optuna", "postgresql//ablate:***@db/optuna"),  # not a URL at all
    (f"postgresql://ablate:{SECRET}@db:notaport/optuna", "ablate:***@db"),
    (f"could not connect to postgresql://u:{SECRET}@h/db\n(then mysql://u:{SECRET}@h/x)", "mysql://u:***@h/x"),
])
def test_mask_url_hides_every_credential_it_knows(text, kept):
    shown = mask_url(text)
    assert SECRET not in shown and SECRET[:5] not in shown
    assert kept in shown


def test_mask_url_leaves_plain_paths_and_password_free_urls_alone():
    for text in ("runs/x/study.journal", "journal:odd:name.journal", "sqlite:///runs/x/study.db",
                 "postgresql://ablate@db:5432/optuna?sslmode=require"):
        assert mask_url(text) == text


# ------------------------------------------------------------------ what is a storage URL


@pytest.mark.parametrize("url, needle", [
    (f"postgresql//ablate:{SECRET}@localhost/db", "missing its colon"),
    (f"PostgreSQL//ablate:{SECRET}@localhost/db", "missing its colon"),
    (f" sqlite:///x.db?password={SECRET}", "spaces"),
    ("sqlite:///x.db ", "spaces"),
    (f"host=localhost password={SECRET} dbname=optuna", "libpq key=value"),
    (f"ablate:{SECRET}@localhost/db", "unknown storage scheme"),
    (f"//ablate:{SECRET}@localhost/db", "looks like a URL"),
    (f"postgresql:/ablate:{SECRET}@localhost/db", "is not a database URL"),
    (f"postgresql://ablate:a@{SECRET}@localhost/db", "unencoded @"),
    (f"postgresql://ablate:a/{SECRET}@localhost:99999/db", "bad port"),
    (f"postgresql://ablate:a/{SECRET}@localhost:x1/db", "bad port"),
    ("", "empty"),
])
def test_url_problem_refuses_what_only_looks_like_a_url(url, needle):
    problem = url_problem(url)
    assert problem is not None and needle in problem
    assert SECRET not in problem


def test_schemes_compare_case_insensitively():
    for url in ("PostgreSQL://u@localhost/db", "SQLite:///x.db", "POSTGRES://u@h/db", "postgresql+PSYCOPG://u@h/d"):
        assert url_problem(url) is None and is_rdb_url(url), url
    assert canonical_url("SQLite:///Runs/X.db") == "sqlite:///Runs/X.db"  # only the scheme changes
    assert canonical_url("runs/X/study.journal") == "runs/X/study.journal"


def test_a_capitalised_sqlite_url_opens_a_database_not_a_journal_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = open_storage("SQLite:///study.db")
    optuna.create_study(study_name="s", storage=storage).enqueue_trial({"x": 1})
    assert (tmp_path / "study.db").is_file()
    assert not (tmp_path / "SQLite:").exists()
    assert len(optuna.load_study(study_name="s", storage="sqlite:///study.db").trials) == 1


def test_open_storage_refuses_a_url_without_its_colon_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StudyError) as e:
        open_storage(f"postgresql//ablate:{SECRET}@localhost/db")
    assert SECRET not in str(e.value) and "missing its colon" in str(e.value)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ every surface, through the CLI


def test_validate_ok_line_masks_a_query_password(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/s.db?password={SECRET}"
    code, out, err = _cli(capsys, "validate", str(_study_file(tmp_path)), "--set", f"study.storage={url}")
    assert code == 0, err
    assert SECRET not in out + err and "password=***" in out


@pytest.mark.parametrize("url", [
    f"postgresql://ablate:a/{SECRET}@localhost:notaport/db",
    f"postgresql//ablate:{SECRET}@localhost/db",
    f"PostgreSQL//ablate:{SECRET}@localhost/db",
    f" postgresql://ablate:{SECRET}@localhost/db",
    f"host=localhost password={SECRET}",
    f"postgress://ablate:a/{SECRET}@localhost/db",
])
def test_validate_and_run_refuse_in_one_masked_line_and_create_nothing(tmp_path, capsys, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    study = _study_file(tmp_path)
    for argv in (["validate", str(study), "--set", f"study.storage={json.dumps(url)}"],
                 ["run", str(study), "--storage", url, "--no-report"]):
        code, out, err = _cli(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert SECRET not in out + err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.yaml"]  # no journal folder, no run folder


def test_study_config_attribute_holds_no_credential(tmp_path):
    """`run` stores the resolved study as the `config` attribute that the dashboard shows."""
    from grpo_ablate.study.setup import describe_study, open_study

    url = f"sqlite:///{tmp_path}/s.db?password={SECRET}"
    study = load_study(_study_file(tmp_path), [f"study.storage={url}"])
    assert SECRET not in repr(study.to_dict())
    ostudy, created = open_study(study, completions_per_trial(study))
    assert created
    describe_study(ostudy, study, baseline_arm(study))
    stored = optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path}/s.db")
    assert SECRET not in repr(record.stored_attrs(stored)) and "password=***" in record.study_attrs(stored).config["study"]["storage"]


def test_dashboard_banner_masks_a_query_password(tmp_path):
    from grpo_ablate.commands.dashboard import banner

    study = load_study(_study_file(tmp_path), [f"study.storage=sqlite:///{tmp_path}/s.db?password={SECRET}"])
    line = banner(study, "127.0.0.1", 8080)
    assert SECRET not in line and "password=***" in line and "http://127.0.0.1:8080" in line


def test_report_masks_a_query_password(tmp_path):
    from _report_fixtures import STUDY_NAME, make_study
    from grpo_ablate.report import write_outputs
    from grpo_ablate.report.data import build_report_data
    from grpo_ablate.report.records import load_trials

    storage, out = make_study(tmp_path)
    attrs, frozen = load_trials(storage, STUDY_NAME)
    url = f"postgresql://ablate@db.example.org/optuna?sslmode=require&password={SECRET}"
    paths = write_outputs(build_report_data(STUDY_NAME, attrs, frozen, storage_url=url), out / "report.html")
    html = paths["html"].read_text(encoding="utf-8")
    assert SECRET not in html and "password=***" in html
    assert SECRET not in paths["summary_json"].read_text(encoding="utf-8")


def test_report_of_a_missing_sqlite_study_names_the_file_without_its_query(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/none.db?password={SECRET}"
    code, out, err = _cli(capsys, "report", str(_study_file(tmp_path)), "--storage", url)
    assert code == 2 and SECRET not in out + err
    assert f"no study at {tmp_path}/none.db:" in err
    assert not (tmp_path / "none.db").exists()
