"""Opening a run store's database: a URL to a SQLAlchemy engine, with every problem a :class:`StoreError`.

SQLite gets WAL, a busy timeout and its folder; a file that cannot be written opens read-only. A URL that
is not a database, a dialect without its driver, a folder, a file that is not SQLite, a damaged file:
:class:`StoreError` naming the URL and the problem, never a driver's traceback. PostgreSQL URLs get the
first installed driver of :data:`PG_DRIVERS`. A URL's password never appears in a message
(:func:`shown_url`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from ..protocol.wire import json_safe

BUSY_ENV = "TORCH_STUDIO_DB_BUSY_MS"
# PostgreSQL drivers SQLAlchemy knows, in the order a bare postgresql:// URL tries them (module, dialect).
PG_DRIVERS = (("psycopg", "psycopg"), ("psycopg2", "psycopg2"), ("pg8000", "pg8000"))
PG_INSTALL = "pip install 'psycopg[binary]'"


class StoreError(RuntimeError):
    """The run store cannot be opened, read or written; the message names the URL and the problem."""


class StoreReadOnly(StoreError):
    """The store can be read, not written (read-only media, no permission)."""


class StoreMissing(StoreError):
    """A reader (``create`` False) found no store file: nothing was ever written there (a new user)."""


def sqlite_url_for(value: str) -> str:
    """The SQLite URL a user meant by ``value`` when it reads as a file's path (``/data/runs.sqlite``,
    ``runs.db``, ``~/x.sqlite``): ``sqlite:///`` and its absolute path; else the URL's form."""
    path = Path(value).expanduser()
    if value and "://" not in value and (os.sep in value or "/" in value or path.suffix in (".sqlite", ".sqlite3", ".db")):
        return f"sqlite:///{path.absolute()}"
    return "sqlite:///PATH"


def make_engine(url: str, *, create: bool = True) -> tuple[Engine, bool]:
    """An engine for ``url`` and whether it is read-only. SQLite gets WAL, a busy timeout and (when
    ``create``) its folder created; a file that cannot be written opens read-only. Raises StoreError."""
    shown = shown_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(f"{shown!r} is not a database URL: for a SQLite file use {sqlite_url_for(url)}") from None
    readonly, options = False, {}
    if parsed.get_backend_name() in ("postgresql", "postgres"):
        parsed = _postgres_url(parsed, shown)
        # pre_ping: a long-open studio's idle connection that the server has dropped is replaced, not an error
        options = {"pool_pre_ping": True, "json_serializer": _json_finite}
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:" \
            and not parsed.query.get("uri"):
        path = Path(parsed.database).expanduser()
        readonly = _check_sqlite_file(url, path, create)
        if readonly:   # no -shm file and no way to make one (read-only media): nothing can change the file
            how = "mode=ro" if Path(f"{path}-shm").exists() or os.access(path.parent, os.W_OK) else "immutable=1"
            parsed = parsed.set(database=f"file:{path}?{how}", query={"uri": "true"})
    try:
        engine = create_engine(parsed, **options)
    except NoSuchModuleError:
        raise StoreError(f"{shown}: unknown database kind {parsed.drivername!r}") from None
    except ImportError as exc:
        raise StoreError(f"{shown}: the database driver is not installed ({exc})") from None
    except (ArgumentError, SQLAlchemyError) as exc:
        raise StoreError(f"{shown}: {reason(exc)}") from None
    if engine.dialect.name == "sqlite" and not readonly:
        busy_ms = int(os.environ.get(BUSY_ENV) or 10000)

        @event.listens_for(engine, "connect")
        def _pragmas(conn: Any, _record: Any) -> None:
            cur = conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={busy_ms}")   # first: setting WAL may itself wait for a lock
            if create:      # WAL is the file's own lasting mode: set by whoever makes the store, not by a reader
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()
    return engine, readonly


