"""Sharing a store, and runs that say whether their process lives (issue 40).

- ``scalerl_meta`` (key, value): the store's identity, ``store_id``, a UUID made here once. A
  spool record carries it, so ``scalerl db replay`` into another store refuses instead of writing
  one store's points into another's run of the same id. On PostgreSQL it and the version table
  are readable by every role (``PUBLIC``): a reader granted SELECT on the data tables alone could
  not open the store.
- ``run.pid``, ``run.pid_start`` (the process's start time as the kernel counts it, with the boot
  it belongs to: a reused pid is another process) and ``run.heartbeat_at`` (bumped by the run's
  point writer while it lives): ``scalerl status`` ends a ``running`` run whose process is gone
  from this host, or whose heartbeat stopped elsewhere. NULL for runs written before: never judged.
- ``sweep.owner``: the database role that created the sweep (PostgreSQL: ``DEFAULT current_user``,
  so a sweep created before this revision belongs to the role that runs it: the store's
  administrator, who hands it over with ``scalerl db grant ROLE --owner SWEEP``; NULL on SQLite,
  whose file permissions are its only access control).
- ``sweep_grant`` (sweep, grantee, granted_by, created_at): the roles, besides the owner, that
  may change a sweep (``scalerl db grant``).
- PostgreSQL only: row-level security on every table a sweep's data lives in. Every role may
  read everything; a role may change a sweep, its runs (a run belongs to the sweep that
  registered it first), their points and events, its fits and verdicts, only if it owns the
  sweep (or is a member of the owning role) or holds a grant; only the owner grants. The checks
  are two functions, ``scalerl_can_write(sweep)`` and ``scalerl_can_write_run(run_id)``, with a
  fixed ``search_path`` and schema-qualified tables, so a role cannot point them at tables of its
  own. The table owner (the role that ran the migrations) is exempt, as PostgreSQL makes every
  table owner, so a one-role store behaves as before. Optuna's tables (a search's study) are not
  covered: see README, "Sharing a store".

Robust to renumbering: this revision's id is ``0007_sharing``; if another revision lands first,
only ``down_revision`` changes. Downgrade drops the policies, functions, table and columns.

Revision ID: 0007_sharing
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision: str = "0007_sharing"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

# Every table whose rows belong to one sweep, with the expression that names it. ``point`` and
# ``event`` rows name a run (an event may name only a sweep, or neither: a store-wide event).
_SWEEP_TABLES = {"sweep_run": "sweep", "fit": "sweep", "verdict": "sweep"}


def _functions(schema: str) -> list[str]:
    q = f'"{schema}"'
    return [
        f"""
