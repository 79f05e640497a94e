"""Issue 26, rules 2, 3 and 5 on the import surface: nothing lost or doubled without an error,
nothing read forever, and success means the points are in the store.

Each test is one class of hostile input; the assertions pin the exit code, the message and what the
store holds afterwards (usually: nothing at all).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalerl import db
from scalerl.db.limits import NAME_MAX, STEP_MAX
from scalerl.db.spool import ENV_SPOOL
from scalerl.harness.cli import main
from scalerl.harness.errors import ImportFormatError, StoreError
from scalerl.harness.importers.base import ImportedCurve, read_file
from scalerl.harness.importers.ingest import import_curves
from scalerl.harness.importers.wandb_runs import read_wandb_project

REAL = Path("/work/shared/data/real-rl-curves")
TB = REAL / "tensorboard-verl-async" / "q3b_fsdp_base.tfevents"


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 's.db'}"


def _sweeps(url: str) -> list[str]:
    store = db.open_store(url)
    try:
        return sorted(db.queries.sweeps(store)["name"].tolist())
    finally:
        store.close()


def _csv(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- rule 2: a name the store cannot hold fails before anything is written ---------------------


def test_metric_name_longer_than_the_column_fails_the_import_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "m" * (NAME_MAX + 1)
    src = _csv(tmp_path / "run.csv", f"step,{long},ok\n1,0.5,0.1\n2,0.6,0.2\n")
    url = _url(tmp_path)
    assert main(["import", str(src), "--sweep", "s", "--db", url]) == 7
    err = capsys.readouterr().err
    assert (
        "metric name 'mmm" in err
        and f"is {NAME_MAX + 1} characters long, more than the store's {NAME_MAX}" in err
    )
    assert "imported" not in capsys.readouterr().out
    assert not (tmp_path / "s.db").exists() or _sweeps(url) == []


def test_the_writer_refuses_what_the_columns_cannot_hold_and_keeps_the_good_points(tmp_path: Path) -> None:
    store = db.open_store(_url(tmp_path))
    try:
        store.ensure_sweep("s", {})
        store.register_run(db.RunRecord("r1", "s", "v", 0, {}, "h"))
        attempt = store.start_attempt("r1", executor="test", job_id=None, host="h")
        writer = store.writer("r1", attempt)
        with pytest.raises(StoreError, match=r"metric name 'x{57}\.\.\.' is 201 characters long"):
            writer.add(1, {"x" * 201: 0.5}, {})
        with pytest.raises(StoreError, match=rf"step={STEP_MAX + 1} is larger than the store's largest step"):
            writer.add(STEP_MAX + 1, {"ok": 0.5}, {})
        with pytest.raises(StoreError, match=r"metric 'ok' = 'abc' is not a number"):
            writer.add(2, {"ok": "abc"}, {})  # type: ignore[dict-item]
        with pytest.raises(StoreError, match=r"metric name '' is empty"):
            writer.add(3, {"": 0.5}, {})
        writer.add(STEP_MAX, {"ok": 0.25}, {})
        writer.close()
        assert writer.left_in_spool is None and writer.points_written == 1
        curve = db.queries.curves(store, "s", "ok")
        assert curve["step"].tolist() == [STEP_MAX] and curve["value"].tolist() == [0.25]
    finally:
        store.close()


def test_run_registration_refuses_names_the_columns_cannot_hold(tmp_path: Path) -> None:
    store = db.open_store(_url(tmp_path))
    try:
        with pytest.raises(StoreError, match=r"sweep name 'sss.*' is 201 characters long"):
            store.ensure_sweep("s" * 201, {})
        with pytest.raises(StoreError, match=r"run 'r1': variant 'vvv.*' is 300 characters long"):
            store.register_run(db.RunRecord("r1", "s", "v" * 300, 0, {}, "h"))
        assert db.queries.sweeps(store).empty  # refused before the transaction: nothing written
    finally:
        store.close()


def test_a_batch_the_store_refuses_fails_the_import_never_reports_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever makes the store refuse a batch (PostgreSQL's column checks, a constraint): the
    points end in the spool, so the import must fail and the run must not be ``completed``."""
    from scalerl.db.store import Store

    def refuse(self: Store, run_id: str, attempt: int, rows: Any) -> Any:
        raise RuntimeError("value too long for type character varying(200)")

    monkeypatch.setattr(Store, "write_points", refuse)
    monkeypatch.setenv(ENV_SPOOL, str(tmp_path / "spool"))
    src = _csv(tmp_path / "run.csv", "step,r\n1,0.5\n2,0.6\n")
    url = _url(tmp_path)
    rc = main(["import", str(src), "--sweep", "s", "--db", url, "--allow-partial"])
    out, err = capsys.readouterr()
    assert rc == 4, (out, err)
    assert "imported" not in out
    assert "2 point(s) did not reach the store" in err and "scalerl db replay" in err
    assert len(list((tmp_path / "spool").glob("*.jsonl"))) == 1  # kept for the replay
    monkeypatch.undo()
    store = db.open_store(url)
    try:
        runs = db.queries.runs(store, "s")
    finally:
        store.close()
    assert runs["status"].tolist() == ["failed"]


