"""Issue 26, second hostile pass, on MLflow sources on a database server: an unreachable server is
a prompt ImportFormatError (MLflow alone retries for minutes, then raises SQLAlchemy's error raw),
its password never shown; and a reachable database that is not an MLflow store (our own store on
PostgreSQL) is refused before MLflow's client could run its migrations in it (sources are read-only)."""

from __future__ import annotations

import time

import pytest
import sqlalchemy

from scalerl import db
from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.mlflow_runs import read_mlflow

SECRET = "hunter2-secret"


def test_an_unreachable_server_fails_at_once_without_its_password() -> None:
    pytest.importorskip("mlflow")
    started = time.monotonic()
    with pytest.raises(ImportFormatError) as info:
        read_mlflow(f"postgresql://lab:{SECRET}@127.0.0.1:1/mlflow", "e")
    msg = str(info.value)
    assert time.monotonic() - started < 15
    assert "cannot open the MLflow tracking database: connection failed" in msg
    assert SECRET not in msg and "lab:***@" in msg


def test_our_store_on_postgres_is_refused_and_left_unchanged(pg_url: str) -> None:
    pytest.importorskip("mlflow")
    db.open_store(pg_url).close()
    engine = sqlalchemy.create_engine(pg_url)
    try:
        with engine.connect() as con:
            before = sorted(sqlalchemy.inspect(con).get_table_names())
        with pytest.raises(
            ImportFormatError, match=r"not an MLflow tracking store \(it is a scalerl store\)"
        ):
            read_mlflow(pg_url, "e")
        with engine.connect() as con:
            assert sorted(sqlalchemy.inspect(con).get_table_names()) == before
    finally:
        engine.dispose()
