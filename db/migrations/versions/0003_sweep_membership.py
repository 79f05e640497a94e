"""A run can belong to several sweeps: the ``sweep_run`` membership table.

Run ids are content hashes (config + seed), so one run can be part of several sweeps (the last
step of a ``forward`` design is the LOO baseline; a grid point can equal another sweep's
baseline). ``run.sweep`` stays "the sweep that first registered it"; ``sweep_run`` holds every
(sweep, run) pair with the names that sweep gives the run. Existing runs get one membership row
each, from their own columns. The views now go through membership, so a shared run appears once
per sweep it belongs to, under that sweep's names.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

V_CURVES = """
CREATE VIEW v_curves AS
SELECT m.sweep, p.run_id, m.variant, m.knob, m.alternative, r.seed, p.step, p.metric, p.value,
       p.nonfinite, p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s, p.attempt
FROM point AS p
JOIN sweep_run AS m ON m.run_id = p.run_id
JOIN run AS r ON r.run_id = p.run_id
"""

V_LATEST = """
CREATE VIEW v_latest AS
SELECT m.sweep, p.run_id, m.variant, r.status, r.attempts, p.metric, p.step, p.value,
       p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s
FROM point AS p
JOIN sweep_run AS m ON m.run_id = p.run_id
JOIN run AS r ON r.run_id = p.run_id
JOIN (SELECT run_id, metric, MAX(step) AS step FROM point GROUP BY run_id, metric) AS last
  ON last.run_id = p.run_id AND last.metric = p.metric AND last.step = p.step
"""

# The 0002 views, restored by downgrade (copied, not imported: a revision must not change later).
V_CURVES_0002 = """
CREATE VIEW v_curves AS
SELECT r.sweep, p.run_id, r.variant, r.knob, r.alternative, r.seed, p.step, p.metric, p.value,
       p.nonfinite, p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s, p.attempt
FROM point AS p JOIN run AS r ON r.run_id = p.run_id
"""

V_LATEST_0002 = """
CREATE VIEW v_latest AS
SELECT r.sweep, p.run_id, r.variant, r.status, r.attempts, p.metric, p.step, p.value,
       p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s
FROM point AS p
JOIN run AS r ON r.run_id = p.run_id
JOIN (SELECT run_id, metric, MAX(step) AS step FROM point GROUP BY run_id, metric) AS last
  ON last.run_id = p.run_id AND last.metric = p.metric AND last.step = p.step
"""


def upgrade() -> None:
    op.create_table(
        "sweep_run",
        sa.Column("sweep", sa.String(200), sa.ForeignKey("sweep.name", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("run.run_id", ondelete="CASCADE"), nullable=False),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("knob", sa.String(200)),
        sa.Column("alternative", sa.String(200)),
        sa.PrimaryKeyConstraint("sweep", "run_id", name="pk_sweep_run"),
    )
    op.create_index("ix_sweep_run_run", "sweep_run", ["run_id"])
    # Data migration: every existing run is a member of the sweep that registered it.
    op.execute(
        "INSERT INTO sweep_run (sweep, run_id, variant, knob, alternative) "
        "SELECT sweep, run_id, variant, knob, alternative FROM run"
    )
    op.execute("DROP VIEW v_latest")
    op.execute("DROP VIEW v_curves")
    op.execute(V_CURVES)
    op.execute(V_LATEST)


def downgrade() -> None:
    op.execute("DROP VIEW v_latest")
    op.execute("DROP VIEW v_curves")
    op.execute(V_CURVES_0002)
    op.execute(V_LATEST_0002)
    op.drop_index("ix_sweep_run_run", table_name="sweep_run")
    op.drop_table("sweep_run")
