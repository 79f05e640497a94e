"""Alembic environment for the results store.

Run programmatically by :mod:`scalerl.db.schema` (never through an ``alembic.ini``): the caller passes an
open connection in ``config.attributes["connection"]``, so the URL (and its password) never goes
through Alembic's config parser or its logging.
"""

from __future__ import annotations

from alembic import context

from scalerl.db.models import Base
from scalerl.db.schema import VERSION_TABLE

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable through a hand-written alembic.ini
    raise RuntimeError("db/migrations is run through scalerl.db.schema.upgrade(), which passes a connection")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite needs batch mode to ALTER
    compare_type=True,
    version_table=VERSION_TABLE,  # not alembic_version: an Optuna study at the same URL owns that
)
with context.begin_transaction():
    context.run_migrations()
