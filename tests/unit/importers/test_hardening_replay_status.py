"""Issue 26, rule 7: a run whose store connection died mid-import does not stay ``running``
forever: ``scalerl db replay`` stores its spooled points and then ends it as the import would
have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalerl import db
from scalerl.db import queries
from scalerl.db.errors import StoreError, StoreUnavailableError
from scalerl.db.spool import replay
from scalerl.harness.importers.base import ImportedCurve
from scalerl.harness.importers.ingest import import_curves


def _curve() -> ImportedCurve:
    steps = np.arange(0, 50, 5, dtype=np.int64)
    return ImportedCurve(
        source="r.csv",
        run="r",
        metric="val/pass_rate",
        x_name="step",
        steps=steps,
        x=steps.astype(float),
        values=np.linspace(0.1, 0.5, len(steps)),
    )


def test_a_run_whose_store_died_mid_import_is_completed_by_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    spool = tmp_path / "spool"
    store = db.open_store(url, spool_dir=spool)
    real_write, real_finish = store.write_points, store.finish_run
    dead = {"now": False}

    def write_points(*args: Any, **kwargs: Any) -> Any:
        if dead["now"] or args[2]:  # the connection dies at the first batch of points
            dead["now"] = True
            raise StoreUnavailableError("connection to server lost")
        return real_write(*args, **kwargs)

    def finish_run(*args: Any, **kwargs: Any) -> Any:
        if dead["now"]:
            raise StoreUnavailableError("connection to server lost")
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(store, "write_points", write_points)
    monkeypatch.setattr(store, "finish_run", finish_run)
    with pytest.raises(StoreError):
        import_curves(store, [_curve()], "imp")
    (row,) = queries.runs(store, "imp").to_dict("records")
    assert row["status"] == "running" and row["n_points"] == 0  # as the dead store left it
    # The database is back: the replay stores the points and ends the run.
    monkeypatch.setattr(store, "write_points", real_write)
    monkeypatch.setattr(store, "finish_run", real_finish)
    report = replay(db.open_store(url), spool)
    assert report.points == 10
    (row,) = queries.runs(store, "imp").to_dict("records")
    assert (row["status"], row["n_points"]) == ("completed", 10)
    assert not list(spool.glob("*")) or all(p.is_dir() for p in spool.iterdir())  # nothing left behind
