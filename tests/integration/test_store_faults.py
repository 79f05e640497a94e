"""Faults against the real databases: server down mid-write, two live attempts, kill -9."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text

from scalerl import db
from scalerl.harness.cli import main as cli_main
from tests.fixtures.postgres import PgServer

SWEEP = "faults"


def _setup(url: str, run_id: str = "r1") -> tuple[db.Store, int]:
    store = db.open_store(url)
    store.ensure_sweep(SWEEP, {})
    store.register_run(db.RunRecord(run_id, SWEEP, "baseline", 0, {}, "h"))
    return store, store.start_attempt(run_id)


def _points(store: db.Store) -> list[tuple[int, str, float, int]]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT step, metric, value, attempt FROM point ORDER BY metric, step")
        ).all()
    return [(int(r[0]), str(r[1]), float(r[2]), int(r[3])) for r in rows]


@pytest.mark.postgres
def test_postgres_stopped_mid_write_loses_and_duplicates_nothing(
    pg_server: PgServer, pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store, attempt = _setup(pg_url)
    w = store.writer("r1", attempt, batch_size=200, interval=0.02, spool=tmp_path / "spool")
    for step in range(0, 600):
        w.add(step, {"m": step / 1000}, {"flops": float(step)})
    w.flush()
    assert w.points_written == 600 and w.spool_path is None
    pg_server.stop()
    try:
        for step in range(600, 1200):
            w.add(step, {"m": step / 1000}, {"flops": float(step)})
        w.flush()  # acknowledged by the spool while the server is down
        assert w.spool_path is not None and w.points_spooled == 600
        assert w.spool_path.stat().st_size > 0
    finally:
        pg_server.start()
    for step in range(1200, 1500):
        w.add(step, {"m": step / 1000}, {"flops": float(step)})
    w.close()  # replays the spool (the background retry may have done it already)
    pts = _points(store)
    assert [p[0] for p in pts] == list(range(1500))  # every step once, in order
    assert all(p[2] == pytest.approx(p[0] / 1000, abs=0) for p in pts)
    assert list((tmp_path / "spool").glob("*.jsonl")) == []
    # The outage was logged, and the password never was.
    assert any("spooling" in r.getMessage() for r in caplog.records)
    assert pg_server.password is None or all(pg_server.password not in r.getMessage() for r in caplog.records)
    store.close()


@dataclass(frozen=True)
class Backend:
    url: str
    server: PgServer | None  # the PostgreSQL server behind url, when there is one


@pytest.fixture(params=["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite-file":
        return Backend(f"sqlite:///{tmp_path / 'faults.db'}", None)
    return Backend(str(request.getfixturevalue("pg_url")), request.getfixturevalue("pg_server"))


def test_two_attempts_writing_at_once_keep_only_the_newer(backend: Backend) -> None:
    store, a1 = _setup(backend.url)
    old = store.writer("r1", a1, batch_size=50, interval=0.01)
    for step in range(100):
        old.add(step, {"m": 1.0}, {"flops": float(step)})
    old.flush()
    a2 = store.start_attempt("r1", resume_step=99)  # requeued: resumes after step 99
    new = store.writer("r1", a2, batch_size=50, interval=0.01)

    def write(w: db.PointWriter, tag: float) -> None:
        for step in range(100, 600):
            w.add(step, {"m": tag}, {"flops": float(step)})
            if step % 50 == 0:
                time.sleep(0.001)  # let the two interleave
        w.flush()

    threads = [
        threading.Thread(target=write, args=(old, 1.0)),
        threading.Thread(target=write, args=(new, 2.0)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    old.close()
    new.close()
    pts = _points(store)
    assert len(pts) == 600
    assert {(p[2], p[3]) for p in pts if p[0] < 100} == {(1.0, a1)}
    assert {(p[2], p[3]) for p in pts if p[0] >= 100} == {(2.0, a2)}
    assert old.fenced is True and new.fenced is False
    ev = db.events(store, SWEEP)
    assert list(ev["kind"]).count("fenced") == 1
    store.close()


def _killable_writer(url: str, spool: str, acked_file: str, pause: Any) -> None:
    """Child: write forever; after each flush() returns, record the last acknowledged step."""
    store = db.open_store(url)
    info = store.get_run("r1")
    assert info is not None
    w = store.writer("r1", info.attempts, batch_size=100, interval=0.01, spool=spool)
    step = 0
    while True:
        for _ in range(100):
            w.add(step, {"m": step * 0.25, "n": 1.0}, {"flops": float(step)})
            step += 1
        w.flush()
        tmp = acked_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(step - 1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, acked_file)  # atomic: the parent never reads a half-written number
        if pause.is_set():
            time.sleep(0.05)


def _wait_acked(path: Path, at_least: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and int(path.read_text()) >= at_least:
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"the writer never acknowledged step {at_least}")


def test_sigkill_keeps_everything_acknowledged(backend: Backend, tmp_path: Path) -> None:
    """kill -9 a writer mid-stream; on PostgreSQL the server is down, so acks come from the spool."""
    url, server = backend.url, backend.server
    store, _ = _setup(url)
    spool, acked_file = tmp_path / "spool", tmp_path / "acked"
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["scalerl.db", __name__])
    pause = ctx.Event()
    proc = ctx.Process(target=_killable_writer, args=(url, str(spool), str(acked_file), pause))
    proc.start()
    stopped = False
    try:
        _wait_acked(acked_file, 1000)
        if server is not None:
            server.stop()
            stopped = True
            before = int(acked_file.read_text())
            _wait_acked(acked_file, before + 500)  # these acks are fsync'd spool lines
        acked = int(acked_file.read_text())
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)
        assert proc.exitcode == -signal.SIGKILL
    finally:
        if proc.is_alive():
            proc.kill()
        if server is not None and stopped:
            server.start()
    if store.dialect == "postgresql":
        assert len(list(spool.glob("*.jsonl"))) == 1
    assert cli_main(["db", "replay", "--spool", str(spool), url]) == 0
    pts = _points(store)
    steps = {(p[1], p[0]) for p in pts}
    missing = [s for s in range(acked + 1) if ("m", s) not in steps or ("n", s) not in steps]
    assert missing == []
    assert len(pts) == len(steps)  # nothing duplicated
    assert all(p[2] == (p[0] * 0.25 if p[1] == "m" else 1.0) for p in pts)
    assert list(spool.glob("*.jsonl")) == []
    store.close()


def test_fast_sqlite_reader_survives_interrupts_and_a_killed_helper(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ADBC helper (scalerl.db.fastread): ignores Ctrl-C (its own session, SIGINT ignored), comes back
    after kill -9 without a warning, and answers exactly what the Core path answers."""
    store = db.open_store(f"sqlite:///{tmp_path / 'fast.db'}")
    store.ensure_sweep(SWEEP, {})
    for i in range(5):  # enough runs for the read to be split into parallel parts
        store.register_run(db.RunRecord(f"r{i}", SWEEP, f"v{i % 2}", i, {}, "h"))
        with store.writer(f"r{i}", store.start_attempt(f"r{i}")) as w:
            for s in range(0, 40, 3):
                w.add(s, {"m": s / 7 + i, "loss": 1.0 / (s + 1)}, {"tokens": 64.0 * s})
    with store.writer("r1", store.start_attempt("r1", resume_step=-1)) as w:  # non-finite values
        w.add(0, {"m": float("inf")}, {"flops": 1.0})
        w.add(2, {"m": float("-inf")}, {})
        w.add(5, {"m": float("nan")}, {})
    reader = store.fast_reader()
    assert reader is not None
    caplog.set_level(logging.WARNING, logger="scalerl.db.queries")
    fast = db.curves(store, SWEEP)
    proc = reader._proc
    assert proc is not None and os.getsid(proc.pid) != os.getsid(0)  # its own session
    os.kill(proc.pid, signal.SIGINT)  # a Ctrl-C reaching it anyway is ignored
    time.sleep(0.3)
    assert proc.poll() is None
    assert db.curves(store, SWEEP).equals(fast)
    os.kill(proc.pid, signal.SIGKILL)  # killed (OOM, kernel shutdown): restarted once, silently
    proc.wait()
    only_m = db.curves(store, SWEEP, metric="m")
    assert set(only_m.metric) == {"m"} and len(db.curves(store, SWEEP, metric="absent")) == 0
    expected = fast[fast.metric == "m"].reset_index(drop=True).drop(columns="metric")
    pd.testing.assert_frame_equal(only_m.drop(columns="metric"), expected)
    assert reader._proc is not None and reader._proc.pid != proc.pid
    assert [r.getMessage() for r in caplog.records] == []
    r1 = fast[(fast.run_id == "r1") & (fast.metric == "m")]
    assert r1.value.tolist()[:2] == [float("inf"), float("-inf")] and np.isnan(r1.value.tolist()[2])
    assert (len(fast), r1.step.tolist(), r1.flops.tolist()[0]) == (4 * 2 * 14 + 3, [0, 2, 5], 1.0)
    monkeypatch.setattr(store, "fast_reader", lambda: None)  # the Core path, for comparison
    core = db.curves(store, SWEEP)
    pd.testing.assert_frame_equal(fast, core)
    store.close()
