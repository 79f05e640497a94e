"""Issue 15 items 7 and 11 through the CLI: reading a store needs no write access and creates
nothing; `scalerl fit --axis step` keeps the FLOPs fits.

Tests run as root in CI, where file permissions are not enforced, so a read-only store is made
the way root cannot bypass: SQLite's own ``file:PATH?mode=ro`` URI. The chmod variant (what a
user hits) runs only as a non-root user.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main
from tests.unit.analysis.sweeps import synthetic_sweep

SPEC = {"fit": {"metric": "val/pass_rate", "axis": "flops", "window": {"start": 0.0}, "margin": 0.02}}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("readonly") / "scalerl.db"
    store = db.open_store(f"sqlite:///{path}")
    store.ensure_sweep("loo", SPEC)
    for name, vc in synthetic_sweep(seeds=2).items():
        for seed, (run_id, (compute, values)) in enumerate(zip(vc.run_ids, vc.curves, strict=True)):
            store.register_run(
                db.RunRecord(run_id, "loo", name, seed, {"v": name}, run_id, vc.knob, vc.alternative)
            )
            attempt = store.start_attempt(run_id, executor="debug")
            with store.writer(run_id, attempt) as w:
                for step, (c, v) in enumerate(zip(compute.tolist(), values.tolist(), strict=True)):
                    w.add(step, {"val/pass_rate": v}, {"flops": c, "gpu_hours": c / 1e3})
            store.finish_run(run_id, attempt, "completed")
    store.close()
    return path


@pytest.fixture
def copy(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # anything a command wrongly creates lands here, not in the repo
    (tmp_path / "store").mkdir()
    return Path(shutil.copy(built, tmp_path / "store" / "scalerl.db"))


def _ro(path: Path) -> str:
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def test_fit_status_report_forecast_read_a_read_only_store(
    copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = copy.read_bytes()
    assert main(["fit", "loo", "--db", _ro(copy), "--boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "loo-dapo" in out and "asymptote-mover" in out  # the table printed
    assert "fits and verdicts not saved: the store is read-only" in out
    assert main(["status", "loo", "--db", _ro(copy)]) == 0
    assert "sweep loo:" in capsys.readouterr().out
    assert main(["report", "loo", "--db", _ro(copy), "-o", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 1000
    assert main(["forecast", "loo", "--db", _ro(copy)]) == 0
    assert copy.read_bytes() == before  # not one byte written
    store = db.open_store(f"sqlite:///{copy}", readonly=True)
    assert store.readonly and db.fits(store, "loo").empty
    store.close()


def test_fit_no_save_leaves_the_store_alone(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "loo", "--db", f"sqlite:///{copy}", "--boot", "20", "--no-save"]) == 0
    assert "not saved (--no-save)" in capsys.readouterr().out
    store = db.open_store(f"sqlite:///{copy}", create=False)
    assert db.fits(store, "loo").empty and db.verdicts(store, "loo").empty
    store.close()


@pytest.mark.parametrize("command", ["status", "fit", "report", "forecast"])
def test_a_mistyped_db_path_creates_nothing(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "typo" / "deeper" / "scalerl.db"
    monkeypatch.setenv("SCALERL_DB_URL", f"sqlite:///{tmp_path / 'default.db'}")
    assert main([command, "loo", "--db", f"sqlite:///{missing}"]) != 0
    err = capsys.readouterr().err
    assert f"no store at {missing}" in err and "scalerl sweep" in err
    assert not (tmp_path / "typo").exists()
    # The default URL ($SCALERL_DB_URL, else ./scalerl.db) is not created either.
    assert main([command, "loo"]) != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_writers_still_create_and_an_empty_database_is_refused_to_readers(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()  # an existing file with no tables: a reader must not turn it into a store
    with pytest.raises(db.StoreError, match="is empty: there is no scalerl store there"):
        db.open_store(f"sqlite:///{empty}", create=False)
    assert empty.stat().st_size == 0
    made = tmp_path / "new" / "dir" / "s.db"
    db.open_store(f"sqlite:///{made}").close()  # create=True: the writers' default
    assert made.is_file()


def test_fit_on_another_axis_keeps_the_flops_fits(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{copy}"
    assert main(["fit", "loo", "--db", url, "--boot", "20", "--json"]) == 0
    assert main(["fit", "loo", "--db", url, "--boot", "20", "--json", "--axis", "gpu_hours"]) == 0
    capsys.readouterr()
    store = db.open_store(url, readonly=True)
    fits, verdicts = db.fits(store, "loo"), db.verdicts(store, "loo")
    store.close()
    assert set(fits["axis"]) == {"flops", "gpu_hours"} and set(verdicts["axis"]) == {"flops", "gpu_hours"}
    per_axis = fits.groupby("axis").size()
    assert per_axis["flops"] == per_axis["gpu_hours"] > 0
