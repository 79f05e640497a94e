"""What a sweep refuses before anything is submitted: a password bound for job files, and a
SQLite store behind Slurm (unless the profile is a single-node testbed's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.sweep import job_db_url, prepare
from tests.unit.execution.helpers import REPO, write_command_sweep

SECRET = "hunter2-secret"
PG = f"postgresql+psycopg://lab:{SECRET}@db.example:5432/runs"


def test_a_password_in_db_is_refused_and_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALERL_DB_URL", raising=False)
    with pytest.raises(ConfigError) as info:
        job_db_url(PG)
    msg = str(info.value)
    assert SECRET not in msg and "lab:***@db.example" in msg
    assert "SCALERL_DB_URL" in msg and ".pgpass" in msg


def test_the_same_url_from_the_environment_reaches_jobs_through_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALERL_DB_URL", PG)
    assert job_db_url(PG) is None  # jobs inherit $SCALERL_DB_URL; no file holds the password
    sweep = write_command_sweep(tmp_path, executor="local")
    prepared = prepare(sweep, [], executor="local", profile=None, db_url=PG, state_dir=tmp_path / "st")
    assert prepared.specs and all(SECRET not in s.to_json() for s in prepared.specs)
    assert (
        job_db_url("postgresql+psycopg://lab@db.example/runs") == "postgresql+psycopg://lab@db.example/runs"
    )


def test_slurm_refuses_a_sqlite_store_unless_the_profile_allows_it(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, executor="slurm")
    url = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(ConfigError) as info:
        prepare(sweep, [], executor="slurm", profile=None, db_url=url, state_dir=tmp_path / "st")
    msg = str(info.value)
    assert "cannot use a SQLite store" in msg and "postgresql+psycopg://" in msg and "allow_sqlite" in msg
    testbed = str(REPO / "slurm" / "profiles" / "testbed.yaml")  # allow_sqlite: true (one node)
    prepared = prepare(sweep, [], executor="slurm", profile=testbed, db_url=url, state_dir=tmp_path / "st")
    assert len(prepared.specs) == 2


def test_a_run_whose_points_the_store_refused_ends_failed_naming_the_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store breaks mid-run (here: every point write fails, as after a truncated file): the
    trainer still reaches its budget, but the run must end failed, with the spool's path."""
    from scalerl import db
    from scalerl.db.errors import StoreUnavailableError
    from scalerl.db.store import Store
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.execution.job import execute

    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_command_sweep(tmp_path, steps=10, executor="debug")
    prepared = prepare(sweep, [], executor="local", profile=None, db_url=url, state_dir=tmp_path / "st")
    store = db.open_store(url)
    from scalerl.harness.execution.submit import register

    register(store, "cmd", {}, prepared.planned)
    spec = prepared.specs[0]

    def broken(self: Store, *args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("database disk image is malformed")

    monkeypatch.setattr(Store, "write_points", broken)
    import threading

    with pytest.raises(ExecutionError) as info:
        execute(spec, executor="local", stop=threading.Event())
    msg = str(info.value)
    assert "did not take 2 point(s)" in msg and "scalerl db replay --spool" in msg
    spool = Path(msg.split("kept in ")[1].split(" (fix")[0])
    assert spool.is_file()
    monkeypatch.undo()
    run = db.open_store(url).get_run(spec.run_id)
    assert run is not None and run.status == "failed" and str(spool) in (run.error or "")
