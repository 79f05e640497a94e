"""Schema versions on real databases: old stores are refused with the exact command, upgraded
by it with their data intact; empty ones are created; passwords never appear in messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from scalerl import db
from scalerl.db import schema
from scalerl.db.engine import make_engine, resolve_url
from scalerl.harness.cli import main as cli_main
from tests.fixtures.postgres import PgServer


@pytest.fixture(params=["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path / 'old.db'}"
    return str(request.getfixturevalue("pg_url"))


def test_an_old_store_is_refused_with_the_command_then_upgraded_with_its_data(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0001") == (None, "0001")
    with bundle.engine.begin() as conn:  # a store written by the 0001 code
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('s', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(
            text(
                "INSERT INTO run (run_id, sweep, variant, seed, config, config_hash, status, attempts,"
                " created_at) VALUES ('r', 's', 'baseline', 0, '{}', 'h', 'completed', 1, CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(
            text("INSERT INTO point (run_id, step, metric, value, attempt) VALUES ('r', 3, 'm', 0.5, 1)")
        )
    bundle.engine.dispose()
    with pytest.raises(db.SchemaOutOfDateError) as info:
        db.open_store(url)
    msg = str(info.value)
    shown = resolve_url(url).render_as_string(hide_password=True)
    assert f"is at schema revision 0001, this code needs {schema.head_revision()}" in msg
    assert f"run `scalerl db upgrade '{shown}'`" in msg
    password = resolve_url(url).password
    assert password is None or str(password) not in msg
    # A read-only open (scalerl ui, fit --no-save) names the same command: on SQLite the plain
    # file URL, not the engine's read-only URI form (which would open it read-only again).
    with pytest.raises(db.SchemaOutOfDateError) as ro_info:
        db.open_store(url, readonly=True)
    command = str(ro_info.value).split("run `", 1)[1].split("`", 1)[0]
    assert command == f"scalerl db upgrade '{shown}'" and "mode=ro" not in command
    assert cli_main(["db", "current", url]) == 1
    assert cli_main(["db", "upgrade", url]) == 0
    assert f"upgraded 0001 -> {schema.head_revision()}" in capsys.readouterr().out
    assert cli_main(["db", "current", url]) == 0
    store = db.open_store(url)
    curves = db.curves(store, "s")
    assert (list(curves.step), list(curves.value), list(curves.variant)) == ([3], [0.5], ["baseline"])
    store.close()


def test_upgrading_from_0002_gives_every_existing_run_its_sweep_membership(url: str) -> None:
    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0002") == (None, "0002")
    with bundle.engine.begin() as conn:  # a store written by the 0002 code: two sweeps
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('a', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('b', '{}', CURRENT_TIMESTAMP)"))
        for run_id, sweep, variant, knob in (("r1", "a", "baseline", None), ("r2", "b", "grid-lr", "lr")):
            conn.execute(
                text(
                    "INSERT INTO run (run_id, sweep, variant, knob, seed, config, config_hash, status,"
                    " attempts, created_at) VALUES (:r, :s, :v, :k, 0, '{}', 'h', 'completed', 1,"
                    " CURRENT_TIMESTAMP)"
                ),
                {"r": run_id, "s": sweep, "v": variant, "k": knob},
            )
            conn.execute(
                text("INSERT INTO point (run_id, step, metric, value, attempt) VALUES (:r, 7, 'm', 0.25, 1)"),
                {"r": run_id},
            )
    assert schema.upgrade(bundle, "head") == ("0002", schema.head_revision())
    with bundle.engine.connect() as conn:
        members = conn.execute(
            text("SELECT sweep, run_id, variant, knob FROM sweep_run ORDER BY sweep")
        ).all()
        view = conn.execute(text("SELECT sweep, run_id, variant, value FROM v_curves ORDER BY sweep")).all()
    assert [tuple(r) for r in members] == [("a", "r1", "baseline", None), ("b", "r2", "grid-lr", "lr")]
    assert [tuple(r) for r in view] == [("a", "r1", "baseline", 0.25), ("b", "r2", "grid-lr", 0.25)]
    bundle.engine.dispose()
    store = db.open_store(url)
    # The old run joins a second sweep; both see it, each under its own name.
    assert store.register_run(db.RunRecord("r1", "b", "grid-base", 0, {}, "h")) is False
    assert db.curves(store, "b").set_index("run_id")["variant"].to_dict() == {
        "r1": "grid-base",
        "r2": "grid-lr",
    }
    assert db.curves(store, "a")["variant"].tolist() == ["baseline"]
    store.close()
    from alembic import command

    engine = make_engine(resolve_url(url)).engine
    with engine.begin() as conn:  # and 0003 downgrades cleanly (the 0002 views come back)
        command.downgrade(schema.alembic_config(conn), "0002")
        assert schema.current_revision(conn) == "0002"
        assert conn.execute(text("SELECT COUNT(*) FROM v_curves")).scalar_one() == 2
    engine.dispose()


def test_upgrading_from_0003_keeps_points_with_n_unknown_and_adds_the_power_columns(url: str) -> None:
    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0003") == (None, "0003")
    with bundle.engine.begin() as conn:  # a store written by the 0003 code: a point and a verdict
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('s', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(
            text(
                "INSERT INTO run (run_id, sweep, variant, seed, config, config_hash, status, attempts,"
                " created_at) VALUES ('r', 's', 'baseline', 0, '{}', 'h', 'completed', 1, CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(text("INSERT INTO sweep_run (sweep, run_id, variant) VALUES ('s', 'r', 'baseline')"))
        conn.execute(
            text("INSERT INTO point (run_id, step, metric, value, attempt) VALUES ('r', 4, 'm', 0.75, 1)")
        )
        conn.execute(
            text(
                "INSERT INTO verdict (sweep, variant, metric, axis, verdict, d_a, created_at)"
                " VALUES ('s', 'v', 'm', 'flops', 'no-effect', 0.01, CURRENT_TIMESTAMP)"
            )
        )
    assert schema.upgrade(bundle, "head") == ("0003", schema.head_revision())
    with bundle.engine.connect() as conn:
        assert [tuple(r) for r in conn.execute(text("SELECT step, value, n FROM v_curves"))] == [
            (4, 0.75, None)
        ]
    bundle.engine.dispose()
    store = db.open_store(url)
    curves = db.curves(store, "s")
    assert curves["value"].tolist() == [0.75] and curves["n"].isna().all()
    verdicts = db.verdicts(store, "s")
    assert verdicts["d_a"].tolist() == [0.01]
    assert verdicts["mde_a"].isna().all() and verdicts["mde_b"].isna().all()
    with store.writer("r", 1) as w:  # the new column takes writes at once
        w.add(5, {"m": 0.5}, {}, n={"m": 256})
    assert db.curves(store, "s")["n"].tolist()[-1] == 256.0
    store.close()
    from alembic import command

    engine = make_engine(resolve_url(url)).engine
    with engine.begin() as conn:  # and 0004 downgrades cleanly, points kept
        command.downgrade(schema.alembic_config(conn), "0003")
        assert schema.current_revision(conn) == "0003"
        assert conn.execute(text("SELECT COUNT(*) FROM v_curves")).scalar_one() == 2
        assert conn.execute(text("SELECT COUNT(*) FROM v_latest")).scalar_one() == 1
    engine.dispose()


def test_upgrading_from_0004_keys_fits_by_metric_and_axis_and_renames_run_sweep(url: str) -> None:
    """0005 (issue 15 item 11) on a store with data: fits and verdicts keep their metric and
    axis (the new replace key), ``run.sweep`` becomes ``first_sweep`` with its values, ``v_runs``
    lists every membership; downgrade restores 0004 with the data."""
    from alembic import command

    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0004") == (None, "0004")
    with bundle.engine.begin() as conn:  # a store written by the 0004 code: a run in two sweeps
        for name in ("a", "b"):
            conn.execute(
                text(
                    f"INSERT INTO sweep (name, spec, created_at) VALUES ('{name}', '{{}}', CURRENT_TIMESTAMP)"
                )
            )
        conn.execute(
            text(
                "INSERT INTO run (run_id, sweep, variant, seed, config, config_hash, status, attempts,"
                " created_at) VALUES ('r', 'a', 'baseline', 0, '{}', 'h', 'completed', 1, CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sweep_run (sweep, run_id, variant)"
                " VALUES ('a', 'r', 'baseline'), ('b', 'r', 'grid-1')"
            )
        )
        for axis, a in (("flops", 0.6), ("step", 0.7)):
            conn.execute(
                text(
                    "INSERT INTO fit (sweep, variant, metric, axis, a, status, created_at)"
                    f" VALUES ('a', 'baseline', 'm', '{axis}', {a}, 'ok', CURRENT_TIMESTAMP)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO verdict (sweep, variant, metric, axis, verdict, d_a, created_at)"
                    f" VALUES ('a', 'v', 'm', '{axis}', 'no-effect', {a}, CURRENT_TIMESTAMP)"
                )
            )
    assert schema.upgrade(bundle, "head") == ("0004", schema.head_revision())
    with bundle.engine.connect() as conn:
        assert conn.execute(text("SELECT first_sweep FROM run")).scalar_one() == "a"
        rows = conn.execute(text("SELECT sweep, run_id, variant, first_sweep FROM v_runs ORDER BY sweep"))
        assert [tuple(r) for r in rows] == [("a", "r", "baseline", "a"), ("b", "r", "grid-1", "a")]
    bundle.engine.dispose()
    store = db.open_store(url)
    assert sorted(db.fits(store, "a")["axis"]) == ["flops", "step"]
    refit = [{"variant": "baseline", "a": 0.65, "status": "ok"}]
    store.replace_fits("a", refit, metric="m", axis="flops")  # the step fit survives a flops refit
    store.replace_verdicts("a", [], metric="m", axis="flops")
    assert sorted(zip(db.fits(store, "a")["axis"], db.fits(store, "a")["a"], strict=True)) == [
        ("flops", 0.65), ("step", 0.7)
    ]  # fmt: skip
    assert db.verdicts(store, "a")["axis"].tolist() == ["step"]
    assert db.runs(store, "b")["run_id"].tolist() == ["r"]
    assert store.get_run("r").sweep == "a"  # type: ignore[union-attr]
    store.close()

    engine = make_engine(resolve_url(url)).engine
    with engine.begin() as conn:  # and 0005 downgrades cleanly, data kept
        command.downgrade(schema.alembic_config(conn), "0004")
        assert schema.current_revision(conn) == "0004"
        assert conn.execute(text("SELECT sweep FROM run WHERE run_id = 'r'")).scalar_one() == "a"
        assert conn.execute(text("SELECT COUNT(*) FROM fit")).scalar_one() == 2
        assert conn.execute(text("SELECT COUNT(*) FROM v_curves")).scalar_one() == 0
        names = {ix["name"] for ix in inspect(conn).get_indexes("fit")}
        assert "ix_fit_sweep" in names and "ix_fit_key" not in names
        assert "v_runs" not in inspect(conn).get_view_names()
    engine.dispose()


def test_upgrading_from_0005_adds_run_provenance_as_unknown_and_downgrades(url: str) -> None:
    """0006 (issue 25 item 4) on a store with data: old runs get provenance NULL ("unknown"),
    ``v_runs`` shows the column, a new attempt records its code; downgrade restores 0005."""
    from alembic import command

    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0005") == (None, "0005")
    with bundle.engine.begin() as conn:  # a store written by the 0005 code
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('s', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(
            text(
                "INSERT INTO run (run_id, first_sweep, variant, seed, config, config_hash, status, attempts,"
                " created_at) VALUES ('r', 's', 'baseline', 0, '{}', 'h', 'completed', 1, CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(text("INSERT INTO sweep_run (sweep, run_id, variant) VALUES ('s', 'r', 'baseline')"))
        conn.execute(
            text("INSERT INTO point (run_id, step, metric, value, attempt) VALUES ('r', 2, 'm', 0.5, 1)")
        )
    assert schema.upgrade(bundle, "head") == ("0005", schema.head_revision())
    with bundle.engine.connect() as conn:
        assert [tuple(r) for r in conn.execute(text("SELECT run_id, provenance FROM v_runs"))] == [
            ("r", None)
        ]
    bundle.engine.dispose()
    store = db.open_store(url)
    assert store.get_run("r").provenance is None  # type: ignore[union-attr]
    assert db.runs(store, "s")["provenance"].tolist() == [None]
    code = {"repo": "/lab", "commit": "a" * 40, "dirty": False, "diff": None, "versions": {"torch": "2.5.1"}}
    assert store.start_attempt("r", provenance=code) == 2
    assert store.get_run("r").provenance == code  # type: ignore[union-attr]
    assert db.runs(store, "s")["provenance"].tolist() == [code]
    started = db.queries.events(store, run_id="r")
    assert started[started.kind == "started"]["detail"].iloc[-1]["provenance"] == code
    assert store.start_attempt("r") == 3  # no provenance given: the run's stays
    assert store.get_run("r").provenance == code  # type: ignore[union-attr]
    store.close()

    engine = make_engine(resolve_url(url)).engine
    with engine.begin() as conn:  # and 0006 downgrades cleanly, data kept
        command.downgrade(schema.alembic_config(conn), "0005")
        assert schema.current_revision(conn) == "0005"
        assert "provenance" not in {c["name"] for c in inspect(conn).get_columns("run")}
        rows = conn.execute(text("SELECT run_id, attempts, first_sweep FROM v_runs")).all()
        assert [tuple(r) for r in rows] == [("r", 3, "s")]
        assert conn.execute(text("SELECT COUNT(*) FROM v_curves")).scalar_one() == 1
    engine.dispose()


def test_upgrading_from_0006_adds_sharing_and_liveness_and_downgrades(url: str) -> None:
    """0007_sharing (issue 40) on a store with data: the old sweep belongs to the role that ran
    the migration (PostgreSQL; none on SQLite), old runs have no process (never judged lost), the
    store gets its id; a new sweep is owned by its creator; downgrade restores 0006."""
    from alembic import command

    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0006") == (None, "0006")
    with bundle.engine.begin() as conn:  # a store written by the 0006 code
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('s', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(
            text(
                "INSERT INTO run (run_id, first_sweep, variant, seed, config, config_hash, status, attempts,"
                " created_at) VALUES ('r', 's', 'baseline', 0, '{}', 'h', 'running', 1, CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(text("INSERT INTO sweep_run (sweep, run_id, variant) VALUES ('s', 'r', 'baseline')"))
    assert schema.upgrade(bundle, "head") == ("0006", schema.head_revision())
    bundle.engine.dispose()
    store = db.open_store(url)
    old = store.get_run("r")
    assert old is not None and (old.pid, old.pid_start, old.heartbeat_at) == (None, None, None)
    assert len(str(store.store_id)) == 36  # a UUID
    store.ensure_sweep("new", {})
    with store.engine.connect() as conn:
        owners = dict(conn.execute(text("SELECT name, owner FROM sweep")).all())
    expected = make_url(url).username if store.dialect == "postgresql" else None
    assert owners == {"s": expected, "new": expected}
    store.close()

    engine = make_engine(resolve_url(url)).engine
    with engine.begin() as conn:  # and 0007 downgrades cleanly, data kept
        command.downgrade(schema.alembic_config(conn), "0006")
        assert schema.current_revision(conn) == "0006"
        assert "pid" not in {c["name"] for c in inspect(conn).get_columns("run")}
        assert "owner" not in {c["name"] for c in inspect(conn).get_columns("sweep")}
        assert not {"sweep_grant", "scalerl_meta"} & set(inspect(conn).get_table_names())
        assert [tuple(r) for r in conn.execute(text("SELECT run_id, status FROM v_runs"))] == [
            ("r", "running")
        ]
    engine.dispose()


def test_upgrading_from_0007_adds_the_verdict_claims_as_null_and_downgrades(url: str) -> None:
    """0008 (issue 36) on a store with a verdict: the old verdict reads back with NULL
    probabilities, a new one keeps its claims; downgrade restores 0007_sharing with the data."""
    from alembic import command

    bundle = make_engine(resolve_url(url))
    assert schema.upgrade(bundle, "0007_sharing") == (None, "0007_sharing")
    with bundle.engine.begin() as conn:  # a store written by the 0007 code
        conn.execute(text("INSERT INTO sweep (name, spec, created_at) VALUES ('s', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(
            text(
                "INSERT INTO verdict (sweep, variant, metric, axis, verdict, d_a, created_at)"
                " VALUES ('s', 'v', 'm', 'flops', 'undecided', 0.01, CURRENT_TIMESTAMP)"
            )
        )
    assert schema.upgrade(bundle, "head") == ("0007_sharing", schema.head_revision())
    bundle.engine.dispose()
    store = db.open_store(url)
    old = db.verdicts(store, "s")
    assert (
        old["d_a"].tolist() == [0.01]
        and old["p_ceiling"].isna().all()
        and old["efficiency"].tolist() == [None]
    )
    row = {
        "variant": "w",
        "verdict": "asymptote-mover",
        "d_a": 0.1,
        "p_ceiling": 0.97,
        "efficiency": "differs",
    }
    store.replace_verdicts("s", [row], metric="m", axis="step")
    new = db.verdicts(store, "s", axis="step")
    assert new["p_ceiling"].tolist() == [0.97] and new["efficiency"].tolist() == ["differs"]
    store.close()

    engine = make_engine(resolve_url(url)).engine
    with engine.begin() as conn:  # and 0008 downgrades cleanly, data kept
        command.downgrade(schema.alembic_config(conn), "0007_sharing")
        assert schema.current_revision(conn) == "0007_sharing"
        assert "p_ceiling" not in {c["name"] for c in inspect(conn).get_columns("verdict")}
        assert conn.execute(text("SELECT COUNT(*) FROM verdict")).scalar_one() == 2
    engine.dispose()


def test_an_empty_database_is_created_and_a_foreign_one_refused(url: str) -> None:
    store = db.open_store(url)  # empty: upgraded on open
    with store.engine.connect() as conn:
        assert schema.current_revision(conn) == schema.head_revision()
        conn.execute(text(f"DROP TABLE {schema.VERSION_TABLE}"))
        conn.commit()
    store.close()
    with pytest.raises(db.SchemaOutOfDateError, match="no schema version: it is not a scalerl store"):
        db.open_store(url)


@pytest.mark.postgres
def test_unreachable_server_error_names_the_url_without_its_password(pg_server: PgServer) -> None:
    bad = resolve_url(pg_server.url).set(port=1, password="hunter2-secret")
    with pytest.raises(db.StoreUnavailableError) as info:
        db.open_store(bad.render_as_string(hide_password=False))
    msg = str(info.value)
    assert "hunter2-secret" not in msg
    assert "postgresql+psycopg://postgres:***@127.0.0.1:1/postgres" in msg
    assert "the database is unreachable" in msg and "(fix:" in msg


def test_plain_postgresql_urls_use_psycopg3_and_bad_urls_are_explained() -> None:
    assert resolve_url("postgresql://u:p@h/d").drivername == "postgresql+psycopg"
    assert resolve_url("postgres://u:p@h/d").drivername == "postgresql+psycopg"
    with pytest.raises(db.StoreError, match="backend 'mysql' is not supported"):
        resolve_url("mysql://u:secret@h/d")
    with pytest.raises(db.StoreError, match="is not a valid URL") as info:
        resolve_url("::not a url::")
    assert "secret" not in str(info.value)


def test_a_store_versioned_in_alembic_version_is_adopted_and_an_optuna_study_lives_beside_it(
    url: str,
) -> None:
    """Stores made before the version table moved keep opening (their row moves to ours), and an
    Optuna RDBStorage at the same URL keeps its own alembic_version without either side
    mistaking the other's revision for its own."""
    import optuna

    store = db.open_store(url)
    store.ensure_sweep("s", {})
    store.close()
    bundle = make_engine(resolve_url(url))
    with bundle.engine.begin() as conn:  # what 0001-0004 stores looked like: alembic's default table
        conn.execute(text(f"ALTER TABLE {schema.VERSION_TABLE} RENAME TO {schema.LEGACY_VERSION_TABLE}"))
    bundle.engine.dispose()

    store = db.open_store(url)  # adopted: no SchemaOutOfDateError
    with store.engine.connect() as conn:
        assert schema.current_revision(conn) == schema.head_revision()
    store.close()

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(study_name="beside", storage=storage, direction="maximize")
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=3)
    storage.engine.dispose()

    store = db.open_store(url)  # Optuna's tables and its alembic_version do not bother the store
    assert db.queries.sweeps(store)["name"].tolist() == ["s"]
    with store.engine.connect() as conn:
        assert schema.current_revision(conn) == schema.head_revision()
        optuna_rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    store.close()
    assert optuna_rev not in {"0001", "0002", "0003", "0004"}
    again = optuna.load_study(study_name="beside", storage=url)  # and the study still opens
    assert len(again.trials) == 3


def test_a_database_holding_only_an_optuna_study_counts_as_empty(tmp_path: Path) -> None:
    import optuna

    url = f"sqlite:///{tmp_path / 'optuna-first.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="first", storage=url)
    store = db.open_store(url)  # created beside it rather than refused as foreign
    with store.engine.connect() as conn:
        assert schema.current_revision(conn) == schema.head_revision()
    store.close()
    assert optuna.load_study(study_name="first", storage=url).study_name == "first"
