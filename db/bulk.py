"""Bulk point upserts, one strategy per dialect (a name registry, no dialect if/else elsewhere).

Both run inside the caller's transaction (after its fencing check) and are idempotent on
(run_id, metric, step) with "last write wins" (``ON CONFLICT ... DO UPDATE``). Rows are
de-duplicated on their key first (last one kept), which PostgreSQL requires of one statement.

- ``sqlite``: the Core upsert, compiled once, then the driver's ``executemany`` with tuples
  (SQLAlchemy's per-row parameter processing costs ~3x SQLite's own work at this volume).
- ``postgresql``: ``COPY`` into a per-connection temp table (``ON COMMIT DELETE ROWS``), then one
  ``INSERT ... SELECT`` in a savepoint, falling back to ``... ON CONFLICT DO UPDATE`` when a key
  already exists: one round trip per batch instead of one per 1,000 rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

from scalerl.db.models import Point

if TYPE_CHECKING:
    from scalerl.db.store import PointRow

# Column order of a point as the writer carries it, then run_id and attempt appended.
VALUE_COLUMNS = (
    "step", "metric", "value", "nonfinite", "gpu_hours", "flops", "tokens", "samples", "wall_s", "n",
)  # fmt: skip
ALL_COLUMNS = (*VALUE_COLUMNS, "run_id", "attempt")


class BulkUpsert(Protocol):
    def write(self, conn: Connection, run_id: str, attempt: int, rows: Sequence[PointRow]) -> None:
        """Upsert ``rows`` of one run, written by ``attempt``, inside ``conn``'s transaction."""


def dedupe(rows: Sequence[PointRow]) -> list[PointRow]:
    """Keep the last row per (step, metric), in first-seen order."""
    last: dict[tuple[int, str], PointRow] = {}
    for row in rows:
        last[(row[0], row[1])] = row
    return list(last.values()) if len(last) != len(rows) else list(rows)


def _table() -> Table:
    table = Point.__table__
    assert isinstance(table, Table)
    return table


class SqliteUpsert:
    def __init__(self) -> None:
        stmt = sqlite.insert(_table())
        stmt = stmt.on_conflict_do_update(
            index_elements=["run_id", "metric", "step"],
            set_={c: stmt.excluded[c] for c in (*VALUE_COLUMNS[2:], "attempt")},
        )
        compiled = stmt.compile(dialect=sqlite.dialect(), column_keys=list(ALL_COLUMNS))
        self._sql = str(compiled)
        # Positional parameters follow the table's column order: (run_id, *row, attempt).
        expected = ["run_id", *VALUE_COLUMNS, "attempt"]
        assert list(compiled.positiontup or []) == expected, compiled.positiontup

    def write(self, conn: Connection, run_id: str, attempt: int, rows: Sequence[PointRow]) -> None:
        conn.exec_driver_sql(self._sql, [(run_id, *row, attempt) for row in dedupe(rows)])


class PostgresCopyUpsert:
    _TEMP = (
        "CREATE TEMP TABLE IF NOT EXISTS scalerl_point_in (step integer, metric varchar(200), "
        "value double precision, nonfinite varchar(4), gpu_hours double precision, flops double precision, "
        "tokens double precision, samples double precision, wall_s double precision, n integer) "
        "ON COMMIT DELETE ROWS"
    )
    _COPY = "COPY scalerl_point_in (" + ", ".join(VALUE_COLUMNS) + ") FROM STDIN"
    _MERGE = (
        "INSERT INTO point (run_id, attempt, " + ", ".join(VALUE_COLUMNS) + ") "
        "SELECT %(run_id)s, %(attempt)s, " + ", ".join(VALUE_COLUMNS) + " FROM scalerl_point_in "
        "ON CONFLICT (run_id, metric, step) DO UPDATE SET "
        + ", ".join(f"{c} = EXCLUDED.{c}" for c in (*VALUE_COLUMNS[2:], "attempt"))
    )

    _INSERT = _MERGE.split(" ON CONFLICT")[0]

    def write(self, conn: Connection, run_id: str, attempt: int, rows: Sequence[PointRow]) -> None:
        import psycopg

        raw = conn.connection.driver_connection
        assert raw is not None
        params = {"run_id": run_id, "attempt": attempt}
        with raw.cursor() as cur:
            cur.execute(self._TEMP)
            with cur.copy(self._COPY) as copy:
                for row in dedupe(rows):
                    copy.write_row(row)
            # New points are the common case, and a plain INSERT costs less than half of
            # ON CONFLICT's speculative insertion; a rewrite falls back to the upsert.
            cur.execute("SAVEPOINT scalerl_points")
            try:
                cur.execute(self._INSERT, params)
            except psycopg.errors.UniqueViolation:
                cur.execute("ROLLBACK TO SAVEPOINT scalerl_points")
                cur.execute(self._MERGE, params)
            cur.execute("RELEASE SAVEPOINT scalerl_points")


UPSERTS: dict[str, type[BulkUpsert]] = {"sqlite": SqliteUpsert, "postgresql": PostgresCopyUpsert}
_ = postgresql  # the dialect module is imported so the registry's names are the dialects' names
