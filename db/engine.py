"""Database URLs and engines: SQLite by default (WAL, busy timeout), PostgreSQL via psycopg 3.

The URL comes from the argument, else ``$SCALERL_DB_URL``, else ``sqlite:///./scalerl.db``.
``postgresql://`` / ``postgres://`` / ``postgresql+psycopg2://`` are rewritten to
``postgresql+psycopg://`` (the driver we ship). Every URL that reaches text goes through
:func:`redact`, which hides every form of secret (:mod:`scalerl.db.redaction`).

SQLite transactions: the driver is put in autocommit mode and SQLAlchemy's ``begin`` emits the
``BEGIN`` itself, ``BEGIN IMMEDIATE`` for write transactions (execution option
``scalerl_write=True``). Taking the write lock up front means a writer waits in the busy handler
instead of failing half-way with "database is locked" when it upgrades a read lock.

Read-only engines (``make_engine(url, readonly=True)``) write nothing, not even on connect: a
SQLite file is opened through a ``file:...?mode=ro`` URI with ``query_only`` on and no journal
pragma (so a read-only file or folder can be read), PostgreSQL sessions start with
``default_transaction_read_only``. A writable SQLite engine switches the file to WAL only when it
is not in WAL already and only with ``create=True``, which alone makes the file's folder.
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from scalerl.db.errors import StoreError, scrub
from scalerl.db.redaction import redact_url, secret_in
from scalerl.harness.errors import ConfigError

DEFAULT_URL = "sqlite:///./scalerl.db"
ENV_URL = "SCALERL_DB_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_PG_ALIASES = {"postgres", "postgresql", "postgresql+psycopg2", "postgresql+pg8000"}


def redact(url: URL | str) -> str:
    """The URL as text with every secret (user-part password, ``?password=``, ``?sslpassword=``,
    tokens, a password inside ``options``...) replaced by ``***``: see :mod:`scalerl.db.redaction`."""
    return redact_url(url)


def resolve_url(url: str | URL | None = None) -> URL:
    """Argument, else ``$SCALERL_DB_URL``, else the default SQLite file; normalises the driver."""
    raw: str | URL = url if url is not None else os.environ.get(ENV_URL) or DEFAULT_URL
    if not isinstance(raw, str | URL):  # the Python API: db=5 is an error, not an AttributeError
        raise StoreError(
            f"database URL must be a string, not {type(raw).__name__} {raw!r} "
            f"(fix: pass e.g. {DEFAULT_URL} or postgresql+psycopg://user@host:5432/db)"
        )
    if isinstance(raw, str) and raw.strip() and "://" not in raw and ":" not in raw.split("/", 1)[0]:
        # A path (`--db runs/scalerl.db`), as MLflow's and Optuna's users pass one: that SQLite file.
        raw = "sqlite:///" + str(Path(raw).expanduser().resolve())
    try:
        parsed = make_url(raw) if isinstance(raw, str) else raw
    except (ArgumentError, ValueError) as err:  # ValueError: a non-numeric port
        raise StoreError(
            f"database URL {redact(str(raw))!r} is not a valid URL: {scrub(str(err))} "
            f"(fix: use e.g. {DEFAULT_URL} or postgresql+psycopg://user:pass@host:5432/db, "
            f"as an argument or in ${ENV_URL})"
        ) from None
    if parsed.drivername in _PG_ALIASES:
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(
            f"database URL {redact(parsed)}: backend {parsed.get_backend_name()!r} is not supported "
            "(fix: use sqlite:///PATH or postgresql+psycopg://...)"
        )
    if parsed.get_backend_name() == "sqlite" and parsed.drivername != "sqlite":
        parsed = parsed.set(drivername="sqlite")
    return parsed


def is_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def refuse_memory(url: str | URL | None, doing: str) -> None:
    """Raise StoreError when ``url`` (resolved as :func:`resolve_url` does) is an in-memory SQLite
    store: a command line's process ends with the command, and its store with it, so whatever it
    writes there (an import, a sweep, fits) vanishes while the command reports success, and what it
    reads there is always empty. Malformed URLs pass: opening the store reports them."""
    try:
        resolved = resolve_url(url)
    except StoreError:
        return
    memory = is_memory(resolved) or (
        is_sqlite_uri(resolved)
        and (resolved.query.get("mode") == "memory" or str(resolved.database) in ("file:", "file::memory:"))
    )
    if memory:
        raise StoreError(
            f"store {redact(resolved)} is in memory: it ends with this process, so {doing} would "
            f"report success into a store that vanishes (fix: name a file, e.g. --db "
            f"{DEFAULT_URL}, or a PostgreSQL URL)"
        )


def is_sqlite_uri(url: URL) -> bool:
    """A ``sqlite:///file:PATH?mode=ro&uri=true`` URL (SQLite's own URI filename syntax)."""
    return str(url.query.get("uri", "")).lower() in ("true", "1") and str(url.database).startswith("file:")


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL names (URI filenames understood); None for PostgreSQL and memory."""
    if url.get_backend_name() != "sqlite" or is_memory(url):
        return None
    database = str(url.database)
    if is_sqlite_uri(url):
        path = urllib.parse.unquote(urllib.parse.urlsplit(database).path)
        return (
            None if path in ("", ":memory:") or url.query.get("mode") == "memory" else Path(path).expanduser()
        )
    return Path(database).expanduser()


def is_readonly_url(url: URL) -> bool:
    """The URL itself asks for read-only access (``?mode=ro`` on a SQLite URI filename)."""
    return is_sqlite_uri(url) and url.query.get("mode") == "ro"


@dataclass(frozen=True)
class EngineBundle:
    """An engine plus what the store needs to know about it.

    ``tx_lock`` is set for in-memory SQLite, where every thread shares one connection
    (StaticPool): transactions from different threads must not interleave on it.
    """

    engine: Engine
    url: URL
    dialect: str
    tx_lock: threading.RLock | None
    readonly: bool = False


def make_engine(url: URL, *, create: bool = True, readonly: bool = False) -> EngineBundle:
    """Create the engine for a resolved URL (see module docstring for the SQLite setup).

    ``create``: a SQLite file's folder is made if missing (SQLite then makes the file on first
    connect); ``readonly``: the engine writes nothing (implies no folder is made).
    """
    readonly = readonly or is_readonly_url(url)
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, create=create and not readonly, readonly=readonly)
    connect_args: dict[str, Any] = {"connect_timeout": 5, "application_name": "scalerl"}
    if readonly:
        connect_args["options"] = "-c default_transaction_read_only=on"
    engine = create_engine(
        url,
        pool_pre_ping=True,  # a server restart leaves dead pooled connections behind
        pool_size=4,
        max_overflow=4,
        connect_args=connect_args,
    )
    return EngineBundle(engine, url, "postgresql", None, readonly)


def _sqlite_engine(url: URL, *, create: bool, readonly: bool) -> EngineBundle:
    memory = is_memory(url)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    path = sqlite_file(url)
    if memory:
        kwargs["poolclass"] = StaticPool
        url = url.set(database=":memory:")
    elif readonly and path is not None and not is_readonly_url(url):
        # SQLite's URI filename: mode=ro opens without a write lock or a journal, so a read-only
        # file (or a file in a read-only folder) reads fine, and nothing can create it.
        query = {k: v for k, v in url.query.items() if k not in ("mode", "uri")} | {
            "mode": "ro",
            "uri": "true",
        }
        shm = path.with_name(path.name + "-shm")
        if not os.access(path.parent, os.W_OK) and not shm.exists():
            # A WAL file in a folder we cannot write, with no shared-memory file beside it:
            # mode=ro alone fails ("attempt to write a readonly database"), because SQLite would
            # create the -shm. Nobody can be writing it then (a writer leaves the -shm), so it
            # is read as immutable.
            query["immutable"] = "1"
        url = url.set(database="file:" + urllib.parse.quote(str(path)), query=query)
    elif create and path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see "begin" below)
        cur = dbapi_conn.cursor()
        if readonly:
            cur.execute("PRAGMA query_only=ON")
        elif not memory:
            # Switching to WAL writes the file header: only for a creating engine, and only when
            # the file is not WAL already (every store this code made is).
            if create and str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk when it returns, so "flushed" really means durable.
            cur.execute("PRAGMA synchronous=FULL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("scalerl_write", False) and not readonly
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return EngineBundle(engine, url, "sqlite", threading.RLock() if memory else None, readonly)


def refuse_secret(url: str | URL | None, *, where: str) -> None:
    """Raise a ConfigError when ``url`` carries a secret and is about to be written to ``where``
    (a job spec file, a worker's JSON, a pickle): a last guard behind the ``--db`` refusal."""
    found = None if url is None else secret_in(url)
    if url is not None and found is not None:
        raise ConfigError(
            f"this store URL carries a secret ({found}) and would be written to {where}",
            field="db_url",
            value=redact_url(url),
            fix="export SCALERL_DB_URL='<the URL>' and leave db_url unset (jobs inherit it), or keep "
            "the password in ~/.pgpass (PGPASSFILE)",
        )
