"""Initial tables: sweep, run, point, fit, verdict, event.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "sweep",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "run",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("sweep", sa.String(200), sa.ForeignKey("sweep.name", ondelete="CASCADE"), nullable=False),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("knob", sa.String(200)),
        sa.Column("alternative", sa.String(200)),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("executor", sa.String(64)),
        sa.Column("job_id", sa.String(128)),
        sa.Column("host", sa.String(256)),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS),
        sa.Column("ended_at", TS),
        sa.Column("error", sa.Text()),
    )
    op.create_index("ix_run_sweep", "run", ["sweep"])
    op.create_table(
        "point",
        # No FK to run: the fenced write checks the run in the same transaction (see db/models.py).
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("value", sa.Float()),
        sa.Column("nonfinite", sa.String(4)),
        sa.Column("gpu_hours", sa.Float()),
        sa.Column("flops", sa.Float()),
        sa.Column("tokens", sa.Float()),
        sa.Column("samples", sa.Float()),
        sa.Column("wall_s", sa.Float()),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "metric", "step", name="pk_point"),
        # SQLite: store points clustered by their key, so a curve is one contiguous range read.
        sqlite_with_rowid=False,
    )
    fit_numbers = ["window_start", "r0", "a", "a_lo", "a_hi", "b", "b_lo", "b_hi"]
    fit_numbers += ["c_mid", "c_mid_lo", "c_mid_hi", "rmse"]
    op.create_table(
        "fit",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("sweep", sa.String(200), sa.ForeignKey("sweep.name", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("axis", sa.String(32), nullable=False),
        *[sa.Column(name, sa.Float()) for name in fit_numbers],
        sa.Column("n_points", sa.Integer()),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("method", sa.String(64)),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_fit_sweep", "fit", ["sweep"])
    verdict_numbers = ["a_base", "a_variant", "d_a", "d_a_lo", "d_a_hi", "b_base", "b_variant"]
    verdict_numbers += ["d_b", "d_b_lo", "d_b_hi", "margin"]
    op.create_table(
        "verdict",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("sweep", sa.String(200), sa.ForeignKey("sweep.name", ondelete="CASCADE"), nullable=False),
        sa.Column("knob", sa.String(200)),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("alternative", sa.String(200)),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("axis", sa.String(32), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        *[sa.Column(name, sa.Float()) for name in verdict_numbers],
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_verdict_sweep", "verdict", ["sweep"])
    op.create_table(
        "event",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("time", TS, nullable=False),
        sa.Column("sweep", sa.String(200)),
        sa.Column("run_id", sa.String(64)),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_event_sweep_time", "event", ["sweep", "time"])
    op.create_index("ix_event_run", "event", ["run_id"])


def downgrade() -> None:
    for table in ("event", "verdict", "fit", "point", "run", "sweep"):
        op.drop_table(table)
