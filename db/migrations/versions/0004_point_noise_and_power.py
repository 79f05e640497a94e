"""Noise and power: ``point.n`` and the verdict's minimum detectable effects.

- ``point.n`` (nullable integer): how many Bernoulli samples stand behind a pass-rate point, so
  its binomial standard error is known (DESIGN.md §10). NULL for points whose writer did not say
  (imported curves, metrics that are not rates, every point written before this revision).
- ``verdict.mde_a`` / ``verdict.mde_b`` (nullable floats): the smallest |dA| / |dB| the sweep
  could have detected at its seeds and noise (80% power at the verdict's level).
- ``v_curves`` gains ``n`` (the view is recreated; it selects explicit columns).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

V_CURVES = """
CREATE VIEW v_curves AS
SELECT m.sweep, p.run_id, m.variant, m.knob, m.alternative, r.seed, p.step, p.metric, p.value,
       p.nonfinite, p.n, p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s, p.attempt
FROM point AS p
JOIN sweep_run AS m ON m.run_id = p.run_id
JOIN run AS r ON r.run_id = p.run_id
"""

# The 0003 views, restored by downgrade (copied, not imported: a revision must not change later).
V_CURVES_0003 = """
CREATE VIEW v_curves AS
SELECT m.sweep, p.run_id, m.variant, m.knob, m.alternative, r.seed, p.step, p.metric, p.value,
       p.nonfinite, p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s, p.attempt
FROM point AS p
JOIN sweep_run AS m ON m.run_id = p.run_id
JOIN run AS r ON r.run_id = p.run_id
"""

V_LATEST_0003 = """
CREATE VIEW v_latest AS
SELECT m.sweep, p.run_id, m.variant, r.status, r.attempts, p.metric, p.step, p.value,
       p.gpu_hours, p.flops, p.tokens, p.samples, p.wall_s
FROM point AS p
JOIN sweep_run AS m ON m.run_id = p.run_id
JOIN run AS r ON r.run_id = p.run_id
JOIN (SELECT run_id, metric, MAX(step) AS step FROM point GROUP BY run_id, metric) AS last
  ON last.run_id = p.run_id AND last.metric = p.metric AND last.step = p.step
"""


def upgrade() -> None:
    # A nullable column with no default: a metadata-only change on both SQLite and PostgreSQL
    # (no table rewrite, so upgrading a store with millions of points is instant).
    op.add_column("point", sa.Column("n", sa.Integer(), nullable=True))
    op.add_column("verdict", sa.Column("mde_a", sa.Float(), nullable=True))
    op.add_column("verdict", sa.Column("mde_b", sa.Float(), nullable=True))
    op.execute("DROP VIEW v_curves")
    op.execute(V_CURVES)


def downgrade() -> None:
    # SQLite re-checks views when a column is dropped: drop both views first, restore 0003's.
    op.execute("DROP VIEW v_latest")
    op.execute("DROP VIEW v_curves")
    op.drop_column("verdict", "mde_b")
    op.drop_column("verdict", "mde_a")
    op.drop_column("point", "n")
    op.execute(V_CURVES_0003)
    op.execute(V_LATEST_0003)
