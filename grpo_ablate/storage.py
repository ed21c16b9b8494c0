"""Where a study lives: Optuna storage from a URL, and the artifact store beside it.

    python -c 'import sys; from grpo_ablate.storage import open_storage; open_storage(sys.argv[1])' "$URL"

- a plain path (the default, `<output_dir>/study.journal`): Optuna's journal file, for many
  processes on one host. A journal with a torn or broken line (disk full, a crash mid-write)
  is repaired before anything appends to it, the original kept beside it; a file that is not
  a journal is refused and left untouched.
- `sqlite:///...`: one process only (parallel writers hit "database is locked"); an existing
  file that is not an SQLite database is refused.
- `postgresql://user:pass@host/db`: workers on several hosts; the only kind with heartbeats.

A storage that cannot be opened raises `StudyError` with one line naming the masked URL.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

__all__ = ["open_storage", "open_artifact_store", "normalize_url", "is_rdb_url", "mask_url", "url_problem",
           "canonical_url", "local_file", "DATABASE_SCHEMES", "JOURNAL_PREFIX", "repair_journal", "check_foreign_file"]

JOURNAL_PREFIX = "journal:"  # forces a journal file, e.g. for a file name with a colon

# database scheme -> the driver modules SQLAlchemy may use by default (any one will do). Every
# other spelling is a journal file path, so these decide what is a database and what is a file.
DATABASE_SCHEMES: dict[str, tuple[str, ...]] = {
    "postgresql": ("psycopg", "psycopg2"),
    "postgres": ("psycopg", "psycopg2"),
    "sqlite": ("sqlite3",),
    "mysql": ("MySQLdb",),
    "oracle": ("oracledb", "cx_Oracle"),
    "mssql": ("pyodbc",),
}
_SUGGESTED_SCHEMES = [s for s in DATABASE_SCHEMES if s != "postgres"]  # one spelling in hints
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):")
_NO_COLON = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)//")

# A key whose VALUE is itself a secret, in a URL's query, a libpq DSN or an ODBC string. Keys that
# name where a secret lives (passfile, sslkey, sslcert) stay visible: they reveal nothing and say
# where to look when a connection fails.
_SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "apikey", "accesskey", "credential")
# libpq's connection keywords (PostgreSQL docs, "Parameter Key Words"): a string made of these is
# a key=value DSN, which Optuna cannot open and which would otherwise name a journal file.
_LIBPQ_KEYS = frozenset(
    "host hostaddr port dbname user password passfile sslmode sslpassword sslcert sslkey sslrootcert "
    "connect_timeout options application_name service target_session_attrs channel_binding".split())
_PAIR = re.compile(
    r"(?P<key>[A-Za-z_][\w.\-]*)(?P<sep>\s*=\s*|%3[Dd])"
    r"(?P<val>'(?:[^'\\]|\\.)*'?|\"[^\"]*\"?|(?:(?!%26|%3[Bb])[^\s&;'\"])*)")
_USERINFO = re.compile(r"(?P<pre>(?:[A-Za-z][\w+.\-]*:?)?//|(?<![^\s/]))(?P<user>[^\s:/@]*):(?P<pw>(?!//)\S*)@")
# For masking, a user name may hold an unencoded @ too: better to hide too much than too little.
_USERINFO_LOOSE = re.compile(r"(?P<pre>(?:[A-Za-z][\w+.\-]*:?)?//|(?<![^\s/]))(?P<user>[^\s:/]*):(?P<pw>(?!//)\S*)@")


# Secrets at least this long are also scrubbed wherever they appear; shorter ones only where they
# stand (scrubbing "a" everywhere would blank out the host name).
_MIN_SCRUBBED = 4


def _is_secret_key(key: str) -> bool:
    flat = re.sub(r"[^a-z]", "", key.lower())
    return flat == "pass" or any(word in flat for word in _SECRET_WORDS)


def _parse(url: str) -> "Any | None":
    """SQLAlchemy's reading of `url` when it is one (`scheme://...`), else None."""
    if "://" not in url:
        return None
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018  (a bad port raises only when read on some versions)
    except Exception:  # ArgumentError, ValueError (port), anything else: not a URL it can read
        return None
    return parsed


