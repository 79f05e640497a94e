"""The results store: SQLAlchemy 2.0 models, Alembic migrations, a batched fenced writer with a
local spool, and a query API returning pandas DataFrames.

Importing :mod:`db` is cheap and has no side effects; nothing connects until :func:`open_store`.
"""

from db import queries
from db.errors import (
    FencedWriteError,
    SchemaOutOfDateError,
    StoreError,
    StoreIntegrityError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from db.queries import curves, events, fits, runs, sweeps, verdicts
from db.records import ENDED_STATUSES, EVENT_KINDS, RUN_STATUSES, ReplayReport, RunInfo, RunRecord
from db.spool import replay
from db.store import Store, open_store
from db.writer import PointWriter

__all__ = [
    "ENDED_STATUSES",
    "EVENT_KINDS",
    "RUN_STATUSES",
    "FencedWriteError",
    "PointWriter",
    "ReplayReport",
    "RunInfo",
    "RunRecord",
    "SchemaOutOfDateError",
    "Store",
    "StoreError",
    "StoreIntegrityError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "curves",
    "events",
    "fits",
    "open_store",
    "queries",
    "replay",
    "runs",
    "sweeps",
    "verdicts",
]
