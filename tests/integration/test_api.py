"""scalerl.harness.Sweep end to end: launch on the debug executor (the example command trainer, in this
process), wait, status, curves, fit and report, all through the Python API."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scalerl.harness import Sweep
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
