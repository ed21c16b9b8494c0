"""Which storage a study is in: an identity without credentials (storage_url.storage_identity).

Generated spellings of one PostgreSQL database (password in the URL, in PGPASSWORD, in
~/.pgpass, in a query; host `localhost`, `127.0.0.1` or `[::1]`; the port written or left to
its default; a driver named or not) are one storage; another host, port or database is another.
On a real PostgreSQL server, a study claimed with the password in its URL is resumed with the
password moved out of it. And `sqlite:///` onto another application's database is refused with
the file's bytes unchanged.
"""

from __future__ import annotations

import sqlite3

import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli_inprocess
from grpo_ablate.config import StudyError, load_study
from grpo_ablate.storage.store import open_storage
from grpo_ablate.storage.url import mask_url, storage_identity
from grpo_ablate.study.owner import check_output_dir, claim_output_dir

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)

_hosts = st.sampled_from(["localhost", "127.0.0.1", "[::1]", "LocalHost"])
_secret = st.text(st.characters(codec="ascii", exclude_characters="\x00\n\r"), min_size=1, max_size=12)


@st.composite
def spelling(draw, port: int = 5432, db: str = "grpo") -> str:
    """One way to write the URL of the database `db` on this machine at `port`."""
    from urllib.parse import quote

    scheme = draw(st.sampled_from(["postgresql", "postgres", "postgresql+psycopg", "PostgreSQL"]))
    user = draw(st.sampled_from(["", "bob@", "bob:{pw}@"])).format(pw=quote(draw(_secret), safe=""))
    written_port = f":{port}" if port != 5432 or draw(st.booleans()) else ""
    query = draw(st.sampled_from(["", "?sslmode=disable", "?password=x&connect_timeout=3"]))
    return f"{scheme}://{user}{draw(_hosts)}{written_port}/{db}{query}"


@SETTINGS
@given(a=spelling(), b=spelling())
def test_spellings_of_one_database_are_one_storage(a, b):
    assert storage_identity(a) == storage_identity(b) == "postgresql://localhost:5432/grpo"


@SETTINGS
@given(a=spelling(), other=st.sampled_from([spelling(port=5433), spelling(db="other")]).flatmap(lambda s: s))
def test_another_port_or_database_is_another_storage(a, other):
    assert storage_identity(a) != storage_identity(other)


@SETTINGS
@given(url=spelling())
def test_the_identity_holds_no_credential(url):
    from sqlalchemy.engine import make_url

    shown = storage_identity(url)
    assert "@" not in shown and "?" not in shown
    password = make_url(url).password
    assert not password or len(password) < 3 or password not in shown.replace("localhost", "").replace("grpo", "")


def test_an_owner_recorded_before_as_a_masked_url_is_the_same_owner(tmp_path):
    """Owner files written by the last round hold the masked URL; they still match."""
    import json

    from grpo_ablate.study.owner import OWNER_FILE

    out = tmp_path / "o"
    out.mkdir()
    (out / OWNER_FILE).write_text(json.dumps({"study": "s", "storage": "postgresql://bob:***@127.0.0.1:5432/db"}))
    study = load_study("studies/tiny-cpu.yaml", ["study.name=s", f"study.output_dir={out}",
                                                 "study.storage=postgresql://bob@localhost/db"])
    check_output_dir(study)


def test_a_postgres_study_resumes_with_its_password_moved_out_of_the_url(tmp_path, fresh_pg_db, monkeypatch):
    """A real server: claimed as postgres:SECRET@127.0.0.1, resumed as postgres@localhost with
    PGPASSWORD, then with ~/.pgpass; the report (a command that checks the owner) runs each time."""
    host_port_db = fresh_pg_db.split("@", 1)[1]
    port = host_port_db.split(":")[1].split("/")[0]
    with_password = f"postgresql://postgres:s3cr%40t@{host_port_db}"
    out = tmp_path / "out"
    study = load_study("studies/tiny-cpu.yaml", ["study.name=pg", f"study.output_dir={out}",
                                                 f"study.storage={with_password}"])
    optuna.create_study(study_name="pg", storage=open_storage(with_password), directions=study.directions)
    claim_output_dir(study)
    moved = f"postgresql://postgres@localhost:{port}/{host_port_db.rsplit('/', 1)[1]}"
    args = ("report", "studies/tiny-cpu.yaml", "--set", "study.name=pg", "--set", f"study.output_dir={out}",
            "--storage", moved)
    res = cli_inprocess(*args, PGPASSWORD="s3cr@t")
    assert res.returncode == 0, res.stderr
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"localhost:{port}:*:postgres:s3cr@t\n")
    pgpass.chmod(0o600)
    res = cli_inprocess(*args, PGPASSFILE=str(pgpass))
    assert res.returncode == 0, res.stderr
    other = load_study("studies/tiny-cpu.yaml", ["study.name=pg", f"study.output_dir={out}",
                                                 f"study.storage=postgresql://postgres@localhost:{port}/elsewhere"])
    with pytest.raises(StudyError, match="belongs to the study"):
        check_output_dir(other)


# ------------------------------------------------------------------ another application's SQLite file


def test_an_sqlite_database_of_another_application_is_refused_untouched(tmp_path):
    db = tmp_path / "app.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.execute("INSERT INTO invoices (total) VALUES (12.5)")
    con.commit()
    con.close()
    before = db.read_bytes()
    with pytest.raises(StudyError, match="another application's SQLite database .tables invoices"):
        open_storage(f"sqlite:///{db}")
    res = cli_inprocess("plan", "studies/tiny-cpu.yaml", "--set", f"study.storage=sqlite:///{db}",
                        "--set", f"study.output_dir={tmp_path / 'out'}")
    assert db.read_bytes() == before, res.stderr  # plan's estimate reads it without writing Optuna's tables
    assert db.read_bytes() == before
    optuna_db = tmp_path / "optuna.db"  # Optuna's own database, with a study in it, opens again
    optuna.create_study(study_name="s", storage=open_storage(f"sqlite:///{optuna_db}"))
    assert optuna.load_study(study_name="s", storage=open_storage(f"sqlite:///{optuna_db}"))


def test_mask_and_identity_agree_on_a_url_without_a_host():
    url = "postgresql://bob:SECRET@"
    assert "SECRET" not in mask_url(url) and "SECRET" not in storage_identity(url)
