"""Verdict claims: efficiency intervals and a probability beside each claim (issue 36).

- ``verdict.d_log_c_mid`` / ``_lo`` / ``_hi`` (nullable floats): the change in log C_mid with its
  interval (the efficiency claim's second parameter; the verdict object had them, the store did
  not).
- ``verdict.p_ceiling`` / ``p_efficiency`` / ``p_no_effect`` (nullable floats): how sure the rule
  is of each claim, 1 - its Benjamini-Hochberg adjusted p-value over the sweep's knobs
  (``scalerl.harness.analysis.claims``). NULL where the claim could not be tested, and for every
  verdict stored before this revision.
- ``verdict.efficiency`` (nullable string): "differs" (the efficiency claim is made; on an
  asymptote-mover the knob is both), "same" (equivalence shown) or empty.

Revision ID: 0008
Revises: 0007_sharing
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007_sharing"
branch_labels: str | None = None
depends_on: str | None = None

_FLOATS = ("d_log_c_mid", "d_log_c_mid_lo", "d_log_c_mid_hi", "p_ceiling", "p_efficiency", "p_no_effect")


def upgrade() -> None:
    # Nullable columns with no default: metadata-only on SQLite and PostgreSQL (no table rewrite).
    for name in _FLOATS:
        op.add_column("verdict", sa.Column(name, sa.Float(), nullable=True))
    op.add_column("verdict", sa.Column("efficiency", sa.String(16), nullable=True))


def downgrade() -> None:
    # No view selects from verdict, so the columns drop without touching the views.
    op.drop_column("verdict", "efficiency")
    for name in reversed(_FLOATS):
        op.drop_column("verdict", name)