def test_postgresql_long_metric_fails_alone_with_a_clear_error(pg_url: str, tmp_path: Path) -> None:
    src = _csv(tmp_path / "run.csv", f"step,{'m' * 250},r\n1,0.5,0.1\n2,0.6,0.2\n")
    assert main(["import", str(src), "--sweep", "s", "--db", pg_url]) == 7
    ok = _csv(tmp_path / "ok" / "run.csv", "step,r\n1,0.5\n2,0.6\n")
    assert main(["import", str(ok), "--sweep", "s", "--db", pg_url]) == 0
    store = db.open_store(pg_url)
    try:
        assert db.queries.curves(store, "s", "r")["value"].tolist() == [0.5, 0.6]
        assert db.queries.runs(store, "s")["status"].tolist() == ["completed"]
    finally:
        store.close()


# --- rule 2: two runs of one name are refused, never merged ------------------------------------


def test_two_csv_files_of_one_run_name_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _csv(tmp_path / "a" / "run.csv", "step,r\n1,0.1\n2,0.2\n")
    b = _csv(tmp_path / "b" / "run.csv", "step,r\n1,0.9\n2,0.8\n")
    url = _url(tmp_path)
    assert main(["import", str(a), str(b), "--sweep", "s", "--db", url]) == 7
    err = capsys.readouterr().err
    assert "run name 'run' comes from 2 different runs" in err
    assert str(a.resolve()) in err and str(b.resolve()) in err and "fix: rename" in err
    assert not (tmp_path / "s.db").exists()
    # The same file twice is one run, not a collision.
    assert main(["import", str(a), str(a), "--sweep", "s", "--db", url]) == 0


def test_two_tensorboard_directories_of_one_name_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for parent in ("x", "y"):
        (tmp_path / parent / "r").mkdir(parents=True)
        shutil.copyfile(TB, tmp_path / parent / "r" / "events.out.tfevents.1.host")
    url = _url(tmp_path)
    rc = main(["import", str(tmp_path / "x" / "r"), str(tmp_path / "y" / "r"), "--sweep", "s", "--db", url])
    assert rc == 7
    assert "run name 'r' comes from 2 different runs" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def test_the_api_refuses_colliding_runs_too(tmp_path: Path) -> None:
    def curve(origin: str) -> ImportedCurve:
        z = np.arange(3)
        return ImportedCurve(origin, "run", "r", "step", z, z.astype(float), z * 0.1, origin=origin)

    store = db.open_store(_url(tmp_path))
    try:
        with pytest.raises(ImportFormatError, match="run name 'run' comes from 2 different runs"):
            import_curves(store, [curve("/a/run.csv"), curve("/b/run.csv")], "s")
        assert db.queries.sweeps(store).empty
    finally:
        store.close()


# --- rule 2: one bad value costs one point, counted --------------------------------------------


def test_a_non_numeric_jsonl_value_drops_that_point_only_and_is_counted(tmp_path: Path) -> None:
    lines = [f'{{"step": {s}, "r": {0.1 * s}, "name": "run-a"}}' for s in range(1, 6)]
    lines[2] = '{"step": 3, "r": "N/A", "name": "run-a"}'
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = read_file(path)
    (curve,) = result.curves  # "name" (text on every line) is not a metric
    assert curve.metric == "r" and curve.steps.tolist() == [1, 2, 4, 5]
    assert dict(result.losses.counts) == {"bad-value": 1}
    assert result.losses.examples["bad-value"] == ("line 3: r 'N/A'",)


def test_cli_refuses_a_jsonl_with_a_bad_value_unless_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "r": 0.1}\n{"step": 2, "r": "x"}\n{"step": 3, "r": 0.3}\n')
    url = _url(tmp_path)
    assert main(["import", str(path), "--sweep", "s", "--db", url]) == 7
    assert "bad-value 1 (line 2: r 'x')" in capsys.readouterr().err
    assert main(["import", str(path), "--sweep", "s", "--db", url, "--allow-partial"]) == 0
    store = db.open_store(url)
    try:
        assert db.queries.curves(store, "s", "r")["step"].tolist() == [1, 3]
    finally:
        store.close()


# --- rule 2: a W&B run is its id, whatever its display name becomes ----------------------------


