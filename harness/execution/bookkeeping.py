"""Batched store bookkeeping for submission: one transaction per step, not one per run.

A 1,000-variant sweep would otherwise cost ~3,000 write transactions (register, mark submitted,
log the submission), each a commit (and an fsync on SQLite). These helpers do each step in one
transaction through the store's public ``Store.transaction`` scope and its models, with the same
row values ``register_run`` / ``set_status`` / ``log_event`` write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from harness.execution.executors.base import JobHandle


def register_runs(store: Any, records: Sequence[Any]) -> int:
    """Insert the ``db.RunRecord`` s not stored yet (status ``pending``); returns how many.

    Delegates to ``Store.register_runs`` (one transaction), which also records each run's
    membership of its sweep: a run already stored by another sweep joins this one too.
    """
    n: int = store.register_runs(records)
    return n


def mark_submitted(store: Any, run_ids: Sequence[str]) -> None:
    """Set the runs' status to ``submitted`` (before their jobs can start)."""
    from sqlalchemy import Connection, update

    from db.models import Run

    def tx(conn: Connection) -> None:
        for i in range(0, len(run_ids), 500):
            conn.execute(update(Run).where(Run.run_id.in_(run_ids[i : i + 500])).values(status="submitted"))

    if run_ids:
        store.transaction(tx, doing=f"marking {len(run_ids)} runs submitted")


def log_submissions(store: Any, sweep: str, handles: Sequence[JobHandle]) -> None:
    """One ``submitted`` event per handle, carrying where its job is."""
    from sqlalchemy import Connection, insert

    from db.models import Event

    now = datetime.now(UTC)
    rows = [
        {"time": now, "kind": "submitted", "run_id": h.run_id, "sweep": sweep, "detail": h.as_event()}
        for h in handles
    ]

    def tx(conn: Connection) -> None:
        conn.execute(insert(Event), rows)

    if rows:
        store.transaction(tx, doing=f"logging {len(rows)} submissions")
