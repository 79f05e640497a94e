"""One contract for every store backend: SQLite in memory, a SQLite file, real PostgreSQL.

Each test runs unchanged against the three (the ``store`` fixture is parametrised).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import inspect, text

from scalerl import db
from scalerl.db.models import Sweep
from scalerl.db.spool import SpoolFile
from tests.fixtures.postgres import PgServer

SWEEP = "loo"


def _open(request: pytest.FixtureRequest, tmp_path: Path) -> db.Store:
    if request.param == "sqlite-memory":
        url = "sqlite://"
    elif request.param == "sqlite-file":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    return db.open_store(url, spool_dir=tmp_path / "spool")


@pytest.fixture(params=["sqlite-memory", "sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Store]:
    st = _open(request, tmp_path)
    yield st
    st.close()


@pytest.fixture(params=["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)])
def reopenable_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Store]:
    """The backends a second connection can open (an in-memory SQLite database lives in one connection)."""
    st = _open(request, tmp_path)
    yield st
    st.close()


def _register(store: db.Store, run_id: str = "r1", variant: str = "baseline", seed: int = 0) -> None:
    store.ensure_sweep(SWEEP, {"design": "loo"})
    store.register_run(
        db.RunRecord(run_id, SWEEP, variant, seed, {"lr": 1e-6}, "h" * 16, knob="loss", alternative="dapo")
    )


def _write(store: db.Store, run_id: str, attempt: int, steps: range, scale: float = 1.0) -> None:
    with store.writer(run_id, attempt) as w:
        for s in steps:
            w.add(
                s,
                {"val/pass_rate": scale * s / 1000, "train/reward": scale * 0.5},
                {
                    "flops": s * 1e12,
                    "gpu_hours": s / 10,
                    "tokens": 100.0 * s,
                    "samples": 8.0 * s,
                    "wall_s": 0.25 * s,
                },
            )


def test_register_run_is_idempotent_and_get_run_returns_frozen_info(store: db.Store) -> None:
    store.ensure_sweep(SWEEP, {"design": "loo"})
    store.ensure_sweep(SWEEP, {"design": "other"})  # spec kept from the first call
    rec = db.RunRecord("r1", SWEEP, "loo-dapo", 3, {"lr": 1e-6, "k": [1, 2]}, "abc", "loss", "dapo")
    assert store.register_run(rec) is True
    assert store.register_run(rec) is False
    info = store.get_run("r1")
    assert info is not None
    assert (info.variant, info.knob, info.alternative, info.seed) == ("loo-dapo", "loss", "dapo", 3)
    assert info.config == {"lr": 1e-6, "k": [1, 2]}
    assert (info.status, info.attempts, info.config_hash) == ("pending", 0, "abc")
    assert info.created_at.utcoffset() == dt.timedelta(0)  # UTC-aware on every backend
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.status = "x"  # type: ignore[misc]
    assert store.get_run("nope") is None
    sw = db.sweeps(store)
    assert list(sw["name"]) == [SWEEP]
    assert sw["spec"][0] == {"design": "loo"}
    assert int(sw["n_runs"][0]) == 1


def test_start_attempt_bumps_the_counter_and_logs_started(store: db.Store) -> None:
    _register(store)
    store.set_job("r1", "slurm", "123_4")
    assert store.start_attempt("r1", host="node1") == 1
    assert store.start_attempt("r1", executor="slurm", job_id="124_4", host="node2") == 2
    info = store.get_run("r1")
    assert info is not None
    assert (info.attempts, info.status, info.executor, info.job_id, info.host) == (
        2,
        "running",
        "slurm",
        "124_4",
        "node2",
    )
    ev = db.events(store, SWEEP)
    assert list(ev["kind"]) == ["started", "started"]
    assert [d["attempt"] for d in ev["detail"]] == [1, 2]
    with pytest.raises(db.StoreError, match="'ghost' is not registered"):
        store.start_attempt("ghost")


def test_points_round_trip_with_every_column(store: db.Store) -> None:
    _register(store, "r1", "baseline", 0)
    _register(store, "r2", "loo-dapo", 1)
    _write(store, "r1", store.start_attempt("r1"), range(0, 50))
    _write(store, "r2", store.start_attempt("r2"), range(0, 20), scale=2.0)
    df = db.curves(store, SWEEP)
    assert list(df.columns) == [
        "run_id",
        "variant",
        "knob",
        "alternative",
        "seed",
        "step",
        "metric",
        "value",
        "n",
        "gpu_hours",
        "flops",
        "tokens",
        "samples",
        "wall_s",
    ]
    assert len(df) == 2 * 50 + 2 * 20
    assert df["n"].isna().all()  # no writer said how many samples: unknown, not 0
    row = df[(df.run_id == "r2") & (df.metric == "val/pass_rate") & (df.step == 7)].iloc[0]
    assert row.value == pytest.approx(2.0 * 7 / 1000, rel=0, abs=0)
    assert (row.variant, row.knob, row.alternative, row.seed) == ("loo-dapo", "loss", "dapo", 1)
    assert (row.flops, row.gpu_hours, row.tokens, row.samples, row.wall_s) == (7e12, 0.7, 700.0, 56.0, 1.75)
    one = db.curves(store, SWEEP, "train/reward")
    assert set(one.metric) == {"train/reward"} and len(one) == 70
    assert list(one[one.run_id == "r1"].step) == list(range(50))  # ordered by run, metric, step
    assert len(db.curves(store, SWEEP, run_ids=["r1"])) == 100
    runs = db.runs(store, SWEEP).set_index("run_id")
    assert (runs.loc["r1", "n_points"], runs.loc["r1", "last_step"]) == (100, 49)
    assert runs.loc["r2", "attempts"] == 1


def test_rewrites_are_idempotent_and_the_last_write_wins(store: db.Store) -> None:
    _register(store)
    a = store.start_attempt("r1")
    _write(store, "r1", a, range(10))
    _write(store, "r1", a, range(10))  # a replay of the same points: no duplicates
    _write(store, "r1", a, range(5), scale=3.0)  # same key, same attempt, new value: overwrites
    df = db.curves(store, SWEEP, "val/pass_rate").set_index("step")
    assert len(df) == 10
    assert df.loc[4, "value"] == pytest.approx(3 * 4 / 1000)
    assert df.loc[6, "value"] == pytest.approx(6 / 1000)


def test_a_superseded_attempt_is_fenced_and_its_late_points_dropped(store: db.Store) -> None:
    _register(store)
    a1 = store.start_attempt("r1")
    _write(store, "r1", a1, range(0, 30))
    a2 = store.start_attempt("r1", resume_step=19)  # the new attempt resumes from step 19
    assert a2 == a1 + 1
    assert set(db.curves(store, SWEEP).step) == set(range(20))  # steps > 19 deleted
    late = store.writer("r1", a1)
    late.add(25, {"val/pass_rate": 0.99}, {"flops": 1.0})
    late.add(26, {"val/pass_rate": 0.99}, {"flops": 1.0})
    late.flush()  # no exception reaches the caller
    assert late.fenced is True
    late.add(27, {"val/pass_rate": 0.99}, {})  # silently dropped
    late.close()
    _write(store, "r1", a2, range(20, 30), scale=2.0)
    df = db.curves(store, SWEEP, "val/pass_rate").set_index("step")
    assert df.loc[25, "value"] == pytest.approx(2 * 25 / 1000)
    assert len(df) == 30
    assert store.finish_run("r1", a1, "completed") is False
    assert store.finish_run("r1", a2, "completed") is True
    info = store.get_run("r1")
    assert info is not None and info.status == "completed" and info.ended_at is not None
    kinds = list(db.events(store, SWEEP)["kind"])
    assert kinds == ["started", "started", "fenced", "fenced", "completed"]
    with store.engine.connect() as conn:
        by_attempt = dict(conn.execute(text("SELECT attempt, COUNT(*) FROM point GROUP BY attempt")).all())
    assert by_attempt == {1: 40, 2: 20}


def test_non_finite_values_round_trip_and_bad_compute_is_rejected(store: db.Store) -> None:
    _register(store)
    w = store.writer("r1", store.start_attempt("r1"))
    w.add(0, {"a": math.nan, "b": math.inf, "c": -math.inf, "d": 0.25}, {"flops": 1.0})
    with pytest.raises(db.StoreError, match="compute flops=nan must be finite"):
        w.add(1, {"a": 1.0}, {"flops": math.nan})
    with pytest.raises(db.StoreError, match="compute unit 'gpu' is unknown"):
        w.add(1, {"a": 1.0}, {"gpu": 1.0})
    with pytest.raises(db.StoreError, match="step=-1"):
        w.add(-1, {"a": 1.0}, {})
    with pytest.raises(db.StoreError, match=r"step=1\.5 must be an int"):
        w.add(1.5, {"a": 1.0}, {})  # type: ignore[arg-type]
    w.add(np.int64(1), {"d": 0.5}, {"flops": 2.0})  # type: ignore[arg-type]  # numpy ints are steps
    w.close()
    df = db.curves(store, SWEEP).set_index("metric")
    assert df.loc[["a"], "value"].isna().all()
    assert df.loc["b", "value"] == math.inf and df.loc["c", "value"] == -math.inf
    assert list(df[df.index == "d"]["value"]) == [0.25, 0.5]
    with store.engine.connect() as conn:
        flags = dict(conn.execute(text("SELECT metric, nonfinite FROM point")).all())
    assert flags == {"a": "nan", "b": "+inf", "c": "-inf", "d": None}
    assert len(df) == 5


def test_fits_and_verdicts_are_replaced_per_sweep_metric_and_axis(store: db.Store) -> None:
    _register(store)
    fit = {
        "run_id": None,
        "variant": "baseline",
        "metric": "val/pass_rate",
        "axis": "flops",
        "window_start": 0.1,
        "r0": 0.1,
        "a": 0.61,
        "a_lo": 0.6,
        "a_hi": 0.62,
        "b": 1.5,
        "c_mid": 3e15,
        "rmse": 0.004,
        "n_points": 40,
        "status": "ok",
        "reason": None,
        "method": "grid+lm",
    }
    key = {"metric": "val/pass_rate", "axis": "flops"}
    store.replace_fits(SWEEP, [fit, fit | {"variant": "loo-dapo", "a": 0.55}], **key)
    store.replace_fits(SWEEP, [fit | {"a": 0.63}], **key)
    fits = db.fits(store, SWEEP)
    assert list(fits.columns)[:5] == ["run_id", "variant", "metric", "axis", "window_start"]
    assert len(fits) == 1 and fits["a"][0] == 0.63 and int(fits["n_points"][0]) == 40
    assert fits["b_lo"].isna().all()
    verdict = {
        "knob": "loss",
        "variant": "loo-dapo",
        "alternative": "dapo",
        "metric": "val/pass_rate",
        "axis": "flops",
        "verdict": "asymptote-mover",
        "a_base": 0.61,
        "a_variant": 0.55,
        "d_a": -0.06,
        "d_a_lo": -0.08,
        "d_a_hi": -0.04,
        "margin": 0.02,
        "reason": "dA beyond margin",
        "mde_a": 0.031,
    }
    store.replace_verdicts(SWEEP, [verdict], **key)
    v = db.verdicts(store, SWEEP)
    assert len(v) == 1 and v["verdict"][0] == "asymptote-mover" and v["d_a"][0] == -0.06
    assert v["mde_a"][0] == 0.031 and v["mde_b"].isna().all()
    with pytest.raises(db.StoreError, match=r"unknown column\(s\) \['ceiling'\]"):
        store.replace_fits(SWEEP, [fit | {"ceiling": 1}], **key)
    with pytest.raises(db.StoreError, match="sweep 'nope' does not exist"):
        store.replace_verdicts("nope", [verdict], **key)
    with pytest.raises(db.StoreError, match="row 0 has axis='flops'"):
        store.replace_fits(SWEEP, [fit], metric="val/pass_rate", axis="step")


def test_a_fit_on_another_axis_or_metric_keeps_the_others(store: db.Store) -> None:
    """Issue 15 item 11: `scalerl fit --axis step` must not erase the FLOPs fits (and verdicts)."""
    _register(store)
    fit = {"run_id": None, "variant": "baseline", "a": 0.6, "status": "ok"}
    verdict = {"knob": "loss", "variant": "loo-dapo", "verdict": "no-effect", "d_a": 0.01}
    for metric, axis, a in [
        ("val/pass_rate", "flops", 0.6),
        ("val/pass_rate", "step", 0.7),
        ("r", "flops", 0.8),
    ]:
        store.replace_fits(SWEEP, [fit | {"a": a}], metric=metric, axis=axis)
        store.replace_verdicts(SWEEP, [verdict | {"d_a": a}], metric=metric, axis=axis)
    store.replace_fits(SWEEP, [fit | {"a": 0.65}], metric="val/pass_rate", axis="flops")  # refit flops
    store.replace_verdicts(SWEEP, [], metric="r", axis="flops")  # a refit with no verdicts left
    fits = db.fits(store, SWEEP)
    assert sorted(zip(fits["metric"], fits["axis"], fits["a"], strict=True)) == [
        ("r", "flops", 0.8), ("val/pass_rate", "flops", 0.65), ("val/pass_rate", "step", 0.7)
    ]  # fmt: skip
    assert db.fits(store, SWEEP, axis="step")["a"].tolist() == [0.7]
    assert db.fits(store, SWEEP, metric="val/pass_rate", axis="flops")["a"].tolist() == [0.65]
    assert db.fits(store, SWEEP, metric="r")["axis"].tolist() == ["flops"]
    verdicts = db.verdicts(store, SWEEP)
    assert sorted(zip(verdicts["metric"], verdicts["axis"], verdicts["d_a"], strict=True)) == [
        ("val/pass_rate", "flops", 0.6), ("val/pass_rate", "step", 0.7)
    ]  # fmt: skip
    assert db.verdicts(store, SWEEP, metric="val/pass_rate", axis="step")["d_a"].tolist() == [0.7]


def test_the_schema_has_no_run_sweep_column_and_v_runs_lists_every_member(store: db.Store) -> None:
    """Issue 15 item 11: a run shared by two sweeps is in both; `run` no longer has a `sweep`
    column whose `WHERE sweep =` silently dropped it from the second."""
    _register(store, "shared")
    store.ensure_sweep("other", {})
    store.register_run(db.RunRecord("shared", "other", "grid-3", 0, {"lr": 1e-6}, "h" * 16))
    store.register_run(db.RunRecord("own", "other", "grid-4", 0, {"lr": 2e-6}, "g" * 16))
    with store.engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("run")}
        assert "sweep" not in columns and "first_sweep" in columns
        members = conn.execute(
            text("SELECT run_id, variant, first_sweep FROM v_runs WHERE sweep = 'other' ORDER BY run_id")
        ).all()
    assert [tuple(r) for r in members] == [("own", "grid-4", "other"), ("shared", "grid-3", SWEEP)]
    assert db.runs(store, "other")["run_id"].tolist() == ["shared", "own"]  # by variant: grid-3, grid-4
    info = store.get_run("shared")
    assert info is not None and info.sweep == SWEEP  # the first sweep that registered it


def test_opening_an_existing_store_to_read_writes_nothing(reopenable_store: db.Store) -> None:
    """Issue 15 item 7: reads never write, the open included (no BEGIN IMMEDIATE, no schema
    transaction, no journal switch), and a read-only store refuses writes with its own error."""
    store = reopenable_store
    _register(store)
    _write(store, "r1", store.start_attempt("r1"), range(1, 4))
    url = store.engine.url.render_as_string(hide_password=False)
    seen: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(" ".join(statement.split()).upper())

    from sqlalchemy import Engine, event

    event.listen(Engine, "before_cursor_execute", record)
    try:
        for kwargs in ({"create": False}, {"readonly": True}):
            reader = db.open_store(url, **kwargs)  # type: ignore[arg-type]
            assert reader.readonly is bool(kwargs.get("readonly"))
            assert db.runs(reader, SWEEP)["n_points"].tolist() == [6]  # 3 steps x 2 metrics
            assert len(db.curves(reader, SWEEP, "val/pass_rate")) == 3
            assert db.fits(reader, SWEEP).empty and not db.events(reader, SWEEP).empty
            if reader.readonly:
                with pytest.raises(db.StoreReadOnlyError, match="read-only"):
                    reader.set_status("r1", "failed")
            reader.close()
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    writes = (
        "INSERT",
        "UPDATE",
        "DELETE",
        "CREATE",
        "DROP",
        "ALTER",
        "BEGIN IMMEDIATE",
        "PRAGMA JOURNAL_MODE=",
    )
    assert seen and [s for s in seen if s.startswith(writes) or "ADVISORY" in s] == []
    assert store.get_run("r1") is not None and store.get_run("r1").status == "running"  # type: ignore[union-attr]


def test_session_scope_rolls_back_and_translates_driver_errors(store: db.Store) -> None:
    _register(store)
    with pytest.raises(RuntimeError), store.session() as s:
        s.add(Sweep(name="half-written", spec={}))
        s.flush()
        raise RuntimeError("boom")
    assert list(db.sweeps(store)["name"]) == [SWEEP]
    with pytest.raises(db.StoreIntegrityError, match="broke a constraint"), store.session() as s:
        s.add(Sweep(name=SWEEP, spec={}))  # duplicate primary key
    with store.session() as s:
        assert s.get(Sweep, SWEEP) is not None


def test_events_scrub_passwords_and_views_answer_sql(store: db.Store) -> None:
    _register(store)
    store.log_event(
        "r1", "submitted", {"url": "postgresql://lab:hunter2@db:5432/x", "note": "password=hunter2"}
    )
    store.log_event(None, "requeued", {"n": 1}, sweep=SWEEP)
    ev = db.events(store, SWEEP)
    assert list(ev["kind"]) == ["submitted", "requeued"]
    assert "hunter2" not in repr(list(ev["detail"]))
    assert ev["detail"][0]["url"] == "postgresql://lab:***@db:5432/x"
    _write(store, "r1", store.start_attempt("r1"), range(12))
    with store.engine.connect() as conn:
        n = conn.execute(text("SELECT COUNT(*) FROM v_curves WHERE sweep = :s"), {"s": SWEEP}).scalar_one()
        latest = conn.execute(
            text("SELECT metric, step, value FROM v_latest WHERE run_id = 'r1' ORDER BY metric")
        ).all()
    assert n == 24
    assert [tuple(r) for r in latest] == [("train/reward", 11, 0.5), ("val/pass_rate", 11, 0.011)]


def test_batched_status_and_events_validate_and_scrub_like_the_single_ones(store: db.Store) -> None:
    _register(store, "r1")
    _register(store, "r2", variant="loo-dapo")
    store.set_status("r1", "failed", error="boom")
    store.mark_runs(["r1", "r2"], "submitted")
    runs = db.runs(store, SWEEP).set_index("run_id")
    assert list(runs["status"]) == ["submitted", "submitted"]
    assert runs.loc["r1", "error"] == "boom"  # a retried run keeps its last failure's text
    with pytest.raises(db.StoreError, match="run status 'sent' is not one of"):
        store.mark_runs(["r1"], "sent")
    store.log_events(
        SWEEP,
        "submitted",
        {"r1": {"job_id": "7_0", "url": "postgresql://lab:hunter2@db/x"}, "r2": {"job_id": "7_1"}},
    )
    ev = db.events(store, SWEEP)
    assert list(ev["run_id"]) == ["r1", "r2"] and list(ev["kind"]) == ["submitted", "submitted"]
    assert [d["job_id"] for d in ev["detail"]] == ["7_0", "7_1"]
    assert "hunter2" not in repr(list(ev["detail"]))
    with pytest.raises(db.StoreError, match="event kind"):
        store.log_events(SWEEP, "", {"r1": {}})


def test_a_run_shared_by_two_sweeps_is_seen_by_both_under_their_own_names(store: db.Store) -> None:
    _register(store, "base", "baseline", seed=1)  # sweep "loo": its baseline
    _register(store, "loo-only", "loo-dapo", seed=1)
    fwd = db.RunRecord("base", "fwd", "fwd-step3", 1, {"lr": 1e-6}, "h" * 16, knob="step", alternative="3")
    assert store.register_run(fwd) is False  # the run exists: executors skip it ...
    assert store.register_run(fwd) is False  # ... and a repeat adds nothing
    new = db.RunRecord("fwd-only", "fwd", "fwd-step1", 1, {"lr": 2e-6}, "g" * 16, knob="step")
    assert store.register_runs([new, fwd]) == 1
    info = store.get_run("base")
    assert info is not None and (info.sweep, info.variant) == (SWEEP, "baseline")  # the first sweep's
    _write(store, "base", store.start_attempt("base"), range(4))
    store.log_event("base", "note", {"n": 1})  # logged under the first sweep, shown to both
    loo, fwd_curves = db.curves(store, SWEEP), db.curves(store, "fwd")
    shared = fwd_curves[fwd_curves.run_id == "base"]
    assert len(loo[loo.run_id == "base"]) == 8 and len(shared) == 8  # 2 metrics x 4 steps, once each
    assert set(shared.variant) == {"fwd-step3"} and set(shared.knob) == {"step"}
    assert set(shared.alternative) == {"3"} and set(shared.seed) == {1}
    assert set(loo[loo.run_id == "base"].variant) == {"baseline"}
    assert shared[shared.metric == "val/pass_rate"].value.tolist() == [0.0, 0.001, 0.002, 0.003]
    runs = db.runs(store, "fwd").set_index("run_id")
    assert sorted(runs.index) == ["base", "fwd-only"]
    assert (runs.loc["base", "sweep"], runs.loc["base", "variant"], runs.loc["base", "n_points"]) == (
        "fwd",
        "fwd-step3",
        8,
    )
    assert sorted(db.runs(store, SWEEP)["run_id"]) == ["base", "loo-only"]
    n_runs = dict(zip(db.sweeps(store)["name"], db.sweeps(store)["n_runs"], strict=True))
    assert n_runs == {"fwd": 2, SWEEP: 2}
    assert db.events(store, "fwd")["kind"].tolist() == ["started", "note"]
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT sweep, variant, COUNT(*) FROM v_curves WHERE run_id = 'base' GROUP BY sweep, variant"
            )
        ).all()
    assert sorted(tuple(r) for r in rows) == [("fwd", "fwd-step3", 8), (SWEEP, "baseline", 8)]


def test_replay_writes_dead_writers_spools_and_drops_fenced_ones(store: db.Store, tmp_path: Path) -> None:
    _register(store)
    a1 = store.start_attempt("r1")
    spool_dir = tmp_path / "dead"
    old = SpoolFile(spool_dir, "r1", a1)
    old.append(
        [
            (0, "m", 0.5, None, 0.0, 1.0, None, None, None, 128),
            (1, "m", 0.6, None, 0.1, 2.0, None, None, None, 64),
        ]
    )
    old.release()  # the writer "died": file kept, lock released
    report = db.replay(store, spool_dir)
    assert (report.files, report.points, report.fenced_points) == (1, 2, 0)
    assert list(spool_dir.glob("*.jsonl")) == []
    stale = SpoolFile(spool_dir, "r1", a1)
    stale.append([(5, "m", 0.9, None, None, None, None, None, None)])
    stale.release()
    store.start_attempt("r1")
    report = db.replay(store, spool_dir)
    assert (report.files, report.points, report.fenced_points) == (1, 0, 1)
    df = db.curves(store, SWEEP)
    assert sorted(df.step) == [0, 1]
    assert df["n"].tolist() == [128.0, 64.0]  # n survives the spool


def test_sample_counts_round_trip_on_every_read_path(store: db.Store) -> None:
    """``add(..., n=)`` stores n per metric (NULL where not given); the last write wins for n too."""
    _register(store)
    a = store.start_attempt("r1")
    with store.writer("r1", a) as w:
        for s in range(6):
            counts = {"val/pass_rate": 128 * (s + 1)} if s % 2 == 0 else None
            w.add(s, {"val/pass_rate": s / 10, "train/reward": 0.5}, {"flops": float(s)}, n=counts)
        w.flush()  # the rewrite below goes in its own batch: the upsert's conflict path
        w.add(5, {"val/pass_rate": 0.55}, {"flops": 5.0}, n={"val/pass_rate": 512})
        with pytest.raises(db.StoreError, match=r"n\['loss'\] names no metric"):
            w.add(6, {"val/pass_rate": 0.6}, {"flops": 6.0}, n={"loss": 3})
        with pytest.raises(db.StoreError, match="must be an int >= 1"):
            w.add(6, {"val/pass_rate": 0.6}, {"flops": 6.0}, n={"val/pass_rate": 0})
    df = db.curves(store, SWEEP, "val/pass_rate")
    assert df["step"].tolist() == [0, 1, 2, 3, 4, 5]
    got = [None if math.isnan(x) else int(x) for x in df["n"]]
    assert got == [128, None, 384, None, 640, 512]
    assert df["value"].tolist()[-1] == 0.55
    assert db.curves(store, SWEEP, "train/reward")["n"].isna().all()
    with store.engine.connect() as conn:  # the view shows it too
        rows = conn.execute(text("SELECT step, n FROM v_curves WHERE metric = 'val/pass_rate' ORDER BY step"))
        assert [tuple(r) for r in rows][:3] == [(0, 128), (1, None), (2, 384)]


def test_a_sweep_or_metric_with_no_points_reads_as_an_empty_frame(store: db.Store) -> None:
    """A fresh sweep (runs registered, nothing written yet) and a metric nobody logged read as
    empty frames with every column, on every backend (PostgreSQL's COPY path writes no CSV at all
    for no rows)."""
    _register(store)
    empty = db.curves(store, SWEEP)
    assert len(empty) == 0 and {"run_id", "step", "metric", "value", "flops", "n"} <= set(empty.columns)
    assert db.runs(store, SWEEP)["n_points"].tolist() == [0]
    _write(store, "r1", store.start_attempt("r1"), range(3))
    assert len(db.curves(store, SWEEP, "diag/lag_mean")) == 0
    assert len(db.curves(store, SWEEP, "val/pass_rate")) == 3


def test_a_v1_spool_line_without_n_still_replays(store: db.Store, tmp_path: Path) -> None:
    _register(store)
    a1 = store.start_attempt("r1")
    spool_dir = tmp_path / "old"
    spool_dir.mkdir()
    line = {
        "v": 1,
        "run_id": "r1",
        "attempt": a1,
        "rows": [[3, "m", 0.25, None, None, 9.0, None, None, None]],
    }
    (spool_dir / f"r1.a{a1}.1.deadbeef.jsonl").write_text(json.dumps(line) + "\n")
    report = db.replay(store, spool_dir)
    assert (report.files, report.points) == (1, 1)
    df = db.curves(store, SWEEP)
    assert (df["step"].tolist(), df["value"].tolist(), df["flops"].tolist()) == ([3], [0.25], [9.0])
    assert df["n"].isna().all()


def test_pg_fixture_url_carries_a_password_the_store_never_shows(pg_server: PgServer) -> None:
    """The redaction check needs a URL with a password; the managed server always has one."""
    if pg_server.password is None:
        pytest.skip("the external PostgreSQL URL has no password")
    st = db.open_store(pg_server.url)
    try:
        assert pg_server.password not in st.url and ":***@" in st.url
    finally:
        st.close()