def shown_url(url: str) -> str:
    """The URL as messages show it: its password, if any, as ***."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    return url if parsed.password is None else parsed.render_as_string(hide_password=True)


def _postgres_url(parsed: URL, shown: str) -> URL:
    """A PostgreSQL URL with an installed driver: a bare ``postgresql://`` (or ``postgres://``) gets
    the first of :data:`PG_DRIVERS` that is installed; none installed, or the named one missing, is
    a StoreError that says what to install."""
    _, _, driver = parsed.drivername.partition("+")
    if driver:
        module = next((m for m, d in PG_DRIVERS if d == driver), driver)
        if importlib.util.find_spec(module) is None:
            raise StoreError(f"{shown}: the PostgreSQL driver {driver} is not installed (pip install {module}, "
                             f"or use postgresql:// with {PG_INSTALL})")
        return parsed.set(drivername=f"postgresql+{driver}")
    for module, dialect in PG_DRIVERS:
        if importlib.util.find_spec(module) is not None:
            return parsed.set(drivername=f"postgresql+{dialect}")
    raise StoreError(f"{shown}: a PostgreSQL run store needs a database driver, and none is installed: {PG_INSTALL}")


def _json_finite(value: Any) -> str:
    """JSON for PostgreSQL, which refuses NaN and Infinity: those become null."""
    return json.dumps(json_safe(value), allow_nan=False, default=str)


def _check_sqlite_file(url: str, path: Path, create: bool) -> bool:
    """Refuse what cannot be a SQLite store; True when the file exists but cannot be written."""
    if path.is_dir():
        raise StoreError(f"{url}: {path} is a folder, not a run store file")
    if not path.exists():
        if not create:
            raise StoreMissing(f"{url}: no run store at {path} (check the path; nothing was created)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{url}: cannot create the folder {path.parent} ({exc.strerror or exc})") from None
        return False
    try:
        empty = path.stat().st_size == 0
    except OSError as exc:
        raise StoreError(f"{url}: cannot read {path} ({exc.strerror or exc})") from None
    if empty and not create:
        raise StoreError(f"{url}: {path} is empty, not a run store")
    if not empty and _not_a_database(path):
        raise StoreError(f"{url}: {path} is not a SQLite database")
    return not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _not_a_database(path: Path) -> bool:
    """Whether SQLite refuses ``path`` as a database, asked through SQLite itself.

    Never by reading the file with ``open()``: closing any descriptor of a file drops every POSIX lock
    this process holds on it, those of its open SQLite connections included. A sweep (a run store and
    Optuna's storage open, then another store opened) lost its locks that way; a reader closing its last
    connection then took the WAL for unused and removed it: runs lost ("no run 1"), "disk I/O error
    (SQLITE_IOERR_SHORT_READ)", tables missing. SQLite itself defers such closes while a lock is held."""
    try:
        con = sqlite3.connect(path)
    except sqlite3.Error:
        return False        # the store's own opening says what is wrong
    try:
        con.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        return getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" or "not a database" in str(exc)
    finally:
        con.close()
    return False


def reason(exc: BaseException) -> str:
    """The first line of a database error, for a message."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    code = getattr(orig, "sqlite_errorname", None)    # SQLite's extended code says which I/O failed
    return f"{first}, {code}" if code and code not in ("SQLITE_ERROR", "SQLITE_BUSY") else first


UNREACHABLE = ("connection refused", "could not connect", "server closed the connection", "terminating connection",
               "connection is closed", "the database system is shutting down", "the database system is starting up",
               "the database system is in recovery mode", "no connection to the server", "consuming input failed",
               "connection timed out", "connection reset", "connection to server at")


def is_unreachable(exc: DBAPIError) -> bool:
    """The database server went away or is not back yet (stopped, restarting, the network dropped):
    SQLAlchemy's own disconnect verdict (it then drops the pooled connections), or the server's words."""
    if getattr(exc, "connection_invalidated", False):
        return True
    text = str(exc.orig).lower()
    return any(s in text for s in UNREACHABLE)


def is_locked(exc: DBAPIError) -> bool:
    """Another connection holds the lock (SQLite's "database is locked" or "busy")."""
    text = str(exc.orig).lower()
    return "locked" in text or "busy" in text
