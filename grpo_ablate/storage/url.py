"""What a storage string is, and how it may be shown: SQLAlchemy's URL parser, one masking function.

    python -c 'import sys; from grpo_ablate.storage.url import mask_url, url_problem as p; u = sys.argv[1]; print(mask_url(u), p(u))' "$URL"

A storage is a database URL (`postgresql://`, `sqlite:///`, ...; schemes compared ignoring case)
or a journal file path. Anything that looks like a URL must parse as one, or it is refused: a
typo must never become a journal FILE whose folder names hold the password. Every place that
prints, logs or stores a storage URL shows `mask_url(url)`. Stdlib at import; SQLAlchemy (which
Optuna installs) only when a string looks like a URL.
"""

from __future__ import annotations

import difflib
import importlib.util
import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = ["mask_url", "url_problem", "is_rdb_url", "canonical_url", "local_file", "normalize_url", "secrets_in",
           "storage_identity", "Location", "locate", "DATABASE_SCHEMES", "JOURNAL_PREFIX"]

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
_SECRET_WORDS = ("pass", "pwd", "pw", "secret", "token", "key", "auth", "cred", "signature", "sig", "session",
                 "cookie", "private")
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
    """A key whose value may be a secret in free text (names that hold no secret are _HARMLESS_KEYS)."""
    flat = re.sub(r"[^a-z]", "", key.lower())
    return key.lower() not in _HARMLESS_KEYS and any(word in flat for word in _SECRET_WORDS)


def _parse(url: str) -> "Any | None":
    """SQLAlchemy's reading of `url` when it is one (`scheme://...`), else None."""
    if "://" not in url:
        return None
    from sqlalchemy.engine import make_url  # lazy: SQLAlchemy only for a URL (module docstring)

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


# Query and DSN keys whose values say how to connect, never who may: shown. Every other value in a
# URL's query is masked, whatever its key is called (passphrase=, pw=, auth=, key=, a driver's own).
_HARMLESS_KEYS = frozenset(
    "sslmode sslcert sslkey sslrootcert sslcrl sslsni passfile connect_timeout application_name "
    "target_session_attrs client_encoding gssencmode keepalives keepalives_idle keepalives_interval "
    "keepalives_count tcp_user_timeout load_balance_hosts channel_binding host hostaddr port dbname user "
    "service replication krbsrvname gsslib ssl_min_protocol_version ssl_max_protocol_version "
    "timeout check_same_thread mode cache uri charset driver isolation_level".split())
_URL = re.compile(r"(?P<scheme>[A-Za-z][\w+.\-]*)://(?P<rest>[^\s'\"<>`]*)")
_QUERY_PAIR = re.compile(r"(?P<key>[^&;=]*)=(?P<val>[^&;]*)")


def _mask_query(query: str) -> str:
    def repl(m: re.Match[str]) -> str:
        key = m["key"].strip().lower()
        return m[0] if key in _HARMLESS_KEYS or not m["val"] else f"{m['key']}=***"

    return _QUERY_PAIR.sub(repl, query)


def _split_url(rest: str) -> tuple[str, str, str, str]:
    """(userinfo or "", authority-and-path, "?" or "", query) of what follows `scheme://`.

    The userinfo runs to the LAST @ before the query: a password with an unencoded `/` or `@` is
    then hidden whole (better too much than a piece of it).
    """
    head, q, query = rest.partition("?")
    if "@" in head:
        userinfo, _, tail = head.rpartition("@")
        return userinfo, tail, q, query
    return "", head, q, query


def _port_place(authority: str) -> str | None:
    """What follows the host's first colon when it is not a port number (a password, when the
    user wrote `user:SECRET` with no `@host`); None when the authority has a number or nothing there."""
    host_end = authority.find("]") + 1 if authority.startswith("[") else 0
    _, colon, port = authority[host_end:].partition(":")
    return port if colon and port and not port.isdigit() else None


