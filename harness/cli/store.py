"""``scalerl db``: upgrade the store's schema, show its revision, replay spooled points.

- ``scalerl db upgrade [URL]``: apply Alembic migrations up to head.
- ``scalerl db current [URL]``: print the store's schema revision and this code's head.
- ``scalerl db replay [--spool DIR] [URL]``: write the spool files of dead writers into the store.

URL defaults to ``$SCALERL_DB_URL``, then ``sqlite:///./scalerl.db``; it is always printed with
its password hidden.
"""

from __future__ import annotations

import argparse

from scalerl.harness.cli.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("db", help="results store: schema upgrade, revision, spool replay")
    dbsub = parser.add_subparsers(dest="db_command", metavar="DB_COMMAND", required=True)

    up = dbsub.add_parser("upgrade", help="upgrade the store's schema to this code's revision")
    up.add_argument("url", nargs="?", default=None, help="database URL (default: $SCALERL_DB_URL)")
    up.set_defaults(func=_upgrade)

    cur = dbsub.add_parser("current", help="show the store's schema revision")
    cur.add_argument("url", nargs="?", default=None, help="database URL (default: $SCALERL_DB_URL)")
    cur.set_defaults(func=_current)

    rep = dbsub.add_parser("replay", help="write spooled points (from writers that died) into the store")
    rep.add_argument(
        "--spool", default=None, help="spool dir (default: $SCALERL_SPOOL_DIR or .scalerl/spool)"
    )
    rep.add_argument("url", nargs="?", default=None, help="database URL (default: $SCALERL_DB_URL)")
    rep.set_defaults(func=_replay)

    sharing = (
        "PostgreSQL stores only (README, 'Sharing a store'): every role may read every sweep; a sweep "
        "belongs to the role that created it, which alone grants others the right to change it."
    )
    for name, verb in (("grant", "give"), ("revoke", "take back")):
        g = dbsub.add_parser(
            name,
            help=f"{verb} a role the right to change a sweep, or table access to the store",
            description=f"{verb.capitalize()} ROLE: with --sweep, the right to change that sweep (its "
            "owner runs it); with --read / --write, table access to the whole store (its "
            "administrator runs it)"
            + ("; with --owner, hand that sweep to ROLE (administrator)" if name == "grant" else "")
            + ". "
            + sharing,
        )
        g.add_argument("role", metavar="ROLE", help="a PostgreSQL role (or a group role: its members)")
        g.add_argument("url", nargs="?", default=None, help="database URL (default: $SCALERL_DB_URL)")
        what = g.add_mutually_exclusive_group(required=True)
        # dest is not `sweep`: that would make `db grant ROLE --read` ask for $SCALERL_SWEEP.
        what.add_argument("--sweep", dest="on_sweep", metavar="SWEEP", help="the sweep ROLE may change")
        if name == "grant":
            what.add_argument("--read", action="store_true", help="SELECT on every table of the store")
            what.add_argument(
                "--write", action="store_true",
                help="read, and change rows (row-level security limits it to the sweeps ROLE owns or is "
                "granted)",
            )  # fmt: skip
            what.add_argument("--owner", metavar="SWEEP", help="hand SWEEP over to ROLE")
        else:
            what.add_argument("--access", action="store_true", help="every table privilege ROLE has")
        g.set_defaults(func=_grant if name == "grant" else _revoke)

    who = dbsub.add_parser("access", help="who owns a sweep and who may change it", description=sharing)
    who.add_argument("sweep", metavar="SWEEP")
    who.add_argument("url", nargs="?", default=None, help="database URL (default: $SCALERL_DB_URL)")
    who.set_defaults(func=_access)


