"""Provenance: the code each run was made by (``run.provenance``, nullable JSON).

- ``run.provenance``: what the harness captured when it last started an attempt of the run (the
  trainer repository's git commit, whether its tree was dirty and a hash of the dirty diff, the
  versions of torch, transformers, vllm, trl and scalerl-harness;
  :mod:`scalerl.harness.execution.provenance`). NULL means unknown: every run stored before this
  revision, and imported runs, whose code the harness never saw.
- ``v_runs`` gains ``provenance`` (the view selects explicit columns, so it is recreated).

A nullable column with no default: a metadata-only change on SQLite and PostgreSQL, instant on a
store of any size. Downgrade drops the column (SQLite re-checks views when a column is dropped,
so ``v_runs`` goes first) and restores 0005's view.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

V_RUNS = """
CREATE VIEW v_runs AS
SELECT m.sweep, r.run_id, m.variant, m.knob, m.alternative, r.seed, r.config_hash, r.status,
       r.attempts, r.executor, r.job_id, r.host, r.created_at, r.started_at, r.ended_at, r.error,
       r.first_sweep, r.provenance
FROM sweep_run AS m
JOIN run AS r ON r.run_id = m.run_id
"""

# 0005's view, restored by downgrade (copied, not imported: a revision must not change later).
V_RUNS_0005 = """
CREATE VIEW v_runs AS
SELECT m.sweep, r.run_id, m.variant, m.knob, m.alternative, r.seed, r.config_hash, r.status,
       r.attempts, r.executor, r.job_id, r.host, r.created_at, r.started_at, r.ended_at, r.error,
       r.first_sweep
FROM sweep_run AS m
JOIN run AS r ON r.run_id = m.run_id
"""


def upgrade() -> None:
    op.add_column("run", sa.Column("provenance", sa.JSON(), nullable=True))
    op.execute("DROP VIEW v_runs")
    op.execute(V_RUNS)


def downgrade() -> None:
    op.execute("DROP VIEW v_runs")
    op.drop_column("run", "provenance")
    op.execute(V_RUNS_0005)