def _mask_one_url(m: re.Match[str]) -> str:
    userinfo, tail, q, query = _split_url(m["rest"])
    shown = f"{m['scheme']}://"
    if userinfo:
        user, colon, _ = userinfo.partition(":")
        shown += f"{user}:***@" if colon else f"{userinfo}@"
    authority, slash, path = tail.partition("/")
    if not userinfo and (port := _port_place(authority)) is not None:
        # `postgresql://bob:SECRET` (no host): what stands where a port goes may be a password
        authority = authority[: len(authority) - len(port)] + "***"
    shown += authority + slash + (_mask_text(path) if "@" in path or "=" in path else path)
    return shown + q + _mask_query(query)


def mask_url(url: str) -> str:
    """The URL (or any text quoting one) as it may be shown or stored: every credential as ***.

    Every place that prints, logs or stores a storage URL goes through this (stdout, validate's
    messages, the study's `config` attribute the dashboard shows, the report). It masks by
    structure, not by a list of names: in every `scheme://` URL in the text, the password of its
    userinfo, what stands in a host-less URL's port place, and every query value whose key is
    not known to be harmless (_HARMLESS_KEYS); in text that is not a URL, a `user:secret@` and
    secret-named `key=value` pairs (a libpq DSN: every value not known to be harmless). Then
    every secret the text holds is scrubbed wherever else it appears, in any encoding.
    """
    text = url
    if _URL.search(text) is None and _is_dsn(text):
        shown = _mask_query(re.sub(r"\s*=\s*", "=", text).replace(" ", "&")).replace("&", " ")
        shown = _mask_pairs(_mask_text(shown))
    else:
        shown = _URL.sub(_mask_one_url, _mask_text_outside_urls(text))
    return _scrub(shown, url)


def _is_dsn(text: str) -> bool:
    words = _PAIR.findall(text)
    return bool(words) and bool({k.lower() for k, _, _ in words} & _LIBPQ_KEYS) and re.match(r"\s*[A-Za-z_]\w*\s*=", text) is not None


def _mask_text_outside_urls(text: str) -> str:
    """_mask_text on the parts of `text` that are not `scheme://` URLs (those are masked by structure)."""
    out, last = [], 0
    for m in _URL.finditer(text):
        out.append(_mask_text(text[last:m.start()]))
        out.append(m[0])
        last = m.end()
    out.append(_mask_text(text[last:]))
    return "".join(out)


def _scrub(shown: str, url: str) -> str:
    """Every secret the raw text holds, removed from `shown` in any spelling the rendering uses."""
    for secret in secrets_in(url):
        if len(secret) >= _MIN_SCRUBBED:
            for form in {secret, quote(secret, safe=""), quote(secret, safe="/"), quote_plus(secret)}:
                shown = shown.replace(form, "***")
    return shown


