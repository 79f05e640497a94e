"""Fits and verdicts keyed by (sweep, metric, axis); ``run.sweep`` renamed ``run.first_sweep``.

- ``fit`` / ``verdict``: the per-sweep index becomes ``(sweep, metric, axis)``, the key
  ``Store.replace_fits`` / ``replace_verdicts`` now replace by (a fit on ``step`` no longer erases
  the ``flops`` fits). No data moves: both tables have always stored each row's metric and axis
  (NOT NULL since 0001), so existing rows are keyed by what they were computed with. No unique
  constraint: a pooled variant fit has ``run_id`` NULL, and rows are only ever replaced as a set.
- ``run.sweep`` held only the sweep that first registered the run, so ``SELECT ... FROM run
  WHERE sweep = ...`` silently dropped runs shared with another sweep. The column is renamed
  ``first_sweep`` (the values stay: events still name that sweep), so such a query now fails
  loudly, and the new view ``v_runs`` answers it: one row per (sweep, run) membership, with the
  names that sweep gives the run.

Both changes run as plain ``ALTER TABLE ... RENAME COLUMN`` and index swaps (SQLite >= 3.25 and
PostgreSQL), not a batch table copy: copying ``run`` on SQLite would drop the table that
``sweep_run`` cascades from. Downgrade restores 0004 exactly (the column keeps its values).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

V_RUNS = """
CREATE VIEW v_runs AS
SELECT m.sweep, r.run_id, m.variant, m.knob, m.alternative, r.seed, r.config_hash, r.status,
       r.attempts, r.executor, r.job_id, r.host, r.created_at, r.started_at, r.ended_at, r.error,
       r.first_sweep
FROM sweep_run AS m
JOIN run AS r ON r.run_id = m.run_id
"""


def upgrade() -> None:
    for table in ("fit", "verdict"):
        op.drop_index(f"ix_{table}_sweep", table_name=table)
        op.create_index(f"ix_{table}_key", table, ["sweep", "metric", "axis"])
    op.drop_index("ix_run_sweep", table_name="run")
    op.execute("ALTER TABLE run RENAME COLUMN sweep TO first_sweep")
    op.create_index("ix_run_first_sweep", "run", ["first_sweep"])
    op.execute(V_RUNS)


def downgrade() -> None:
    op.execute("DROP VIEW v_runs")
    op.drop_index("ix_run_first_sweep", table_name="run")
    op.execute("ALTER TABLE run RENAME COLUMN first_sweep TO sweep")
    op.create_index("ix_run_sweep", "run", ["sweep"])
    for table in ("fit", "verdict"):
        op.drop_index(f"ix_{table}_key", table_name=table)
        op.create_index(f"ix_{table}_sweep", table, ["sweep"])
