"""scalerl.harness.Sweep end to end: launch on the debug executor (the example command trainer, in this
process), wait, status, curves, fit and report, all through the Python API."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

from scalerl.harness import Sweep
from scalerl.harness.errors import ConfigError
from tests.unit.execution.helpers import expected_steps, write_command_sweep


def test_launch_wait_status_curves_fit_report(tmp_path: Path) -> None:
    path = write_command_sweep(tmp_path, steps=20, executor="debug")
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = Sweep.from_yaml(path, db=url)
    planned = sweep.plan()
    assert [r.variant for r in planned.runs] == ["baseline", "loo-dapo"]

    launched = sweep.launch(state_dir=tmp_path / "st")
    assert launched.executor == "debug" and launched.sweep == "cmd"
    assert launched.count("submit") == 2
    assert sorted(launched.decisions["run_id"]) == sorted(r.run_id for r in planned.runs)

    log = io.StringIO()
    snap = sweep.wait(timeout_s=120, interval_s=0.1, out=log)
    assert snap.done and (snap.completed, snap.failed, snap.total) == (2, 0, 2)
    assert snap.points == 8
    assert "2/2 done" in log.getvalue()

    status = sweep.status()
    assert list(status["status"]) == ["completed", "completed"]
    assert set(status["variant"]) == {"baseline", "loo-dapo"}
    assert (status["attempts"] == 1).all()

    curves = sweep.curves()
    assert set(curves["metric"]) == {"val/pass_rate"}
    for _, run in curves.groupby("run_id", observed=True):
        assert list(run["step"]) == expected_steps(20)
    assert set(sweep.curves(all_metrics=True)["metric"]) >= {"val/pass_rate"}

    fitted = sweep.fit(n_boot=50)
    assert (fitted.metric, fitted.axis) == ("val/pass_rate", "flops")
    assert fitted.saved
    assert list(fitted.verdicts["variant"]) == ["loo-dapo"]
    assert list(fitted.verdicts["knob"]) == ["loss"]
    assert fitted.verdicts["verdict"].iloc[0] in {
        "asymptote-mover", "efficiency-shaper", "no-effect", "undecided", "unstable", "unfit",
    }  # fmt: skip
    assert set(fitted.fits["variant"]) == {"baseline", "loo-dapo"}
    assert len(fitted.fits) == 4  # one per run, one pooled per variant
    stored = Sweep.open("cmd", db=url)
    assert list(stored.fit(save=False).verdicts["verdict"]) == list(fitted.verdicts["verdict"])

    out = sweep.report(tmp_path / "r.html")
    assert out == (tmp_path / "r.html").resolve()
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") or page.lstrip().lower().startswith("<!doctype html>")
    assert "cmd" in page and "loo-dapo" in page
    assert stored.report_data().fits_source == "store"
    assert set(stored.figures()) == {"overview", "curves", "knob_map", "panels", "verdicts"}

    again = sweep.launch(state_dir=tmp_path / "st")  # everything completed: nothing to submit
    assert again.count("skip-completed") == 2 and again.count("submit", "retry") == 0
    sweep.close()
    stored.close()


def test_wait_times_out_with_the_progress_in_the_error(tmp_path: Path) -> None:
    """On the local executor the runs (10 s each) cannot end within 0.5 s, however busy the
    machine's run slots are; they are cancelled afterwards."""
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.execution.cancel import cancel

    path = write_command_sweep(tmp_path, steps=20, executor="local", step_seconds=0.5)
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Sweep.from_yaml(path, db=url) as sweep:
        launched = sweep.launch(state_dir=tmp_path / "st", max_parallel=1)
        assert launched.executor == "local" and launched.count("submit") == 2
        try:
            with pytest.raises(ExecutionError, match=r"'cmd' not done after 0.5 s: 0/2 done"):
                sweep.wait(timeout_s=0.5, interval_s=0.1)
        finally:
            cancel(sweep.store(), "cmd")
        assert sweep.progress().completed == 0


