"""Store-specific errors and the one place driver errors are translated.

Every SQLAlchemy / DBAPI error that leaves :mod:`scalerl.db` has been turned into a
:class:`scalerl.harness.errors.StoreError` subclass by :func:`translate`. Messages name the store by its
redacted URL (never the password), what was being done, and what to do about it.
"""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

from scalerl.db.redaction import scrub as _scrub
from scalerl.harness.errors import FencedWriteError, SchemaOutOfDateError, StoreError

__all__ = [
    "FencedWriteError",
    "SchemaOutOfDateError",
    "StoreError",
    "StoreIntegrityError",
    "StorePermissionError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "scrub",
    "translate",
]


class StoreUnavailableError(StoreError):
    """The database could not be reached (or stayed locked past every retry)."""


class StoreIntegrityError(StoreError):
    """A write broke a constraint (unknown run, duplicate key where none is allowed...)."""


class StoreReadOnlyError(StoreError):
    """A write to a store opened read-only, or one the database refused as read-only (a SQLite
    file or folder without write permission, a read-only PostgreSQL role or replica)."""


class StorePermissionError(StoreReadOnlyError):
    """The database refused this role a write: PostgreSQL's privileges or row-level security
    (a sweep another role owns and did not grant; README, "Sharing a store")."""


def is_denied(err: BaseException) -> bool:
    """True for PostgreSQL's "insufficient privilege" (SQLSTATE 42501): a missing GRANT, or a row
    that a row-level security policy refuses."""
    orig = getattr(err, "orig", err)
    return getattr(orig, "sqlstate", None) == "42501" or getattr(orig, "pgcode", None) == "42501"


def is_readonly(err: BaseException) -> bool:
    """True for the drivers' "this database / transaction is read-only" errors."""
    text = str(getattr(err, "orig", err)).lower()
    return "readonly database" in text or "read-only transaction" in text


def scrub(text: str) -> str:
    """Remove every secret from free text (driver messages sometimes echo the DSN); the rules
    live in :mod:`scalerl.db.redaction`, shared with URL rendering and refusal."""
    return _scrub(text)


def is_locked(err: BaseException) -> bool:
    """True for SQLite's transient lock errors, which are worth retrying with backoff."""
    text = str(getattr(err, "orig", err)).lower()
    return "database is locked" in text or "database table is locked" in text or "busy" in text


def translate(err: BaseException, *, url: str, doing: str) -> StoreError:
    """Turn a driver error into a StoreError subclass whose message stands on its own.

    ``url`` must already be redacted; the driver's own text is scrubbed as well.
    """
    if isinstance(err, StoreError):
        return err
    orig = getattr(err, "orig", None) or err
    detail = scrub(" ".join(str(orig).split()))[:500]
    if is_denied(err):
        return StorePermissionError(
            f"store {url}: {doing} was refused to this role: {detail} (fix: every role may read; to "
            "change a sweep, ask its owner for `scalerl db grant ROLE --sweep SWEEP`; for write "
            "access to the store, its administrator for `scalerl db grant ROLE --write`)"
        )
    if is_readonly(err):
        return StoreReadOnlyError(
            f"store {url}: {doing} needs write access, but the database is read-only: {detail} "
            "(fix: open a writable copy, or ask for write permission on the file and its folder)"
        )
    if isinstance(err, sa_exc.IntegrityError):
        return StoreIntegrityError(
            f"store {url}: {doing} broke a constraint: {detail} "
            "(fix: register the sweep/run first, or check for a duplicate key)"
        )
    if isinstance(err, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.DisconnectionError):
        if is_locked(err):
            return StoreUnavailableError(
                f"store {url}: {doing}: the SQLite database stayed locked past every retry: {detail} "
                "(fix: fewer concurrent writers on one SQLite file, or use PostgreSQL via SCALERL_DB_URL)"
            )
        return StoreUnavailableError(
            f"store {url}: {doing}: the database is unreachable: {detail} "
            "(fix: check that the server is up and the URL in SCALERL_DB_URL is right)"
        )
    if isinstance(err, sa_exc.SQLAlchemyError):
        return StoreError(f"store {url}: {doing} failed: {detail}")
    return StoreError(f"store {url}: {doing} failed: {type(err).__name__}: {detail}")
