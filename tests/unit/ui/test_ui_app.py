"""The live view's server without a browser: who may connect, what it never shows, that a sweep
opens from a sample of its points and a refresh reads only what moved (a real SQLite store; the
app through Starlette's test client)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from scalerl import db
from scalerl.db import RunRecord
from scalerl.db import live as store_live
from scalerl.harness.errors import ConfigError
from scalerl.harness.report.downsample import display_indices, grid_indices
from scalerl.harness.ui import sample
from scalerl.harness.ui.app import Viewer, create_app
from scalerl.harness.ui.live import SweepLive
from scalerl.harness.ui.safety import TOKEN_ENV, Access, check_bind, is_local, redact_config

METRIC = "val/pass_rate"
SECRET = "hunter2-secret"


def _store(tmp_path: Path) -> tuple[str, Any]:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.ensure_sweep("s", {"design": "loo", "fit": {"metric": METRIC, "axis": "step"}})
    config = {"db_url": f"postgresql://u:{SECRET}@h/db", "wandb": {"api_key": SECRET}, "lr": 1e-3}
    for i, (variant, knob) in enumerate((("baseline", None), ("loo-dapo", "loss"))):
        store.register_run(RunRecord(f"r{i}", "s", variant, 0, config, f"h{i}", knob=knob))
    return url, store


def _write(store: Any, run_id: str, steps: range | list[int], attempt: int | None = None) -> int:
    attempt = attempt or store.start_attempt(run_id, executor="local")
    writer = store.writer(run_id, attempt)
    for s in steps:
        writer.add(s, {METRIC: 0.1 + 0.01 * s}, {"flops": 1e12 * (s + 1)})
    writer.close()
    return attempt


def test_bind_rule() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert is_local(host) and check_bind(host, env={}).token is None
    with pytest.raises(ConfigError, match=TOKEN_ENV) as err:
        check_bind("0.0.0.0", env={})
    assert "--new-token" in str(err.value)
    with pytest.raises(ConfigError, match="too short"):
        check_bind("0.0.0.0", env={TOKEN_ENV: "short"})
    assert check_bind("0.0.0.0", env={TOKEN_ENV: "x" * 20}).token == "x" * 20
    made = check_bind("10.1.2.3", new_token=True, env={})
    assert made.generated and made.token is not None and len(made.token) >= 24


def test_config_redaction() -> None:
    shown = redact_config(
        {
            "db_url": f"postgresql://u:{SECRET}@h/db",
            "nested": [{"password": SECRET}],
            "token": SECRET,
            "max_tokens": 12,
        }
    )
    assert SECRET not in str(shown)
    assert shown["max_tokens"] == 12 and shown["token"] == "***"


def test_guard_token_host_and_read_only(tmp_path: Path) -> None:
    url, _ = _store(tmp_path)
    viewer = Viewer(url, fits=False)
    local = TestClient(create_app(viewer, Access("127.0.0.1", None)), base_url="http://127.0.0.1:8765")
    ok = local.get("/api/sweeps")
    assert ok.status_code == 200 and [s["name"] for s in ok.json()["sweeps"]] == ["s"]
    assert "script-src 'self'" in ok.headers["content-security-policy"]
    assert local.post("/api/sweeps").status_code == 405  # no write path
    assert local.get("/api/sweeps", headers={"host": "evil.example"}).status_code == 421  # DNS rebinding
    token = "t" * 24
    remote = TestClient(create_app(viewer, Access("0.0.0.0", token)), base_url="http://10.0.0.5:8765")
    denied = remote.get("/api/sweeps")
    assert denied.status_code == 401 and "token" in denied.text
    assert remote.get("/api/sweeps", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert remote.get("/api/sweeps", headers={"authorization": f"Bearer {token}"}).status_code == 200
    first = remote.get(f"/sweep?name=s&token={token}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/sweep?name=s"
    assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in first.headers["set-cookie"]
    assert remote.get("/api/sweeps").status_code == 200  # the cookie it set
    js = local.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000  # served from the plotly package
    assert local.get("/static/../app.py").status_code == 404


def test_no_secret_in_any_answer(tmp_path: Path) -> None:
    url, store = _store(tmp_path)
    attempt = _write(store, "r0", range(5))
    store.finish_run(
        "r0", attempt, "failed", error=f"connect postgresql://u:{SECRET}@h/db failed password={SECRET}"
    )
    client = TestClient(
        create_app(Viewer(url, fits=False), Access("127.0.0.1", None)), base_url="http://127.0.0.1:8765"
    )
    for path in ("/api/info", "/api/sweeps", "/api/sweep?name=s&since=0", "/api/run?id=r0", "/api/run?id=r1"):
        got = client.get(path)
        assert got.status_code == 200, path
        assert SECRET not in got.text, path
    run = client.get("/api/run?id=r0").json()
    assert run["config"]["wandb"]["api_key"] == "***" and run["config"]["lr"] == 1e-3
    assert run["error"].startswith("connect postgresql://u:***@h/db")
    assert client.get("/api/run?id=nope").status_code == 404
    assert client.get("/api/sweep?name=nope&since=0").status_code == 404


def test_refresh_reads_only_what_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, store = _store(tmp_path)
    _write(store, "r0", range(10))
    a1 = _write(store, "r1", range(4))
    store.finish_run("r0", store.get_run("r0").attempts, "completed")
    reader = db.open_store(url, create=False, readonly=True)
    view = SweepLive(reader, "s", metric=METRIC, axis="step", spec={}, min_refresh_s=0.0)
    first = view.snapshot()
    assert {c["run_id"]: len(c["x"]) for c in first["curves"]} == {"r0": 10, "r1": 4}
    asked: list[dict[str, int]] = []
    real = store_live.points_after

    def spy(store: Any, metric: str, cursors: dict[str, int]) -> Any:
        asked.append(dict(cursors))
        return real(store, metric, cursors)

    monkeypatch.setattr(store_live, "points_after", spy)
    assert view.refresh() is False  # nothing moved: one read of the run rows, nothing sent
    assert asked == [{"r1": 3}]  # only the running run, from its last step
    assert view.changes(first["seq"]) == {**view.changes(first["seq"]), "runs": [], "curves": []}
    _write(store, "r1", range(4, 7), attempt=a1)
    assert view.refresh() is True
    assert asked[-1] == {"r1": 3}
    got = view.changes(first["seq"])
    assert [(c["run_id"], c["x"], c["reset"]) for c in got["curves"]] == [("r1", [4.0, 5.0, 6.0], False)]
    assert [r["run_id"] for r in got["runs"]] == ["r1"] and got["runs"][0]["points"] == 7
    assert got["points"] == 17
    later = view.changes(got["seq"])
    assert later["curves"] == [] and later["runs"] == []
    # A new attempt that resumes from step 2 replaces the tail: the run is read again, whole.
    a2 = store.start_attempt("r1", executor="local", resume_step=2)
    _write(store, "r1", range(3, 5), attempt=a2)
    view.refresh()
    assert asked[-1] == {"r1": -1}
    again = view.changes(got["seq"])
    assert [(c["run_id"], c["x"], c["reset"]) for c in again["curves"]] == [
        ("r1", [0.0, 1.0, 2.0, 3.0, 4.0], True)
    ]
    assert again["runs"][0]["points"] == 5 and again["runs"][0]["value"] == pytest.approx(0.14)
    # Its drawn copy fills up (twice its share of the budget, 400 points each for two runs): it is
    # read again whole and drawn by the report's rule, not grown.
    _write(store, "r1", range(5, 805), attempt=a2)
    view.refresh()
    assert asked[-2:] == [{"r1": 4}, {"r1": -1}]
    full = view.changes(again["seq"])["curves"]
    assert [(c["run_id"], c["reset"]) for c in full] == [("r1", True)] and len(full[0]["x"]) <= 400
    assert full[0]["x"][-1] == 804.0 and view.changes(again["seq"])["runs"][0]["points"] == 805


def _curve(step: int) -> float:
    """A run's value at ``step``, with a spike at step 4,550 and a dip at 6,110 that no grid rank
    of 1,000 points drawn with 400 lands on (checked below)."""
    return {4550: 0.95, 6110: -0.2}.get(step, 0.1 + 0.5 * step / (step + 2000))


def test_a_sweep_opens_from_a_sample_of_its_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # r0 logs every 10th step (on a grid: drawn from the ranks grid_indices picks, by index seeks,
    # plus its lowest and highest point); r1's steps are squares (no grid: read whole, drawn by the
    # report's rule). 1,000 points each, past the two runs' share of the drawing budget (400).
    url, store = _store(tmp_path)
    writer = store.writer("r0", store.start_attempt("r0", executor="local"))
    for s in range(0, 10_000, 10):
        writer.add(s, {METRIC: _curve(s)}, {"flops": 1e12 * (s + 1)})
    writer.close()
    _write(store, "r1", [i * i for i in range(1000)])
    asked: list[dict[str, int]] = []
    real = store_live.points_after

    def spy(store: Any, metric: str, cursors: dict[str, int]) -> Any:
        asked.append(dict(cursors))
        return real(store, metric, cursors)

    monkeypatch.setattr(store_live, "points_after", spy)
    reader = db.open_store(url, create=False, readonly=True)
    view = SweepLive(reader, "s", metric=METRIC, axis="step", spec={})
    assert asked == [{"r1": -1}]  # only the run off a grid was read whole
    snap = view.snapshot()
    assert snap["sampled"] is True
    drawn = {c["run_id"]: c for c in snap["curves"]}
    grid = [10 * int(r) for r in grid_indices(1000, 400)]
    assert 4550 not in grid and 6110 not in grid
    # The sample: the grid's steps plus the spike and the dip, each drawn at its stored value.
    assert drawn["r0"]["x"] == sorted({*map(float, grid), 4550.0, 6110.0})
    assert drawn["r0"]["y"] == pytest.approx([_curve(int(x)) for x in drawn["r0"]["x"]], rel=1e-5)
    assert drawn["r0"]["x"][0] == 0.0 and drawn["r0"]["x"][-1] == 9990.0
    squares = np.array([i * i for i in range(1000)], dtype=float)
    assert drawn["r1"]["x"] == squares[display_indices(squares, 0.1 + 0.01 * squares, 400)].tolist()
    rows = {r["run_id"]: r for r in snap["runs"]}
    assert rows["r0"]["points"] == rows["r1"]["points"] == 1000 and snap["points"] == 2000
    assert rows["r0"]["last_step"] == 9990 and rows["r0"]["value"] == pytest.approx(_curve(9990))
    assert rows["r1"]["last_step"] == 999**2
    # Every point follows: r0 is drawn again by the report's rule from all of them (first, last,
    # spike and dip kept), sent to a page as a reset; r1 (already whole) is left as it is.
    seq = snap["seq"]
    assert view.load_full() == 1 and view.sampled is False
    got = view.changes(seq)
    assert got["sampled"] is False and [(c["run_id"], c["reset"]) for c in got["curves"]] == [("r0", True)]
    steps = np.arange(0, 10_000, 10, dtype=float)
    values = np.array([_curve(int(s)) for s in steps])
    assert got["curves"][0]["x"] == steps[display_indices(steps, values, 400)].tolist()
    assert {0.0, 4550.0, 6110.0, 9990.0} <= set(got["curves"][0]["x"])
    assert got["curves"][0]["y"] == pytest.approx([_curve(int(x)) for x in got["curves"][0]["x"]], rel=1e-5)
    assert view.load_full() == 0 and view.changes(got["seq"])["curves"] == []
    # A run that moved between the count and the seeks (here: a count that disagrees) is read whole.
    stats = store_live.point_stats
    monkeypatch.setattr(
        store_live,
        "point_stats",
        lambda *a: {
            k: store_live.PointStats(v.points + 1, v.first, v.last, v.extremes) for k, v in stats(*a).items()
        },
    )
    again = sample.read_drawn(reader, METRIC, ["r0", "r1"], 400)
    assert asked[-1] == {"r0": -1, "r1": -1} and again["r0"].whole and again["r0"].points == 1000


def test_a_run_that_moved_past_the_full_read_is_read_whole_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bulk read saw 1,000 points of r0, but a refresh appended 10 more meanwhile: load_full
    # leaves r0's copy alone (it would drop points), and the next refresh reads r0 whole.
    from scalerl.db import queries

    url, store = _store(tmp_path)
    attempt = store.start_attempt("r0", executor="local")
    writer = store.writer("r0", attempt)
    for s in range(0, 10_000, 10):
        writer.add(s, {METRIC: _curve(s)}, {"flops": 1e12 * (s + 1)})
    writer.close()
    reader = db.open_store(url, create=False, readonly=True)
    view = SweepLive(reader, "s", metric=METRIC, axis="step", spec={}, min_refresh_s=0.0)
    before = queries.curves(reader, "s", metric=METRIC)
    writer = store.writer("r0", attempt)
    for s in range(10_000, 10_100, 10):
        writer.add(s, {METRIC: _curve(s)}, {"flops": 1e12 * (s + 1)})
    writer.close()
    view.refresh()  # r0 is running: its 10 new points are appended to the sample
    assert view.sampled and view.runs["r0"].points == 1010
    monkeypatch.setattr(queries, "curves", lambda *a, **k: before)
    assert view.load_full() == 0 and view.sampled
    seq = view.seq
    view.refresh()
    assert not view.sampled
    steps = np.arange(0, 10_100, 10, dtype=float)
    want = steps[display_indices(steps, np.array([_curve(int(s)) for s in steps]), 400)].tolist()
    assert [(c["run_id"], c["x"], c["reset"]) for c in view.changes(seq)["curves"]] == [("r0", want, True)]


def test_a_sampled_sweep_is_drawn_from_every_point_without_a_reload(tmp_path: Path) -> None:
    # Through the app: the first answer draws a sample and says so; the page's first poll starts
    # the server's read of every point, and a later poll brings each run drawn from all of them.
    url, store = _store(tmp_path)
    for run_id in ("r0", "r1"):
        writer = store.writer(run_id, store.start_attempt(run_id, executor="local"))
        for s in range(0, 10_000, 10):
            writer.add(s, {METRIC: _curve(s)}, {"flops": 1e12 * (s + 1)})
        writer.close()
    client = TestClient(
        create_app(Viewer(url, fits=False), Access("127.0.0.1", None)), base_url="http://127.0.0.1:8765"
    )
    first = client.get("/api/sweep?name=s&since=0").json()
    assert first["sampled"] is True and first["points"] == 2000
    assert all(4550.0 in c["x"] and len(c["x"]) < 1000 for c in first["curves"])
    steps = np.arange(0, 10_000, 10, dtype=float)
    want = steps[display_indices(steps, np.array([_curve(int(s)) for s in steps]), 400)].tolist()
    got: dict[str, Any] = {}
    for _ in range(400):  # the background read lands within a few seconds; polled, not timed
        got = client.get(f"/api/sweep?name=s&since={first['seq']}").json()
        if not got["sampled"]:
            break
        threading.Event().wait(0.05)
    assert got["sampled"] is False
    assert {c["run_id"]: (c["x"], c["reset"]) for c in got["curves"]} == {
        "r0": (want, True),
        "r1": (want, True),
    }


def test_the_fit_reads_the_store_itself(tmp_path: Path) -> None:
    # The view hands the worker the sweep, never its points; the fit lands with the worker's count.
    url, store = _store(tmp_path)
    _write(store, "r0", range(10))
    called: list[dict[str, Any]] = []

    def fitter(**kwargs: Any) -> Future[Any]:
        called.append(kwargs)
        done: Future[Any] = Future()
        payload: dict[str, Any] = {
            "axis": "step",
            "fits": [],
            "verdicts": [],
            "notes": [],
            "knob_map": None,
            "bands": [],
        }
        done.set_result({**payload, "points": 10})
        return done

    reader = db.open_store(url, create=False, readonly=True)
    view = SweepLive(reader, "s", metric=METRIC, axis="step", spec={}, fitter=fitter, fit_gap_s=0.0)
    view.refresh(force=True)
    assert called == [{"sweep": "s", "spec": {}, "metric": METRIC, "axis": "step", "n_boot": 200}]
    assert view.fit.source == "live" and view.fit.points == 10
    view.refresh(force=True)
    assert len(called) == 1  # nothing new: no refit