@dataclass
class FakeRun:
    id: str
    name: str | None
    config: Mapping[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def scan_history(self) -> Iterable[Mapping[str, Any]]:
        return iter(self.rows)


@dataclass
class FakeApi:
    listed: list[FakeRun]

    def runs(self, path: str) -> list[FakeRun]:
        return self.listed


def test_reimporting_after_a_display_name_twin_appeared_keeps_one_stored_run_per_w_and_b_run(
    tmp_path: Path,
) -> None:
    pytest.importorskip("wandb")
    rows = [{"_step": s, "r": 0.1 * s} for s in range(1, 4)]
    first = FakeRun("aaaa1111", "grpo", rows=rows)
    second = FakeRun("bbbb2222", "grpo", rows=rows)
    store = db.open_store(_url(tmp_path))
    try:
        before = read_wandb_project("team/proj", api=FakeApi([first]))
        import_curves(store, list(before.curves), "s")
        after = read_wandb_project("team/proj", api=FakeApi([first, second]))
        summary = import_curves(store, list(after.curves), "s")
        runs = db.queries.runs(store, "s")
    finally:
        store.close()
    assert summary.new_runs == 1  # only the twin is new
    assert len(runs) == 2


# --- rule 3: nothing is read forever -----------------------------------------------------------


def test_a_device_is_refused_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    start = time.monotonic()
    rc = main(["import", "/dev/zero", "--format", "csv", "--sweep", "s", "--db", _url(tmp_path)])
    assert rc == 7 and time.monotonic() - start < 10
    assert "/dev/zero: not a regular file (a device, pipe or socket)" in capsys.readouterr().err


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ImportFormatError, match="not a regular file"):
        read_file(fifo, fmt="verl-jsonl")


def test_a_file_over_the_bound_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scalerl.harness.importers.parsed_csv import ParsedCsvImporter

    monkeypatch.setattr(ParsedCsvImporter, "max_bytes", 100)
    src = _csv(tmp_path / "run.csv", "step,r\n" + "".join(f"{s},0.5\n" for s in range(50)))
    with pytest.raises(ImportFormatError, match=r"run.csv: 347 bytes, more than the 100 a csv file may be"):
        read_file(src)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_an_alias_bomb_in_a_map_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = tmp_path / "map.yaml"
    bomb.write_text(BOMB + "variant: i\n")
    src = _csv(tmp_path / "run.csv", "step,r\n1,0.5\n")
    start = time.monotonic()
    rc = main(["import", str(src), "--map", str(bomb), "--sweep", "s", "--db", _url(tmp_path)])
    assert rc == 3 and time.monotonic() - start < 10
    assert "expands to more than 100,000 values" in capsys.readouterr().err


def test_a_map_file_that_is_a_device_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _csv(tmp_path / "run.csv", "step,r\n1,0.5\n")
    assert main(["import", str(src), "--map", "/dev/zero", "--sweep", "s", "--db", _url(tmp_path)]) == 3
    assert "/dev/zero: not a regular file" in capsys.readouterr().err


# --- rule 5: success means success -------------------------------------------------------------


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"])
def test_an_in_memory_store_is_refused_by_the_cli(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _csv(tmp_path / "run.csv", "step,r\n1,0.5\n")
    assert main(["import", str(src), "--sweep", "s", "--db", url]) == 4
    err = capsys.readouterr().err
    assert "is in memory: it ends with this process" in err and "imported" not in err
    monkeypatch.setenv("SCALERL_DB_URL", url)  # the same through the environment
    assert main(["import", str(src), "--sweep", "s"]) == 4


def test_a_header_only_csv_is_refused_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _csv(tmp_path / "run.csv", "step,r,loss\n")
    assert main(["import", str(src), "--sweep", "s", "--db", _url(tmp_path)]) == 7
    assert "run.csv: no points: the file holds no logged values" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def test_the_api_refuses_curves_without_points(tmp_path: Path) -> None:
    empty = np.array([], dtype=np.int64)
    curve = ImportedCurve("x", "run", "r", "step", empty, empty.astype(float), empty.astype(float))
    store = db.open_store(_url(tmp_path))
    try:
        with pytest.raises(ImportFormatError, match="nothing to import: the sources hold no points"):
            import_curves(store, [curve], "s")
        assert db.queries.sweeps(store).empty
    finally:
        store.close()


def test_a_mistyped_mlflow_sqlite_path_is_refused_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "mlfow.db"
    rc = main(
        ["import", f"mlflow:sqlite:///{missing}", "--experiment", "e", "--sweep", "s", "--db", _url(tmp_path)]
    )
    assert rc == 7
    assert f"no MLflow database at {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_our_own_store_is_never_read_as_an_mlflow_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(tmp_path)
    db.open_store(url).close()
    before = sorted(
        r[0] for r in sqlite3.connect(tmp_path / "s.db").execute("SELECT name FROM sqlite_master")
    )
    rc = main(["import", f"mlflow:{url}", "--experiment", "e", "--sweep", "s", "--db", url])
    assert rc == 7
    assert "is not an MLflow tracking store (it is a scalerl store)" in capsys.readouterr().err
    after = sorted(r[0] for r in sqlite3.connect(tmp_path / "s.db").execute("SELECT name FROM sqlite_master"))
    assert after == before


def test_a_missing_mlflow_file_store_is_refused_and_not_created(tmp_path: Path) -> None:
    from scalerl.harness.importers.mlflow_runs import read_mlflow

    with pytest.raises(ImportFormatError, match="no MLflow file store at"):
        read_mlflow(f"file:{tmp_path / 'mlrun'}", "e")
    assert not (tmp_path / "mlrun").exists()