def _mask_pairs(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        return f"{m['key']}{m['sep']}***" if _is_secret_key(m["key"]) and m["val"] else m[0]

    return _PAIR.sub(repl, text)


def _mask_text(text: str) -> str:
    """Every credential in free text: URL userinfo (`//user:secret@`) and secret key=value pairs."""
    return _mask_pairs(_USERINFO_LOOSE.sub(lambda m: f"{m['pre']}{m['user']}:***@", text))


def mask_url(url: str) -> str:
    """The URL (or any text quoting one) as it may be shown or stored: every credential as ***.

    Every place that prints, logs or stores a storage URL goes through this (stdout, validate's
    messages, the study's `config` attribute the dashboard shows, the report). It hides what
    SQLAlchemy's parser knows is a password, the values of secret query keys (`?password=`,
    `sslpassword`, an ODBC string's `PWD`), the same keys in a libpq `key=value` string, and a
    `user:secret@` in text that does not parse as a URL at all.
    """
    parsed = _parse(url.strip())
    if parsed is None or any(m["pw"] != (parsed.password or "") for m in _USERINFO_LOOSE.finditer(url)):
        # not a URL, or one the parser reads differently from how it looks (`u:p@ss@h`,
        # `postgresql:///u:secret?@h`): mask it as written
        return _scrub(_mask_text(url), url)
    if parsed.host and "@" in parsed.host:  # an unencoded @ in the password: the parser split too early
        parsed = parsed.set(password="x", host=parsed.host.rpartition("@")[2])
    if parsed.database:  # `postgresql:///user:secret@host/db`: the parser calls it all a database name
        parsed = parsed.set(database=_mask_text(parsed.database))
    query = {k: ("***" if _is_secret_key(k) else
                 tuple(_mask_pairs(x) for x in v) if isinstance(v, tuple) else _mask_pairs(v))
             for k, v in parsed.query.items()}
    shown = _mask_text(parsed.set(query=query).render_as_string(hide_password=True).replace("%2A%2A%2A", "***"))
    return _scrub(shown, url)


def _scrub(shown: str, url: str) -> str:
    """Every secret the raw text holds, removed from `shown` in any spelling the rendering uses."""
    for secret in _secrets(url):
        if len(secret) >= _MIN_SCRUBBED:
            for form in {secret, quote(secret, safe=""), quote(secret, safe="/"), quote_plus(secret)}:
                shown = shown.replace(form, "***")
    return shown


def _secrets(url: str) -> list[str]:
    """The secret values in `url`, to scrub from a driver's error text that may quote them."""
    found: list[str] = []
    parsed = _parse(url.strip())
    if parsed is not None:
        found += [parsed.password] if parsed.password else []
        found += [str(x) for k, v in parsed.query.items() if _is_secret_key(k)
                  for x in (v if isinstance(v, tuple) else (v,))]
    found += [m["pw"] for m in _USERINFO_LOOSE.finditer(url)]
    found += [m["val"].strip("'\"") for m in _PAIR.finditer(url) if _is_secret_key(m["key"])]
    return sorted({s for s in found if len(s) >= 2}, key=len, reverse=True)


def _holds_credentials(path: str) -> bool:
    """Whether a would-be journal path reads like a URL with a secret in it."""
    return ("://" in path or _USERINFO_LOOSE.search(path) is not None
            or any(_is_secret_key(m["key"]) for m in _PAIR.finditer(path)))


def _cut(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _scheme(url: str) -> tuple[str, str] | None:
    """(dialect, driver) of a `scheme:` prefix, lower-cased; None for a path (or a drive letter)."""
    m = _SCHEME.match(url)
    if m is None or len(m["scheme"]) == 1:
        return None
    dialect, _, driver = m["scheme"].lower().partition("+")
    return dialect, driver


def url_problem(url: str) -> str | None:
    """Why `url` names no storage Optuna can open, as a masked phrase; None when it is a database
    URL SQLAlchemy parses or a plain journal file path.

    Anything that looks like a URL must parse as one: a typo must never become a journal FILE
    whose folder names carry the password (`postgresql//u:pw@h/db`, `PostgreSQL:/...`).
    """
    shown = _cut(mask_url(url))
    if not url.strip():
        return "is empty: give a journal file path or a database URL"
    if url != url.strip() or any(c in url for c in "\n\r\t\0"):
        return f"{shown!r} has spaces, tabs or control characters around or in it; remove them"
    if url.startswith(JOURNAL_PREFIX):
        if _holds_credentials(url[len(JOURNAL_PREFIX):]):
            return (f"{shown}: a journal file path holding user:password@ or password= would write the secret into "
                    "a file name; give a database URL (postgresql://...) or a plain path")
        return None
    words = _PAIR.findall(url)
    if words and {k.lower() for k, _, _ in words} & _LIBPQ_KEYS and re.match(r"[A-Za-z_]\w*\s*=", url):
        return (f"{shown} is a libpq key=value string, which Optuna cannot open; write it as a URL: "
                "postgresql://USER:PASSWORD@HOST:PORT/DBNAME")
    scheme = _scheme(url)
    if scheme is None:
        m = _NO_COLON.match(url)
        if m and m["scheme"].lower().partition("+")[0] in DATABASE_SCHEMES:
            return f"{shown} looks like a database URL missing its colon: write {m['scheme'].lower()}://..."
        if _holds_credentials(url):
            return (f"{shown} looks like a URL but does not start with a database scheme "
                    f"({', '.join(s + '://' for s in _SUGGESTED_SCHEMES)}); a journal file name with a colon "
                    f"needs the {JOURNAL_PREFIX} prefix")
        return None
    dialect, _ = scheme
    if dialect not in DATABASE_SCHEMES:
        import difflib

        close = difflib.get_close_matches(dialect[:80], _SUGGESTED_SCHEMES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (f"unknown storage scheme {dialect[:80]!r} in {_cut(shown)!r}{hint}; use postgresql://user@host/db, "
                f"sqlite:///FILE, or a journal file path ({JOURNAL_PREFIX}NAME for a file name with a colon)")
    if not url[len(_SCHEME.match(url)[0]):].startswith("//"):  # type: ignore[index]
        return f"{shown} is not a database URL: write {dialect}://..."
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except ValueError:  # the only number in a URL is its port
        return f"bad port in {shown}: a port is a number from 1 to 65535"
    except Exception as exc:  # ArgumentError, or anything else the parser trips on
        return f"{shown} does not parse as a database URL ({type(exc).__name__}); percent-encode special characters"
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        return f"bad port in {shown}: a port is a number from 1 to 65535"
    if parsed.host and "@" in parsed.host:
        return f"{shown} has an unencoded @ in its password: write it as %40"
    if not parsed.password and _USERINFO.search(url):
        return (f"{shown} has user:password@ in its database path (one slash too many?); "
                f"write {dialect}://USER:PASSWORD@HOST/DB")
    return None


def is_rdb_url(url: str) -> bool:
    scheme = _scheme(url)
    return scheme is not None and scheme[0] in DATABASE_SCHEMES and "://" in url


def canonical_url(url: str) -> str:
    """The URL with its scheme lower-cased (`SQLite:///x` is `sqlite:///x`); a path unchanged."""
    if not is_rdb_url(url):
        return url
    m = _SCHEME.match(url)
    assert m is not None
    return m["scheme"].lower() + url[len(m["scheme"]):]


def local_file(url: str) -> Path | None:
    """The file a journal path or SQLite URL names (its query left off); None for a server database."""
    url = canonical_url(url)
    if not is_rdb_url(url):
        return Path(url.removeprefix(JOURNAL_PREFIX))
    parsed = _parse(url)
    if parsed is None or parsed.get_backend_name() != "sqlite":
        return None
    return Path(parsed.database) if parsed.database and parsed.database != ":memory:" else None


def normalize_url(url: str) -> str:
    """Make a PostgreSQL URL name a driver that is installed (psycopg 3 unless psycopg2 is there)."""
    url = canonical_url(url)
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        if importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg") is not None:
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def _refuse(url: str, why: str, exc: BaseException | None = None) -> NoReturn:
    """One line, password masked, raised as the StudyError every command turns into exit 2."""
    from grpo_ablate.errors import Problem, StudyError

    detail = ""
    if exc is not None:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        detail = f": {type(exc).__name__}: {first[:300]}"
        for secret in _secrets(url):
            detail = detail.replace(secret, "***")
        detail = mask_url(detail)
    raise StudyError([Problem(path="", message=f"cannot open the storage {mask_url(url)} ({why}){detail}")]) from None


def open_storage(
    url: str,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    stale_trial_callback: "Callable[[optuna.Study, FrozenTrial], None] | None" = None,
) -> "optuna.storages.BaseStorage":
    """Open (creating where needed) the storage a URL names; StudyError when it cannot be opened.

    Heartbeat settings apply to RDB storages only; without them a dead worker's trial stays
    RUNNING forever, so `run` always passes them, with study/ledger.py's requeue as the
    `stale_trial_callback` (Optuna's heartbeat_stale_trial_callback).
    """
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    # Optuna's INFO lines ("Skipping enqueue." from every worker that queues a plan already
    # queued, "A new study created") are noise beside our own console; its warnings still show.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    problem = url_problem(url)
    if problem:
        from grpo_ablate.errors import Problem, StudyError

        raise StudyError([Problem(path="study.storage", message=problem)])
    url = canonical_url(url)
    if is_rdb_url(url):
        kwargs: dict[str, object] = {}
        if heartbeat_interval:
            kwargs["heartbeat_interval"] = heartbeat_interval
            kwargs["grace_period"] = grace_period or 3 * heartbeat_interval
            if stale_trial_callback is not None:
                kwargs["heartbeat_stale_trial_callback"] = stale_trial_callback
        check_foreign_file(url)
        try:
            if (db_file := local_file(url)) is not None:  # SQLite creates the file, not its folder
                db_file.parent.mkdir(parents=True, exist_ok=True)
            return _rdb_with_retry(normalize_url(url), kwargs)
        except Exception as exc:  # connection refused, no such database, bad port, no driver
            _refuse(url, "is the server up and the URL right?", exc)
    path = Path(url.removeprefix("journal:"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_journal(path)
        backend = JournalFileBackend(str(path))
    except OSError as exc:
        _refuse(url, "a journal file needs a writable folder", exc)
    return JournalStorage(backend)


JOURNAL_HEAD = b'{"op_code":'  # how Optuna's JournalStorage writes every log line (compact JSON, op_code first)
SQLITE_HEAD = b"SQLite format 3\x00"


def check_foreign_file(url: str) -> None:
    """Refuse (StudyError, file untouched) an existing file that is not the storage the URL says.

    `--storage notes.txt` must not turn someone's notes into a journal: a non-empty file is used
    as a journal only when its first line is an Optuna journal line, and a `sqlite:///` path
    only when it holds an SQLite database.
    """
    if is_rdb_url(url):
        if not url.lower().startswith("sqlite:///"):
            return
        path, kind, head = Path(url[len("sqlite:///"):].split("?", 1)[0]), "an SQLite database", SQLITE_HEAD
    else:
        path, kind, head = Path(url.removeprefix("journal:")), "an Optuna journal", JOURNAL_HEAD
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        with path.open("rb") as f:
            start = f.read(len(head))
            first = start + f.readline(1_000_000) if head is JOURNAL_HEAD else start
    except OSError:
        return  # opening it says why, in its own words
    if start == head and (head is SQLITE_HEAD or not first.endswith(b"\n") or _journal_entry(first)):
        return
    _refuse(url, f"{path} exists and is not {kind}; it was left untouched. Point --storage (study.storage) at "
                 "a new file or at the study's own storage")


def _journal_entry(line: bytes) -> bool:
    """A complete line Optuna's journal reader accepts: a JSON object with an integer op_code."""
    if not line.endswith(b"\n"):
        return False
    try:
        entry = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(entry, dict) and isinstance(entry.get("op_code"), int)


def _sound(path: Path) -> bool:
    """The whole file at once, in C: every line begins with one entry's head and ends its object.

    The common case (nothing torn) then costs a few byte counts rather than a parse per line.
    """
    data = path.read_bytes()
    lines = data.count(b"\n")
    return (data.endswith(b"}\n") and data.startswith(JOURNAL_HEAD) and b"\x00" not in data
            and data.count(JOURNAL_HEAD) == lines and data.count(b"\n" + JOURNAL_HEAD) == lines - 1
            and data.count(b"}\n") == lines)


def _looks_whole(line: bytes) -> bool:
    """A fast test that passes Optuna's own lines without parsing them (a large journal is opened often).

    Inside a JSON string a quote is escaped, so `{"op_code":` begins an entry and occurs nowhere
    else: a line with it twice is a torn fragment with an entry appended. Anything this does not
    pass is parsed (_journal_entry).
    """
    return (line.startswith(JOURNAL_HEAD) and line.endswith(b"}\n") and line.count(JOURNAL_HEAD) == 1
            and b"\x00" not in line)


def repair_journal(path: Path) -> bool:
    """Make a damaged journal readable again, keeping the original; True when it changed the file.

    Two kinds of damage, both from a crash or a full disk mid-write:
    - a torn last line: Optuna's reader skips it, but the next append lands right after it.
      It is cut off (the original kept as `<journal>.bak-<time>`);
    - a broken line inside the file (a torn line another process appended after): every reader
      stops there. The readable lines are kept, and where a line is a torn fragment with a
      whole entry appended to it, that entry is kept too; the original is kept as
      `<journal>.corrupt-<time>` and stderr names the lines dropped.
    Checked under the journal's own lock, so a write in progress is never mistaken for a torn
    one. When the copy cannot be written the file is left as it is and a StudyError says what
    to do. A file that is not a journal is refused first (check_foreign_file).
    """
    from optuna.storages.journal import JournalFileSymlinkLock

    if not path.exists() or path.stat().st_size == 0:
        return False
    check_foreign_file(str(path))
    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        if _sound(path):
            return False
        scan = _scan_journal(path)
        if not scan.broken and scan.tail == 0:
            return False
        if not scan.broken:
            return _cut_torn_tail(path, scan.size - scan.tail, scan.size)
        return _recover(path, scan)
    finally:
        lock.release()


class _Scan:
    """A journal read line by line: the lines to keep, and what is broken."""

    def __init__(self) -> None:
        self.kept: list[bytes] = []
        self.broken: list[int] = []  # 1-based line numbers that are not journal entries
        self.salvaged: list[int] = []  # of those, lines whose appended whole entry was kept
        self.dropped_bytes = 0
        self.tail = 0  # bytes of a torn last line (no newline)
        self.size = 0


def _scan_journal(path: Path) -> _Scan:
    scan = _Scan()
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            scan.size += len(line)
            if not line.endswith(b"\n"):
                scan.tail = len(line)
                scan.dropped_bytes += len(line)
                break
            if _looks_whole(line) or _journal_entry(line):
                scan.kept.append(line)
                continue
            scan.broken.append(number)
            cut = line.find(JOURNAL_HEAD, 1)
            while cut > 0 and not _journal_entry(line[cut:]):
                cut = line.find(JOURNAL_HEAD, cut + 1)
            if cut > 0:  # the fragment a crashed writer left, then another process's whole entry
                scan.kept.append(line[cut:])
                scan.salvaged.append(number)
                scan.dropped_bytes += cut
            else:
                scan.dropped_bytes += len(line)
    return scan


def _cut_torn_tail(path: Path, good: int, size: int) -> bool:
    backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        shutil.copy2(path, backup)
    except OSError as exc:
        backup.unlink(missing_ok=True)
        _refuse(str(path), (
            f"its last {size - good} byte(s) are a torn line, and no backup could be written to repair it; "
            f"free some space, copy the file somewhere safe, then cut it to its first {good} bytes "
            f"(truncate -s {good} {path})"), exc)
    os.truncate(path, good)
    print(f"grpo-ablate: {path} ended in a torn line ({size - good} byte(s), from a crash or a full disk); "
          f"cut it off, the original is kept as {backup}", file=sys.stderr)
    return True


def _recover(path: Path, scan: _Scan) -> bool:
    """Rewrite the journal with its readable lines (atomically), the original copied aside first."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.corrupt-{stamp}")
    tmp = path.with_name(f".{path.name}.recovered-{os.getpid()}")
    try:
        shutil.copy2(path, backup)
        with tmp.open("wb") as f:
            f.writelines(scan.kept)
            f.flush()
            os.fsync(f.fileno())
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        backup.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
        _refuse(str(path), (
            f"line(s) {_numbers(scan.broken)} are broken (a crash mid-write), and no copy could be written to "
            "recover the rest; free some space next to it and run again"), exc)
    dropped = [n for n in scan.broken if n not in scan.salvaged]
    parts = [f"{len(scan.broken)} broken line(s) ({_numbers(scan.broken)}) from a crash or a full disk mid-write"]
    if scan.salvaged:
        parts.append(f"kept the whole entry appended after the torn fragment on line(s) {_numbers(scan.salvaged)}")
    parts.append(f"dropped {len(dropped)} unreadable line(s)" + (f" ({_numbers(dropped)})" if dropped else "")
                 + (" and a torn last line" if scan.tail else "") + f", {scan.dropped_bytes} byte(s) in all")
    print(f"grpo-ablate: {path} had {'; '.join(parts)}; kept {len(scan.kept)} readable line(s); "
          f"the original is kept as {backup}", file=sys.stderr)
    return True


def _numbers(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:10]))
    return shown + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")


def _rdb_with_retry(url: str, kwargs: dict[str, object]) -> "optuna.storages.RDBStorage":
    """Workers that start together all try to create the tables; the losers retry and find them.

    A server that cannot be reached at all is not retried: that answer will not change.
    """
    import sqlalchemy.exc
    from optuna.storages import RDBStorage

    for attempt in range(6):
        try:
            return RDBStorage(url, **kwargs)  # type: ignore[arg-type]
        except sqlalchemy.exc.DBAPIError as exc:
            if attempt == 5 or "connection" in str(exc).splitlines()[0].lower():
                raise
            time.sleep(0.5 + random.random() * (attempt + 1))
    raise AssertionError("unreachable")


def open_artifact_store(output_dir: Path) -> "optuna.artifacts.FileSystemArtifactStore":
    from optuna.artifacts import FileSystemArtifactStore

    base = Path(output_dir) / "artifacts"
    base.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(base))
