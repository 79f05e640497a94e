"""The results store: SQLAlchemy 2.0 models, Alembic migrations, a batched fenced writer with a
local spool, and a query API returning pandas DataFrames.

Importing :mod:`scalerl.db` is cheap and has no side effects; nothing connects until :func:`open_store`.
The read API (:mod:`scalerl.db.queries`: ``curves``, ``runs``, ...) is imported on first use: it
needs numpy and pandas (the ``analysis`` extra), which writing points (the store, the writer,
:mod:`scalerl.harness.client`) never loads.
"""

from typing import TYPE_CHECKING, Any

from scalerl.db.errors import (
    FencedWriteError,
    SchemaOutOfDateError,
    StoreError,
    StoreIntegrityError,
    StorePermissionError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from scalerl.db.records import ENDED_STATUSES, EVENT_KINDS, RUN_STATUSES, ReplayReport, RunInfo, RunRecord
from scalerl.db.spool import replay
from scalerl.db.store import Store, open_store
from scalerl.db.writer import PointWriter

if TYPE_CHECKING:
    from scalerl.db import queries
    from scalerl.db.queries import curves, events, fits, runs, sweeps, verdicts

# Names of the read API, looked up in scalerl.db.queries on first access.
_QUERIES = frozenset({"curves", "events", "fits", "runs", "sweeps", "verdicts"})

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
    "StorePermissionError",
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


def __getattr__(name: str) -> Any:
    """``scalerl.db.queries`` and its read functions (``scalerl.db.curves``, ...), on first use."""
    if name == "queries" or name in _QUERIES:
        import importlib

        from scalerl.harness.extras import missing_analysis_package, needs_analysis

        try:
            module = importlib.import_module("scalerl.db.queries")
        except ModuleNotFoundError as err:
            package = missing_analysis_package(err)
            if package is None:
                raise
            raise ModuleNotFoundError(needs_analysis(f"scalerl.db.{name}", package), name=err.name) from err
        return module if name == "queries" else getattr(module, name)
    raise AttributeError(f"module 'scalerl.db' has no attribute {name!r}")