def _upgrade(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from scalerl.db import schema
    from scalerl.db.engine import make_engine, redact, resolve_url
    from scalerl.db.errors import translate

    bundle = make_engine(resolve_url(args.url))
    where = redact(bundle.url)
    try:
        before, after = schema.upgrade(bundle)
    except SQLAlchemyError as err:
        raise translate(err, url=where, doing="upgrading the schema") from None
    finally:
        bundle.engine.dispose()
    if before == after:
        print(f"store {where}: already at revision {after} (head)")
    else:
        print(f"store {where}: upgraded {before or '(empty)'} -> {after}")
    if args.json:
        emit({"store": where, "before": before, "after": after, "upgraded": before != after})
    return 0


def _current(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from scalerl.db import schema
    from scalerl.db.engine import make_engine, redact, resolve_url
    from scalerl.db.errors import translate

    bundle = make_engine(resolve_url(args.url), create=False)  # a question must not create a store
    where = redact(bundle.url)
    try:
        with bundle.engine.connect() as conn:
            current = schema.current_revision(conn)
    except SQLAlchemyError as err:
        raise translate(err, url=where, doing="reading the schema revision") from None
    finally:
        bundle.engine.dispose()
    head = schema.head_revision()
    state = "up to date" if current == head else f"out of date: run `{schema.upgrade_command(bundle)}`"
    print(f"store {where}: revision {current or '(none)'}, code head {head} ({state})")
    if args.json:
        emit({"store": where, "revision": current, "head": head, "up_to_date": current == head})
    return 0 if current == head else 1


def _replay(args: argparse.Namespace) -> int:
    from scalerl.db import open_store, replay
    from scalerl.db.spool import spool_dir

    store = open_store(args.url)
    try:
        report = replay(store, args.spool)
    finally:
        store.close()
    print(
        f"store {store.url}: replayed {report.files} spool file(s) from {spool_dir(args.spool)}: "
        f"{report.points} points written, {report.fenced_points} dropped as fenced"
    )
    for path in report.skipped_in_use:
        print(f"  skipped {path}: locked by a live writer (it replays its own spool)")
    for path in report.kept_unknown_run:
        print(f"  kept {path}: its run is not registered in this store (wrong URL?)")
    for path, other, url in report.kept_other_store:
        print(
            f"  kept {path}: its points belong to another store ({url}, id {other}), not this one "
            f"(id {store.store_id}): written here they would land in this store's run of the same id "
            f"(fix: scalerl db replay --spool {spool_dir(args.spool)} <that store's URL>)"
        )
    if report.quarantined_points:
        print(
            f"  set aside {report.quarantined_points} record(s) the store cannot hold (a step past "
            "the store's range, an unreadable line...), each with its reason, in:"
        )
        for path in report.quarantined:
            print(f"    {path}")
    if args.json:
        emit({"store": store.url, "spool": str(spool_dir(args.spool)), "files": report.files,
              "points": report.points, "fenced_points": report.fenced_points,
              "skipped_in_use": [str(p) for p in report.skipped_in_use],
              "kept_unknown_run": [str(p) for p in report.kept_unknown_run],
              "kept_other_store": [{"file": f, "store_id": i, "store": u}
                                   for f, i, u in report.kept_other_store],
              "quarantined_points": report.quarantined_points,
              "quarantined": [str(p) for p in report.quarantined]})  # fmt: skip
    # Not everything reached the store: say so in the exit code too.
    return 1 if report.kept_unknown_run or report.quarantined_points or report.kept_other_store else 0


def _grant(args: argparse.Namespace) -> int:
    from scalerl.db import open_store, sharing

    store = open_store(args.url, create=False)
    try:
        if args.on_sweep is not None:
            new = sharing.grant_sweep(store, args.on_sweep, args.role)
            what = f"role {args.role} may change sweep {args.on_sweep}" + ("" if new else " (already)")
        elif args.owner is not None:
            sharing.set_owner(store, args.owner, args.role)
            what = f"sweep {args.owner} now belongs to role {args.role}"
        else:
            level: sharing.Level = "write" if args.write else "read"
            sharing.grant_access(store, args.role, level)
            what = f"role {args.role} has {level} access to the store"
    finally:
        store.close()
    print(f"store {store.url}: {what}")
    if args.json:
        emit({"store": store.url, "role": args.role, "granted": what})
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from scalerl.db import open_store, sharing

    store = open_store(args.url, create=False)
    try:
        if args.on_sweep is not None:
            gone = sharing.revoke_sweep(store, args.on_sweep, args.role)
            what = f"role {args.role} may no longer change sweep {args.on_sweep}"
            what += "" if gone else " (had no grant)"
        else:
            sharing.revoke_access(store, args.role)
            what = f"role {args.role} has no table access to the store any more"
    finally:
        store.close()
    print(f"store {store.url}: {what}")
    if args.json:
        emit({"store": store.url, "role": args.role, "revoked": what})
    return 0


def _access(args: argparse.Namespace) -> int:
    from scalerl.db import open_store, sharing

    store = open_store(args.url, readonly=True)
    try:
        who = sharing.access(store, args.sweep)
        mine = sharing.can_write(store, args.sweep)
        me = sharing.current_role(store)
    finally:
        store.close()
    granted = ", ".join(who.grantees) or "nobody"
    print(f"sweep {who.sweep}: owner {who.owner or '(none)'}; granted to {granted}")
    print(f"  role {me} {'may' if mine else 'may not'} change it (every role may read it)")
    if args.json:
        emit({"sweep": who.sweep, "owner": who.owner, "grantees": list(who.grantees), "role": me,
              "may_change": mine})  # fmt: skip
    return 0