def test_runs_dataframe_forecast_cancel_and_list_sweeps(tmp_path: Path) -> None:
    """The per-run frame, forecast(), cancel() and list_sweeps() on a real SQLite store holding a
    small debug-executor sweep, checked against the store's own rows."""
    from scalerl.harness import list_sweeps
    from scalerl.harness.analysis.forecast.service import forecast_rows
    from scalerl.harness.analysis.groups import load_groups

    path = write_command_sweep(tmp_path, steps=60, executor="debug")  # 12 points: per-run fits are ok
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Sweep.from_yaml(path, db=url) as sweep:
        sweep.launch(state_dir=tmp_path / "st")
        sweep.wait(timeout_s=120, interval_s=0.1)

        before = sweep.runs_dataframe()  # no fit stored yet: the fit columns are empty
        assert before[["a", "b", "c_mid"]].isna().all().all() and before["fit_status"].isna().all()
        fitted = sweep.fit(n_boot=20)

        frame = sweep.runs_dataframe()
        assert frame.attrs == {"metric": "val/pass_rate", "axis": "flops"}
        assert list(frame.columns[:14]) == [
            "run_id", "sweep", "variant", "knob", "alternative", "seed", "status", "attempts",
            "value", "step", "compute", "n_points", "a", "b",
        ]  # fmt: skip
        assert sorted(frame["variant"]) == ["baseline", "loo-dapo"]
        assert (frame["sweep"] == "cmd").all() and (frame["status"] == "completed").all()
        curves = sweep.curves()
        for row in frame.itertuples():
            run = curves[curves["run_id"] == row.run_id].sort_values("step")
            assert (row.step, row.n_points) == (60, 12)
            assert row.value == run["value"].iloc[-1] and row.compute == run["flops"].iloc[-1]
            fit = fitted.fits[fitted.fits["run_id"] == row.run_id].iloc[0]
            assert row.fit_status == fit["status"] == "ok"
            assert 0.0 < row.a < 1.0 and (row.a, row.b, row.c_mid) == (fit["a"], fit["b"], fit["c_mid"])
        by_variant = frame.set_index("variant")
        assert by_variant.loc["loo-dapo", "knob"] == "loss"
        assert by_variant.loc["loo-dapo", "params.knobs.loss.choice"] == "dapo"
        assert by_variant.loc["baseline", "params.knobs.loss.choice"] != "dapo"
        assert (frame["params.runner.type"] == "command").all()
        assert (frame["params.budget.value"] == 60).all()
        on_steps = sweep.runs_dataframe(axis="step")
        assert list(on_steps["compute"]) == [60.0, 60.0] and on_steps["a"].isna().all()  # no step fits

        groups = load_groups(sweep.store(), "cmd", "val/pass_rate", "flops")
        expected = forecast_rows(groups, None, level=0.9, bounds=(0.0, 1.0))
        fc = sweep.forecast()
        assert (fc.metric, fc.axis, fc.level) == ("val/pass_rate", "flops", 0.9)
        assert fc.bounds == (0.0, 1.0)  # a pass rate: clipped as `scalerl forecast` clips it
        assert sweep.forecast(bounds=None).bounds is None
        with pytest.raises(ConfigError, match=r"bounds=.*lower bound must be below the upper"):
            sweep.forecast(bounds=(1.0, 0.0))
        assert list(fc.frame["variant"]) == [r["variant"] for r in expected]
        for got, want in zip(fc.frame.itertuples(), expected, strict=True):
            assert got.compute == 2.0 * want["last_compute"]  # the default: 2x the largest compute
            assert got.status == want["status"]
            value = want["forecasts"][0]["value"]
            assert got.value == value or (value is None and math.isnan(got.value))
        assert fc.frame["value"].notna().all() and (fc.frame["lo"] <= fc.frame["hi"]).all()
        last = float(curves["flops"].max())
        two = sweep.forecast([last, 4 * last], reach=0.9)
        assert len(two.frame) == 4 and list(two.frame["compute"]) == [last, 4 * last] * 2
        assert (two.frame["reach_fraction"] == 0.9).all()
        with pytest.raises(ConfigError, match="must be finite and > 0"):
            sweep.forecast([-1.0])

        listed = list_sweeps(url)
        assert list(listed["name"]) == ["cmd"]
        row = listed.iloc[0]
        assert (row["source"], row["design"], row["executor"], row["metric"], row["axis"]) == (
            "recipe", "loo", "debug", "val/pass_rate", "flops",
        )  # fmt: skip
        assert (row["n_runs"], row["completed"], row["running"], row["failed"]) == (2, 2, 0, 0)
        assert row["last_event"] is not None

        done = sweep.cancel()  # everything completed: nothing to cancel
        assert done.cancelled == 0
        assert sorted(done.outcomes.values()) == ["already completed", "already completed"]
        with pytest.raises(ConfigError, match="no such run"):
            sweep.cancel(run_id="nope")


def test_final_points_params_and_status_groups_from_the_store(tmp_path: Path) -> None:
    """An imported-style run's params and tags become params.* / tags.* columns; a non-finite last
    value stays visible; runs of every status group are counted."""
    from scalerl import db
    from scalerl.db import queries
    from scalerl.harness import list_sweeps

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = db.open_store(url, create=True)
    store.ensure_sweep("imp", {"fit": {"metric": "acc", "axis": "step"}})
    config = {"imported_from": ["mlflow"], "run": "r", "params": {"lr": 0.001, "opt": {"beta": 0.9}}}
    for i, status in enumerate(["completed", "failed", "running", "cancelled"]):
        store.register_run(
            db.RunRecord(f"r{i}", "imp", "baseline", i, config | {"tags": {"team": f"t{i}"}}, f"h{i}")
        )
        attempt = store.start_attempt(f"r{i}")
        writer = store.writer(f"r{i}", attempt)
        for step in (1, 2, 3):
            value = float("-inf") if (i == 1 and step == 3) else 0.1 * step + i
            writer.add(step, {"acc": value}, {"tokens": 100.0 * step})
        writer.close()
        if status != "running":
            store.finish_run(f"r{i}", attempt, status)
    final = queries.final_points(store, "imp", "acc")
    assert list(final["run_id"]) == ["r0", "r1", "r2", "r3"]
    assert list(final["step"]) == [3, 3, 3, 3] and list(final["n_points"]) == [3, 3, 3, 3]
    assert final["value"].iloc[0] == pytest.approx(0.3) and final["value"].iloc[1] == float("-inf")
    assert list(final["tokens"]) == [300.0] * 4
    store.close()

    with Sweep.open("imp", db=url) as sweep:
        frame = sweep.runs_dataframe()
        assert frame.attrs == {"metric": "acc", "axis": "step"}
        assert list(frame["status"]) == ["completed", "failed", "running", "cancelled"]
        assert list(frame["compute"]) == [3.0] * 4
        assert (frame["params.lr"] == 0.001).all() and (frame["params.opt.beta"] == 0.9).all()
        assert list(frame["tags.team"]) == ["t0", "t1", "t2", "t3"]
        assert "params.run" not in frame and "params.imported_from" not in frame
        assert frame["value"].iloc[1] == float("-inf")

    row = list_sweeps(url).iloc[0]
    assert (row["metric"], row["axis"], row["n_runs"]) == ("acc", "step", 4)
    counts = {k: row[k] for k in ("completed", "running", "waiting", "failed", "stopped")}
    assert counts == {"completed": 1, "running": 1, "waiting": 0, "failed": 1, "stopped": 1}
