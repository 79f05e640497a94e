"""Views for people who query the database directly: v_curves, v_latest.

``v_curves``: every point with its run's sweep, variant, knob, alternative and seed.
``v_latest``: per run and metric, the point at the highest step (the "where is it now" view).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

V_CURVES = """
CREATE VIEW v_curves AS
SELECT r.sweep, p.run_id, r.variant, r.knob, r.alternative, r.seed, p.step, p.metric, p.value,
       p.nonfinite, p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s, p.attempt
FROM point AS p JOIN run AS r ON r.run_id = p.run_id
"""

V_LATEST = """
CREATE VIEW v_latest AS
SELECT r.sweep, p.run_id, r.variant, r.status, r.attempts, p.metric, p.step, p.value,
       p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s
FROM point AS p
JOIN run AS r ON r.run_id = p.run_id
JOIN (SELECT run_id, metric, MAX(step) AS step FROM point GROUP BY run_id, metric) AS last
  ON last.run_id = p.run_id AND last.metric = p.metric AND last.step = p.step
"""


def upgrade() -> None:
    op.execute(V_CURVES)
    op.execute(V_LATEST)


def downgrade() -> None:
    op.execute("DROP VIEW v_latest")
    op.execute("DROP VIEW v_curves")