CREATE FUNCTION {q}.scalerl_owns(target text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (
    SELECT 1 FROM {q}.sweep s JOIN pg_catalog.pg_roles r ON r.rolname = s.owner
    WHERE s.name = target AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'))
$$""",
        f"""
CREATE FUNCTION {q}.scalerl_can_write(target text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT {q}.scalerl_owns(target) OR EXISTS (
    SELECT 1 FROM {q}.sweep_grant g JOIN pg_catalog.pg_roles r ON r.rolname = g.grantee
    WHERE g.sweep = target AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'))
$$""",
        f"""
CREATE FUNCTION {q}.scalerl_can_write_run(target text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT 1 FROM {q}.run r WHERE r.run_id = target
                 AND {q}.scalerl_can_write(r.first_sweep))
$$""",
    ]


def _policies(schema: str) -> list[str]:
    q = f'"{schema}"'
    can, can_run, owns = f"{q}.scalerl_can_write", f"{q}.scalerl_can_write_run", f"{q}.scalerl_owns"
    writable_runs = (
        f"SELECT r.run_id FROM {q}.run r WHERE r.first_sweep IN "
        f"(SELECT s.name FROM {q}.sweep s WHERE {can}(s.name))"
    )
    out = [
        # sweep: created as oneself; changed by its owner or a grantee; deleted by its owner.
        "CREATE POLICY scalerl_read ON sweep FOR SELECT USING (true)",
        "CREATE POLICY scalerl_create ON sweep FOR INSERT WITH CHECK (owner = current_user)",
        f"CREATE POLICY scalerl_change ON sweep FOR UPDATE USING ({can}(name))",
        f"CREATE POLICY scalerl_delete ON sweep FOR DELETE USING ({owns}(name))",
        # run: belongs to the sweep that registered it first.
        "CREATE POLICY scalerl_read ON run FOR SELECT USING (true)",
        f"CREATE POLICY scalerl_write ON run FOR ALL USING ({can}(first_sweep)) "
        f"WITH CHECK ({can}(first_sweep))",
        "CREATE POLICY scalerl_read ON point FOR SELECT USING (true)",
        # Points are written 20,000 to a statement: the runs this role may change are found once
        # per statement (an uncorrelated subquery, hashed) rather than once per point (28x slower).
        f"CREATE POLICY scalerl_write ON point FOR ALL USING (run_id IN ({writable_runs})) "
        f"WITH CHECK (run_id IN ({writable_runs}))",
        # event: append-only; a store-wide event (no sweep, no run) is anyone's to log.
        "CREATE POLICY scalerl_read ON event FOR SELECT USING (true)",
        "CREATE POLICY scalerl_append ON event FOR INSERT WITH CHECK (CASE "
        f"WHEN sweep IS NOT NULL THEN {can}(sweep) WHEN run_id IS NOT NULL THEN {can_run}(run_id) "
        "ELSE true END)",
        # grants: given and taken back by the sweep's owner; a grantee may drop its own.
        "CREATE POLICY scalerl_read ON sweep_grant FOR SELECT USING (true)",
        f"CREATE POLICY scalerl_grant ON sweep_grant FOR INSERT WITH CHECK ({owns}(sweep))",
        f"CREATE POLICY scalerl_revoke ON sweep_grant FOR DELETE USING ({owns}(sweep) OR "
        "grantee = current_user)",
    ]
    for table, column in _SWEEP_TABLES.items():
        out += [
            f"CREATE POLICY scalerl_read ON {table} FOR SELECT USING (true)",
            f"CREATE POLICY scalerl_write ON {table} FOR ALL USING ({can}({column})) "
            f"WITH CHECK ({can}({column}))",
        ]
    return out


_RLS_TABLES = ("sweep", "run", "point", "event", "sweep_grant", *_SWEEP_TABLES)


def upgrade() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    meta = op.create_table(
        "scalerl_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )
    op.bulk_insert(meta, [{"key": "store_id", "value": str(uuid.uuid4())}])
    op.add_column("run", sa.Column("pid", sa.Integer(), nullable=True))
    op.add_column("run", sa.Column("pid_start", sa.String(64), nullable=True))
    op.add_column("run", sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    owner_default = sa.text("current_user") if pg else None
    op.add_column("sweep", sa.Column("owner", sa.String(200), nullable=True, server_default=owner_default))
    op.create_table(
        "sweep_grant",
        sa.Column("sweep", sa.String(200), sa.ForeignKey("sweep.name", ondelete="CASCADE"), nullable=False),
        sa.Column("grantee", sa.String(200), nullable=False),
        sa.Column("granted_by", sa.String(200), nullable=True, server_default=owner_default),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("sweep", "grantee", name="pk_sweep_grant"),
    )
    if not pg:
        return
    # Every role that may connect may read which schema the store is at, and its id: a reader
    # granted SELECT on the data tables alone could not even open it (exit 4).
    op.execute("GRANT SELECT ON scalerl_version, scalerl_meta TO PUBLIC")
    schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
    for statement in _functions(schema):
        op.execute(statement)
    for table in _RLS_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    for statement in _policies(schema):
        op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for table in _RLS_TABLES:
            for (name,) in bind.execute(
                sa.text(
                    "SELECT policyname FROM pg_policies "
                    "WHERE tablename = :t AND schemaname = current_schema()"
                ),
                {"t": table},
            ).all():
                op.execute(f'DROP POLICY "{name}" ON {table}')
            op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        for fn in ("scalerl_can_write_run", "scalerl_can_write", "scalerl_owns"):
            op.execute(f"DROP FUNCTION {fn}(text)")
        op.execute("REVOKE SELECT ON scalerl_version FROM PUBLIC")
    op.drop_table("sweep_grant")
    op.drop_column("sweep", "owner")
    for column in ("heartbeat_at", "pid_start", "pid"):
        op.drop_column("run", column)
    op.drop_table("scalerl_meta")
