"""Sharing one PostgreSQL store between people: who owns a sweep, who may change it.

The rules live in the database (migration ``0007_sharing``), not in this client, so a role that
connects with ``psql`` is held to them as well:

- every role with access to the store may read everything;
- a sweep belongs to the role that created it (``sweep.owner``, PostgreSQL's ``current_user``),
  and a run to the sweep that registered it first;
- a role changes a sweep (its runs, their points and events, its fits and verdicts: a cancel, a
  rerun, an ``--extend``, an import into it) only if it owns the sweep, is a member of the owning
  role, or holds a grant on it (``sweep_grant``); only the owner grants;
- the table owner (the role that created the store: the lab's administrator) is exempt, as
  PostgreSQL makes every table owner.

This module is the client's side of it: the administrator's table privileges for a role
(:func:`grant_access`: ``read`` or ``write``), the owner's grants on one sweep
(:func:`grant_sweep`, :func:`revoke_sweep`), handing a sweep to another owner
(:func:`set_owner`, administrator only) and the question asked before a command changes a
sweep (:func:`require_write`), so a refused cancel stops nothing and says whom to ask.
SQLite has no roles: a SQLite store is shared through its file's permissions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Connection, text

from scalerl.db.errors import StoreError, StorePermissionError

if TYPE_CHECKING:
    from scalerl.db.store import Store

# The tables a writer changes (the rest it only reads: scalerl_version, scalerl_meta).
WRITE_TABLES = ("sweep", "run", "sweep_run", "point", "fit", "verdict", "event", "sweep_grant")
# PostgreSQL identifiers a grant may name: a role name as ``CREATE ROLE`` takes it unquoted.
_ROLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.\-]{0,62}$")


@dataclass(frozen=True)
class SweepAccess:
    """Who may change a sweep: its owner (None on SQLite) and grantees."""

    sweep: str
    owner: str | None
    grantees: tuple[str, ...]


def _postgres(store: Store, doing: str) -> None:
    if store.dialect != "postgresql":
        raise StoreError(
            f"store {store.url}: {doing} needs PostgreSQL roles; a SQLite store is shared through its "
            "file's permissions (fix: chmod/chgrp the file and its folder, or move the lab to PostgreSQL)"
        )


def _role(name: str) -> str:
    if not isinstance(name, str) or not _ROLE.match(name):
        raise StoreError(
            f"role {name!r} is not a PostgreSQL role name (fix: letters, digits and _ $ . -, starting "
            "with a letter or _, at most 63 characters)"
        )
    return name


def _quoted(name: str) -> str:
    return '"' + _role(name).replace('"', '""') + '"'


def exempt(conn: Connection) -> bool:
    """Whether this session's role is above the rules (it owns the tables, or is a superuser or
    a BYPASSRLS role): the store's administrator."""
    row = conn.execute(
        text(
            "SELECT pg_catalog.pg_has_role(current_user, c.relowner, 'MEMBER') OR r.rolsuper OR "
            "r.rolbypassrls FROM pg_catalog.pg_class c, pg_catalog.pg_roles r "
            "WHERE c.oid = 'sweep'::regclass AND r.rolname = current_user"
        )
    ).first()
    return bool(row and row[0])


def can_write(store: Store, sweep: str) -> bool:
    """Whether this role may change ``sweep`` (True on SQLite, for a sweep that does not exist yet,
    and for the administrator)."""
    if store.dialect != "postgresql":
        return True

    def tx(conn: Connection) -> bool:
        if exempt(conn):
            return True
        exists = conn.execute(text("SELECT 1 FROM sweep WHERE name = :s"), {"s": sweep}).first()
        if exists is None:
            return True
        return bool(conn.execute(text("SELECT scalerl_can_write(:s)"), {"s": sweep}).scalar())

    result: bool = store.transaction(tx, doing=f"checking access to sweep {sweep!r}", write=False)
    return result


def access(store: Store, sweep: str) -> SweepAccess:
    """The sweep's owner and grantees (any role may read them)."""

    def tx(conn: Connection) -> SweepAccess:
        owner = conn.execute(text("SELECT owner FROM sweep WHERE name = :s"), {"s": sweep}).first()
        if owner is None:
            raise StoreError(f"store {store.url}: no sweep {sweep!r} (fix: `scalerl ls` lists them)")
        rows = conn.execute(
            text("SELECT grantee FROM sweep_grant WHERE sweep = :s ORDER BY grantee"), {"s": sweep}
        ).all()
        return SweepAccess(sweep, owner[0], tuple(str(r[0]) for r in rows))

    result: SweepAccess = store.transaction(tx, doing=f"reading who may change sweep {sweep!r}", write=False)
    return result


def current_role(store: Store) -> str:
    def tx(conn: Connection) -> str:
        return str(conn.execute(text("SELECT current_user")).scalar_one())

    if store.dialect != "postgresql":
        return "(SQLite: no roles)"
    result: str = store.transaction(tx, doing="reading the session's role", write=False)
    return result


