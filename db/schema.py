"""Schema versions: Alembic run programmatically, and the start-up check.

The migration scripts live inside the package (``db/migrations``), so this works from an
installed wheel with no ``alembic.ini``. Policy on open (:func:`check_or_create`):

- an empty database (no tables at all) is upgraded to head automatically (the demo just works),
  but only for a writer (``create=True``); a reader (``create=False``) gets a :class:`StoreError`
  naming the URL and the commands that create stores;
- a database at head opens;
- anything else (older, newer, or tables without Alembic's version table) raises
  :class:`SchemaOutOfDateError` naming the exact command to run, with the password redacted.

The version lives in :data:`VERSION_TABLE`, not Alembic's default ``alembic_version``: an Optuna
``RDBStorage`` at the same URL (``design: optuna`` keeps its study beside our tables) runs its own
Alembic and owns ``alembic_version``. A store made before the move (its revision in
``alembic_version``) is adopted on open: the row moves to our table. Optuna's tables never make a
database look foreign or non-empty to us.

With ``create=False`` the check is a plain read transaction and writes nothing (a legacy
``alembic_version`` row is read where it is, and moved by the next writer), so a read-only
database opens.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from scalerl.db.engine import EngineBundle, is_sqlite_uri, redact, sqlite_file
from scalerl.db.errors import SchemaOutOfDateError, StoreError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "scalerl_version"
LEGACY_VERSION_TABLE = "alembic_version"
# An Optuna RDBStorage's tables (optuna.storages._rdb.models, Optuna 3.x-5.x), plus its Alembic table.
OPTUNA_TABLES = frozenset(
    {"studies", "study_directions", "study_system_attributes", "study_user_attributes",
     "trial_heartbeats", "trial_intermediate_values", "trial_params", "trial_system_attributes",
     "trial_user_attributes", "trial_values", "trials", "version_info", "alembic_version"}
)  # fmt: skip
# Any constant: serialises concurrent first-time creation on one PostgreSQL database.
_PG_SCHEMA_LOCK = 0x5CA1E_0001


@contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Alembic logs its plugin set-up at INFO; keep that out of every ``open_store``."""
    log = logging.getLogger(logger)
    before = log.level
    log.setLevel(max(before, logging.WARNING))
    try:
        yield
    finally:
        log.setLevel(before)


def alembic_config(connection: Connection | None = None) -> Config:
    with _quiet("alembic"):  # importing alembic's autogenerate logs its plugins at INFO
        from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    with _quiet("alembic"):
        from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "db/migrations/versions has no revisions"
    return head


def current_revision(conn: Connection) -> str | None:
    with _quiet("alembic"):
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


@functools.cache
def our_revisions() -> frozenset[str]:
    """Every revision under db/migrations (read once per process)."""
    with _quiet("alembic"):
        from alembic.script import ScriptDirectory

    return frozenset(rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions())


def _legacy_rows(conn: Connection, names: set[str]) -> list[str] | None:
    """Our revision rows still in ``alembic_version`` (a store made before :data:`VERSION_TABLE`),
    else None; an Optuna revision there is Optuna's and stays put."""
    if LEGACY_VERSION_TABLE not in names or VERSION_TABLE in names:
        return None
    rows = [r[0] for r in conn.execute(text(f"SELECT version_num FROM {LEGACY_VERSION_TABLE}"))]
    return rows if rows and set(rows) <= our_revisions() else None


def _adopt_legacy_version(conn: Connection) -> None:
    """Move our revision out of ``alembic_version`` into :data:`VERSION_TABLE`."""
    rows = _legacy_rows(conn, set(inspect(conn).get_table_names()))
    if rows is None:
        return
    conn.execute(text(f"CREATE TABLE {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
    for rev in rows:
        conn.execute(text(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (:v)"), {"v": rev})
    conn.execute(text(f"DROP TABLE {LEGACY_VERSION_TABLE}"))


def upgrade_command(bundle: EngineBundle) -> str:
    """The command that upgrades this store, as a user types it: a read-only open's SQLite URI
    form (``sqlite:///file:...?mode=ro&uri=true``, made by the engine) would open it read-only
    again, so a SQLite file is named by its plain ``sqlite:///PATH`` URL."""
    url = bundle.url
    path = sqlite_file(url)
    if path is not None and is_sqlite_uri(url):
        return f"scalerl db upgrade 'sqlite:///{path}'"
    return f"scalerl db upgrade '{redact(url)}'"


def _lock_schema(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})


def upgrade(bundle: EngineBundle, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade to ``revision``; returns (before, after)."""
    with _quiet("alembic"):  # importing alembic's autogenerate logs its plugins at INFO
        from alembic import command

    engine = bundle.engine.execution_options(scalerl_write=True)
    with _quiet("alembic.runtime.plugins"), engine.begin() as conn:
        _lock_schema(conn)
        _adopt_legacy_version(conn)
        before = current_revision(conn)
        command.upgrade(alembic_config(conn), revision)
        after = current_revision(conn)
    return before, after


def _read_revision(conn: Connection) -> str | None:
    """Our revision without moving anything: ours, else a revision of ours in the legacy table."""
    rows = _legacy_rows(conn, set(inspect(conn).get_table_names()))
    if rows is None:
        return current_revision(conn)
    return rows[0] if len(rows) == 1 else None


def check_or_create(bundle: EngineBundle, *, create: bool = True) -> None:
    """Apply the open policy from the module docstring.

    ``create=True``: one write transaction, serialised (creates an empty database, adopts a legacy
    version row). ``create=False``: one read transaction that writes nothing.
    """
    with _quiet("alembic"):
        from alembic import command

    if create and not bundle.readonly:
        engine = bundle.engine.execution_options(scalerl_write=True)
        with _quiet("alembic"), engine.begin() as conn:
            _lock_schema(conn)
            _adopt_legacy_version(conn)
            tables = set(inspect(conn).get_table_names()) - OPTUNA_TABLES
            if not tables:
                command.upgrade(alembic_config(conn), "head")
                return
            current = current_revision(conn)
    else:
        with _quiet("alembic"), bundle.engine.begin() as conn:
            tables = set(inspect(conn).get_table_names()) - OPTUNA_TABLES
            current = _read_revision(conn) if tables else None
        if not tables:
            raise StoreError(
                f"store {redact(bundle.url)} is empty: there is no scalerl store there, and reading "
                "never creates one (fix: check the URL in --db / $SCALERL_DB_URL; `scalerl sweep` "
                "and `scalerl import` create stores)"
            )
    head = head_revision()
    if current == head:
        return
    where = redact(bundle.url)
    if current is None:
        raise SchemaOutOfDateError(
            f"store {where} has tables ({', '.join(sorted(tables)[:5])}...) but no schema version: "
            "it is not a scalerl store (fix: point SCALERL_DB_URL at an empty or a scalerl database)"
        )
    if current not in our_revisions():
        raise SchemaOutOfDateError(
            f"store {where} is at schema revision {current}, newer than this scalerl-harness "
            f"(head {head}) (fix: upgrade scalerl-harness, e.g. pip install -U scalerl-harness)"
        )
    raise SchemaOutOfDateError(
        f"store {where} is at schema revision {current}, this code needs {head} "
        f"(fix: run `{upgrade_command(bundle)}`)"
    )
