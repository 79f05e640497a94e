"""`scalerl report` against a real SQLite store: stored fits, fits computed on the fly, no fits at
all, and the errors a user can cause (unknown sweep, an unreachable database with a password)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scalerl.harness.cli import main
from tests.fixtures import report_sweep


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from scalerl import db
    from scalerl.db.records import RunRecord

    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'store.db'}"
    report_sweep.write_sweep(url, n_points=32)
    # A second sweep whose only run has not written a point yet.
    store = db.open_store(url)
    store.ensure_sweep("empty", {"design": "loo"})
    store.register_run(RunRecord(run_id="empty-baseline-s0", sweep="empty", variant="baseline", seed=0,
                                 config={}, config_hash="0" * 16))  # fmt: skip
    return url


def _fits_table(html: str) -> dict[str, list[str]]:
    section = html[html.index("<h2>Fits</h2>") : html.index("<h2>Runs</h2>")]
    rows = re.findall(r"<tr>(.*?)</tr>", section)
    return {
        cells[0]: cells
        for cells in (re.findall(r"<td>(.*?)</td>", r) for r in rows)
        if cells and cells[1] == "pooled"
    }


def test_report_computes_fits_when_none_are_stored(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "computed.html"
    assert main(["report", report_sweep.SWEEP, "-o", str(out), "--db", store_url]) == 0
    assert "fits: computed" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert "computed for this report and are not stored" in html
    pooled = _fits_table(html)
    assert float(pooled["loo-dapo"][3]) == pytest.approx(0.45, abs=0.02)
    assert float(pooled["baseline"][3]) == pytest.approx(0.60, abs=0.02)
    verdicts = html[html.index('<table class="verdicts">') :]
    assert re.search(r"<td>loo-dapo</td><td>dapo</td><td>asymptote-mover</td>", verdicts)


def test_report_uses_stored_fits(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scalerl import db
    from scalerl.harness.analysis.verdicts.service import FitRequest, fit_sweep

    store = db.open_store(store_url)
    fit_sweep(store, report_sweep.SWEEP, FitRequest(axis="gpu_hours", n_boot=20))
    out = tmp_path / "stored.html"
    assert main(["report", report_sweep.SWEEP, "-o", str(out), "--db", store_url]) == 0
    assert "fits: store" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert "not stored" not in html and "has not been run" not in html
    # The stored fits' axis is picked up without --axis.
    assert "against compute (GPU-hours)" in html
    assert float(_fits_table(html)["loo-dapo"][3]) == pytest.approx(0.45, abs=0.02)


def test_report_without_points_says_fit_has_not_run(store_url: str, tmp_path: Path) -> None:
    out = tmp_path / "empty.html"
    assert main(["report", "empty", "-o", str(out), "--db", store_url]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<code>scalerl fit empty</code> has not been run" in html
    assert "No points recorded for this sweep yet." in html
    assert html.count("plotly.js v") == 1  # the overview still draws, with plotly.js embedded


def test_user_errors_name_the_fix_and_hide_passwords(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "nope", "-o", str(tmp_path / "x.html"), "--db", store_url]) == 3
    err = capsys.readouterr().err
    assert "SWEEP='nope'" in err and "empty, loo-report" in err
    assert main(["report", report_sweep.SWEEP, "--metric", "nope", "--db", store_url]) == 3
    err = capsys.readouterr().err
    assert "metric='nope'" in err and "train/reward, val/pass_rate" in err
    # Every command exits alike on the same mistake (README, "Scripting with --json, and exit
    # codes": a name not in the store is 3), with the same message: the names there, and the one
    # meant for a near miss.
    for command in ("fit", "forecast", "report", "status", "cancel"):
        assert main([command, "loo-reprot", "--db", store_url]) == 3, command
        err = capsys.readouterr().err
        assert "SWEEP='loo-reprot': no such sweep in the store" in err, (command, err)
        assert "did you mean 'loo-report'?" in err, (command, err)
    for command in ("fit", "forecast", "report"):
        assert main([command, report_sweep.SWEEP, "--metric", "val/pass_rat", "--db", store_url]) == 3
        err = capsys.readouterr().err
        assert "did you mean 'val/pass_rate'? pass --metric, one its runs log: train/reward" in err, err
    url = "postgresql://scalerl:s3cret-pw@127.0.0.1:1/scalerl"
    assert main(["report", "x", "-o", str(tmp_path / "y.html"), "--db", url]) == 4  # StoreError: unreachable
    err = capsys.readouterr().err
    assert "s3cret-pw" not in err and "scalerl: error:" in err
    assert not (tmp_path / "y.html").exists()


@pytest.mark.postgres
def test_report_from_postgresql_never_shows_the_password(pg_url: str, tmp_path: Path) -> None:
    from sqlalchemy.engine import make_url

    password = make_url(pg_url).password
    assert password  # the fixture's URL carries one
    report_sweep.write_sweep(pg_url, n_points=24, seeds=1)
    out = tmp_path / "pg.html"
    assert main(["report", report_sweep.SWEEP, "-o", str(out), "--db", pg_url]) == 0
    html = out.read_text(encoding="utf-8")
    assert str(password) not in html and "postgresql" in html  # the backend's name only
    assert re.search(r"<td>loo-dapo</td><td>dapo</td><td>asymptote-mover</td>", html)