def require_write(store: Store, sweep: str, doing: str) -> None:
    """Raise :class:`StorePermissionError` when this role may not change ``sweep``, naming its
    owner and the command that would grant it, before ``doing`` touches anything (the database
    refuses the writes anyway; this makes the refusal say why)."""
    if can_write(store, sweep):
        return
    who = access(store, sweep)
    me = current_role(store)
    owner = who.owner or "nobody (the store's administrator assigns an owner)"
    raise StorePermissionError(
        f"store {store.url}: role {me!r} may not change sweep {sweep!r} ({doing}): it belongs to "
        f"{owner}"
        + (f", granted to {', '.join(who.grantees)}" if who.grantees else "")
        + f" (fix: ask its owner for `scalerl db grant {me} --sweep {sweep}`, or read it: every role "
        "may read every sweep)"
    )


def grant_sweep(store: Store, sweep: str, role: str) -> bool:
    """Let ``role`` (or the members of a group role) change ``sweep``; only its owner may.
    Returns False when the grant was there already."""
    _postgres(store, "granting a sweep")
    _role(role)

    def tx(conn: Connection) -> bool:
        res = conn.execute(
            text(
                "INSERT INTO sweep_grant (sweep, grantee, created_at) VALUES (:s, :r, now()) "
                "ON CONFLICT DO NOTHING"
            ),
            {"s": sweep, "r": role},
        )
        return bool(res.rowcount)

    access(store, sweep)  # an unknown sweep is named as such, not as a policy violation
    result: bool = store.transaction(tx, doing=f"granting sweep {sweep!r} to role {role!r}")
    return result


def revoke_sweep(store: Store, sweep: str, role: str) -> bool:
    """Take a grant back (its sweep's owner, or the grantee itself); False when there was none."""
    _postgres(store, "revoking a sweep grant")

    def tx(conn: Connection) -> bool:
        res = conn.execute(
            text("DELETE FROM sweep_grant WHERE sweep = :s AND grantee = :r"), {"s": sweep, "r": role}
        )
        return bool(res.rowcount)

    result: bool = store.transaction(tx, doing=f"revoking sweep {sweep!r} from role {role!r}")
    return result


def set_owner(store: Store, sweep: str, role: str) -> None:
    """Hand ``sweep`` to ``role`` (the administrator: e.g. a sweep made before 0007, which the
    migration gave to the administrator, or one whose owner left the lab)."""
    _postgres(store, "setting a sweep's owner")
    _role(role)

    def tx(conn: Connection) -> None:
        if not exempt(conn):
            raise StorePermissionError(
                f"store {store.url}: only the store's administrator (the role that owns its tables) "
                f"hands sweeps over (fix: ask them for `scalerl db grant {role} --owner {sweep}`)"
            )
        res = conn.execute(text("UPDATE sweep SET owner = :r WHERE name = :s"), {"s": sweep, "r": role})
        if not res.rowcount:
            raise StoreError(f"store {store.url}: no sweep {sweep!r} (fix: `scalerl ls` lists them)")

    store.transaction(tx, doing=f"handing sweep {sweep!r} to role {role!r}")


Level = Literal["read", "write"]


def grant_access(store: Store, role: str, level: Level) -> list[str]:
    """The administrator's table privileges for ``role``: ``read`` (SELECT on every table and
    view of the store's schema, Optuna's studies included) or ``write`` (that, plus changing
    rows of the store's tables, which row-level security then limits to the sweeps the role owns
    or is granted, and the studies' tables, which it does not). Returns the statements run."""
    _postgres(store, "granting table access")
    quoted = _quoted(role)
    statements = [
        f"GRANT USAGE ON SCHEMA {{schema}} TO {quoted}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {{schema}} TO {quoted}",
    ]
    if level == "write":
        tables = ", ".join(WRITE_TABLES)
        statements += [
            f"GRANT INSERT, DELETE ON {tables} TO {quoted}",
            # A sweep's owner column is the database's to set (DEFAULT current_user): a writer
            # may change a sweep's spec, never whose it is.
            f"GRANT UPDATE ON {', '.join(t for t in WRITE_TABLES if t != 'sweep')} TO {quoted}",
            f"GRANT UPDATE (spec) ON sweep TO {quoted}",
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {{schema}} TO {quoted}",
        ]
    return _run_admin(store, statements, f"granting {level} access to role {role!r}")


def revoke_access(store: Store, role: str) -> list[str]:
    """Take every table privilege of ``role`` on the store's schema back (its sweeps stay its)."""
    _postgres(store, "revoking table access")
    quoted = _quoted(role)
    statements = [
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {{schema}} FROM {quoted}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {{schema}} FROM {quoted}",
        f"REVOKE USAGE ON SCHEMA {{schema}} FROM {quoted}",
    ]
    return _run_admin(store, statements, f"revoking the access of role {role!r}")


def _run_admin(store: Store, statements: list[str], doing: str) -> list[str]:
    def tx(conn: Connection) -> list[str]:
        exists = conn.execute(
            text("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = :r"),
            {"r": statements[0].rsplit(" ", 1)[-1].strip('"')},
        ).first()
        if exists is None:
            raise StoreError(
                f"store {store.url}: {doing}: no such role (fix: CREATE ROLE it first, e.g. "
                "`CREATE ROLE alice LOGIN`, as a role that may create roles)"
            )
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
        done = [s.format(schema='"' + str(schema).replace('"', '""') + '"') for s in statements]
        for statement in done:
            conn.execute(text(statement))
        return done

    result: list[str] = store.transaction(tx, doing=doing)
    return result
