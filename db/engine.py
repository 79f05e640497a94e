"""Database URLs and engines: SQLite by default (WAL, busy timeout), PostgreSQL via psycopg 3.

The URL comes from the argument, else ``$SCALERL_DB_URL``, else ``sqlite:///./scalerl.db``.
``postgresql://`` / ``postgres://`` / ``postgresql+psycopg2://`` are rewritten to
``postgresql+psycopg://`` (the driver we ship). Every URL that reaches text goes through
:func:`redact` (``URL.render_as_string(hide_password=True)``).

SQLite transactions: the driver is put in autocommit mode and SQLAlchemy's ``begin`` emits the
``BEGIN`` itself, ``BEGIN IMMEDIATE`` for write transactions (execution option
``scalerl_write=True``). Taking the write lock up front means a writer waits in the busy handler
instead of failing half-way with "database is locked" when it upgrades a read lock.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from db.errors import StoreError, scrub

DEFAULT_URL = "sqlite:///./scalerl.db"
ENV_URL = "SCALERL_DB_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_PG_ALIASES = {"postgres", "postgresql", "postgresql+psycopg2", "postgresql+pg8000"}


def redact(url: URL | str) -> str:
    """The URL as text with its password replaced by ``***``."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    return scrub(url)


def resolve_url(url: str | URL | None = None) -> URL:
    """Argument, else ``$SCALERL_DB_URL``, else the default SQLite file; normalises the driver."""
    raw: str | URL = url if url is not None else os.environ.get(ENV_URL) or DEFAULT_URL
    try:
        parsed = make_url(raw) if isinstance(raw, str) else raw
    except ArgumentError as err:
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


def make_engine(url: URL) -> EngineBundle:
    """Create the engine for a resolved URL (see module docstring for the SQLite setup)."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    engine = create_engine(
        url,
        pool_pre_ping=True,  # a server restart leaves dead pooled connections behind
        pool_size=4,
        max_overflow=4,
        connect_args={"connect_timeout": 5, "application_name": "scalerl"},
    )
    return EngineBundle(engine, url, "postgresql", None)


def _sqlite_engine(url: URL) -> EngineBundle:
    memory = is_memory(url)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    if memory:
        kwargs["poolclass"] = StaticPool
        url = url.set(database=":memory:")
    else:
        assert url.database is not None
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see "begin" below)
        cur = dbapi_conn.cursor()
        if not memory:
            cur.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk when it returns, so "flushed" really means durable.
            cur.execute("PRAGMA synchronous=FULL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("scalerl_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return EngineBundle(engine, url, "sqlite", threading.RLock() if memory else None)