def secrets_in(url: str) -> list[str]:
    """The secret values in `url`, to scrub from a driver's error text that may quote them: what
    mask_url hides, as written and as decoded."""
    found: list[str] = []
    for m in _URL.finditer(url):
        userinfo, tail, _, query = _split_url(m["rest"])
        if ":" in userinfo:
            found.append(userinfo.partition(":")[2])
        port = _port_place(tail.partition("/")[0])
        if not userinfo and port is not None:
            found.append(port)
        found += [p["val"] for p in _QUERY_PAIR.finditer(query) if p["key"].strip().lower() not in _HARMLESS_KEYS]
    parsed = _parse(url.strip())
    if parsed is not None and parsed.password:
        found.append(parsed.password)
    found += [m["pw"] for m in _USERINFO_LOOSE.finditer(url)]
    found += [m["val"].strip("'\"") for m in _PAIR.finditer(url)
              if _is_secret_key(m["key"]) or (_is_dsn(url) and m["key"].lower() not in _HARMLESS_KEYS)]
    found += [unquote(x) for x in found] + [unquote_plus(x) for x in found]
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
        close = difflib.get_close_matches(dialect[:80], _SUGGESTED_SCHEMES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (f"unknown storage scheme {dialect[:80]!r} in {_cut(shown)!r}{hint}; use postgresql://user@host/db, "
                f"sqlite:///FILE, or a journal file path ({JOURNAL_PREFIX}NAME for a file name with a colon)")
    if not url[len(_SCHEME.match(url)[0]):].startswith("//"):  # type: ignore[index]
        return f"{shown} is not a database URL: write {dialect}://..."
    from sqlalchemy.engine import make_url  # lazy: SQLAlchemy only for a URL (module docstring)

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


# the port a server listens on when a URL names none (each dialect's documented default)
@dataclass(frozen=True)
class Location:
    """A storage URL read once (locate): what storage.py decides by, so it parses nothing itself.

    `file` is the local file the URL names (the journal, an SQLite database), None for a server
    or an in-memory SQLite. How it may be shown (masked, scrub) is worked out only when a message
    needs it."""

    url: str  # canonical_url: the scheme lower-cased, a path unchanged
    database: bool  # an SQLAlchemy URL; otherwise a journal path
    file: Path | None
    sqlite: bool

    @property
    def masked(self) -> str:
        return mask_url(self.url)

    def scrub(self, text: str) -> str:
        """`text` (an exception's message, which may quote the URL) with this URL's secrets and every credential masked."""
        for secret in secrets_in(self.url):
            text = text.replace(secret, "***")
        return mask_url(text)


def locate(url: str) -> Location:
    """The Location a storage string names; call url_problem first (a malformed URL is a path here)."""
    url = canonical_url(url)
    database = is_rdb_url(url)
    return Location(url, database, local_file(url), database and url.startswith("sqlite:"))


_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433, "oracle": 1521}
_LOCAL = "localhost"


def _host_identity(host: str | None, dialect: str) -> str:
    """One spelling per machine: loopback names and addresses are `localhost`; a name is resolved
    to its addresses where this machine can resolve it, else kept, lower-cased."""
    if not host and dialect == "postgresql":
        host = os.environ.get("PGHOST")  # libpq's default, where a URL without a host connects
    if not host or host.startswith("/"):  # no host, or a Unix socket folder: this machine
        return _LOCAL
    name = host.strip("[]").lower()
    try:
        addresses = {ipaddress.ip_address(name)}
    except ValueError:
        try:
            addresses = {ipaddress.ip_address(str(a[4][0]).split("%")[0]) for a in socket.getaddrinfo(name, None)}
        except (OSError, UnicodeError, ValueError):
            return name
    if all(a.is_loopback for a in addresses):
        return _LOCAL
    return ",".join(sorted(map(str, addresses)))


def storage_identity(url: str) -> str:
    """Which storage a URL names, without what only says how to log in: the dialect (no driver),
    the host (resolved: `localhost` is `127.0.0.1`), the port (the default written out) and the
    database; never the user, password or query (a password moves to PGPASSWORD or ~/.pgpass
    and it is the same database). A journal or SQLite file by its absolute path. Also reads a
    URL masked by mask_url, as the owner file of an output folder stores it.
    """
    url = canonical_url(url.strip())
    if not is_rdb_url(url):
        return str(Path(url.removeprefix(JOURNAL_PREFIX)).absolute())
    parsed = _parse(url)
    if parsed is None:
        return mask_url(url)
    dialect = parsed.get_backend_name()
    dialect = "postgresql" if dialect == "postgres" else dialect
    if dialect == "sqlite":
        db = parsed.database or ":memory:"
        return f"sqlite:///{db if db == ':memory:' else Path(db).absolute()}"
    try:
        port = parsed.port or _DEFAULT_PORTS.get(dialect)
    except ValueError:
        port = None
    host = parsed.host.rpartition("@")[2] if parsed.host else parsed.host
    return f"{dialect}://{_host_identity(host, dialect)}:{port or ''}/{parsed.database or ''}"
