"""Issue 40: one PostgreSQL store shared by three real roles, the rules enforced by the database.

``alice`` and ``bob`` may write (``scalerl db grant ROLE --write``), ``carol`` may only read
(``--read``: SELECT). alice's sweep is hers: carol reads it and fits it without saving; bob can
neither cancel, rerun, extend nor import into it, not through scalerl and not with plain SQL,
until alice grants it to him; only alice grants. The store's administrator is the fixture's
superuser, who created the store (and so owns its tables).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from scalerl import db
from scalerl.db import RunRecord, queries, sharing
from scalerl.harness.cli import main
from tests.fixtures.postgres import PgServer

pytestmark = pytest.mark.postgres


@dataclass(frozen=True)
class Lab:
    admin: str
    alice: str
    bob: str
    carol: str
    names: dict[str, str]


def _connect(url: str) -> Any:
    u = make_url(url)
    return psycopg.connect(
        host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database, autocommit=True
    )


@pytest.fixture
def lab(pg_server: PgServer, pg_url: str) -> Iterator[Lab]:
    tag = uuid.uuid4().hex[:6]
    names = {who: f"{who}_{tag}" for who in ("alice", "bob", "carol")}
    with _connect(pg_url) as conn:
        for name in names.values():
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'pw-{name}'")
    db.open_store(pg_url).close()  # the administrator creates the store: it owns the tables
    for who, level in (("alice", "--write"), ("bob", "--write"), ("carol", "--read")):
        assert main(["db", "grant", names[who], pg_url, level]) == 0
    base = make_url(pg_url)
    urls = {
        who: base.set(username=name, password=f"pw-{name}").render_as_string(hide_password=False)
        for who, name in names.items()
    }
    try:
        yield Lab(pg_url, urls["alice"], urls["bob"], urls["carol"], names)
    finally:
        pg_server.drop_database(pg_url)
        server = make_url(pg_url).set(database="postgres").render_as_string(hide_password=False)
        with _connect(server) as conn:
            for name in names.values():
                conn.execute(f"DROP ROLE IF EXISTS {name}")


def _alices_sweep(url: str) -> list[str]:
    """alice's sweep: a baseline and one variant, 3 seeds each, curves that rise and turn, every
    run attached and still running (so a cancel has something to end)."""
    store = db.open_store(url)
    ids = []
    try:
        store.ensure_sweep("hers", {"source": "attach", "loo": {"baseline_name": "baseline"}})
        for variant, knob, ceiling in (("baseline", None, 0.6), ("loss=dapo", "loss", 0.5)):
            for seed in range(3):
                rid = f"{variant[:4]}{seed}-s{seed}"
                store.register_run(
                    RunRecord(rid, "hers", variant, seed, {"v": variant}, "h", knob=knob,
                              alternative="dapo" if knob else None)
                )  # fmt: skip
                attempt = store.start_attempt(rid, executor="attach", host="elsewhere")
                with store.writer(rid, attempt) as w:
                    for step in range(1, 41):
                        c = step * 1e15
                        value = 0.1 + (ceiling - 0.1) / (1 + (20e15 / c) ** 1.5) + 0.003 * ((seed + step) % 3)
                        w.add(step, {"val/pass_rate": value}, {"flops": c})
                ids.append(rid)
    finally:
        store.close()
    return ids


def _statuses(url: str) -> dict[str, str]:
    store = db.open_store(url, readonly=True)
    try:
        return dict(zip(*(queries.runs(store, "hers")[c] for c in ("run_id", "status")), strict=True))
    finally:
        store.close()


def test_three_roles_read_everything_and_change_only_what_they_own_or_are_granted(
    lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _alices_sweep(lab.alice)
    alice, bob, carol = (lab.names[w] for w in ("alice", "bob", "carol"))
    admin = db.open_store(lab.admin)
    assert sharing.access(admin, "hers") == sharing.SweepAccess("hers", alice, ())
    admin.close()

    # carol (SELECT only) reads it, and fits it without saving (issue 40: this exited 4 for a
    # reader granted SELECT on the data tables alone, without the schema's version table).
    with _connect(lab.admin) as conn:
        conn.execute(f"REVOKE SELECT ON scalerl_version, scalerl_meta FROM {carol}")
    capsys.readouterr()
    assert main(["fit", "hers", "--db", lab.carol, "--no-save", "--boot", "10", "--axis", "flops"]) == 0
    assert "fits and verdicts not saved (--no-save)" in capsys.readouterr().out
    assert main(["fit", "hers", "--db", lab.carol, "--boot", "10", "--axis", "flops"]) == 0
    assert "not saved" in capsys.readouterr().out  # her save is refused by the database, said so
    assert main(["status", "hers", "--db", lab.carol]) == 0
    reader = db.open_store(lab.carol)
    with pytest.raises(db.StorePermissionError):
        reader.register_run(RunRecord("x-s0", "hers", "baseline", 9, {}, "h"))
    reader.close()

    # bob (a writer, not the owner) can change none of it: cancel, rerun, extend, import.
    before = _statuses(lab.admin)
    assert set(before.values()) == {"running"}
    capsys.readouterr()
    assert main(["cancel", "hers", "--db", lab.bob]) == 4
    err = capsys.readouterr().err
    assert f"role {bob!r} may not change sweep 'hers'" in err and f"belongs to {alice}" in err
    assert f"scalerl db grant {bob} --sweep hers" in err
    intruder = db.open_store(lab.bob)
    with pytest.raises(db.StorePermissionError):  # a rerun or an --extend registers into it first
        intruder.ensure_sweep("hers", {})
    with pytest.raises(db.StorePermissionError):  # a new attempt of one of her runs
        intruder.start_attempt(ids[0], executor="local")
    with pytest.raises(db.StorePermissionError):
        intruder.finish_run(ids[0], 1, "cancelled")
    row = (99, "val/pass_rate", 0.9, None, 1.0, None, None, None, None, None)
    assert intruder.write_points(ids[0], 1, [row]) == "denied"
    csv = tmp_path / "runs.csv"
    csv.write_text("step,val/pass_rate\n1,0.1\n2,0.2\n")
    capsys.readouterr()
    assert main(["import", str(csv), "--sweep", "hers", "--db", lab.bob]) == 4
    assert "may not change sweep 'hers'" in capsys.readouterr().err
    intruder.close()
    # ... nor with plain SQL: row-level security, not the client's manners.
    with _connect(lab.bob) as conn:
        assert conn.execute("UPDATE run SET status = 'cancelled' WHERE first_sweep = 'hers'").rowcount == 0
        assert conn.execute("DELETE FROM point WHERE run_id = %s", (ids[0],)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO point (run_id, step, metric, value, attempt) VALUES (%s, 999, 'm', 1, 1)",
                (ids[0],),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # only the owner grants
            conn.execute("INSERT INTO sweep_grant (sweep, grantee) VALUES ('hers', %s)", (bob,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor sets an owner
            conn.execute("UPDATE sweep SET owner = %s WHERE name = 'hers'", (bob,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor makes a sweep in her name
            conn.execute(
                "INSERT INTO sweep (name, spec, created_at, owner) VALUES ('fake', '{}', now(), %s)", (alice,)
            )
    assert _statuses(lab.admin) == before
    with _connect(lab.carol) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("UPDATE run SET status = 'cancelled'")
    # bob's own sweep is his.
    own = db.open_store(lab.bob)
    own.ensure_sweep("his", {})
    own.register_run(RunRecord("b0-s0", "his", "baseline", 0, {"b": 1}, "h"))
    own.close()

    # alice grants bob her sweep: now his cancel ends her runs; she takes it back.
    assert main(["db", "grant", bob, lab.bob, "--sweep", "hers"]) == 4  # bob cannot grant himself
    assert main(["db", "grant", bob, lab.alice, "--sweep", "hers"]) == 0
    assert main(["cancel", "hers", "--db", lab.bob]) == 0
    assert set(_statuses(lab.admin).values()) == {"cancelled"}
    assert main(["db", "revoke", bob, lab.alice, "--sweep", "hers"]) == 0
    assert main(["cancel", "hers", "--db", lab.bob]) == 4
    capsys.readouterr()
    assert main(["db", "access", "hers", lab.carol]) == 0
    assert f"owner {alice}; granted to nobody" in capsys.readouterr().out


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_registering_a_run_another_process_just_registered_is_no_error(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Was: several processes attaching one new run at once on PostgreSQL: each read that the run
    (and its sweep) did not exist, each inserted, and all but one died on a duplicate key. Here
    the second registration reads before the first one's commit (the read finds nothing) and
    inserts after it, deterministically."""
    from scalerl.db import store as store_module

    url = f"sqlite:///{tmp_path / 's.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    store = db.open_store(url)
    record = RunRecord("r-s0", "new-sweep", "baseline", 0, {"lr": 1}, "h")
    assert store.register_run(record) is True  # the first process
    monkeypatch.setattr(store_module, "_existing", lambda *_a, **_k: set())  # the second one's read
    assert store.register_run(record) is False  # not new, and no IntegrityError
    assert store.register_runs([record, RunRecord("r-s1", "new-sweep", "baseline", 1, {"lr": 1}, "h")]) == 1
    assert sorted(queries.runs(store, "new-sweep")["run_id"]) == ["r-s0", "r-s1"]
