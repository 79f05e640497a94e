"""A pyarrow that is installed but cannot be imported: reads take the Core path, same frame.

pip can pair pandas 2.1's numpy 1.26 with a pyarrow built for numpy 2 only (pyarrow 26 does not
declare it), whose import then fails. The bulk readers (ADBC for a SQLite file, COPY for
PostgreSQL) use pyarrow; without a usable one they step aside for the Core select (issue 22).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from scalerl import db
from scalerl.db import fastread

SWEEP = "arrow"


class _BrokenArrow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``pyarrow`` and fails to load it, as pyarrow 26 does under numpy 1.x."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(fullname, self) if fullname == "pyarrow" else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        raise ImportError("pyarrow requires NumPy 2.0 or newer, found 1.26.4")

    def exec_module(self, module: ModuleType) -> None:  # pragma: no cover - create_module raised
        raise AssertionError


@pytest.fixture(params=["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Store]:
    url = (
        f"sqlite:///{tmp_path / 'store.db'}"
        if request.param == "sqlite-file"
        else request.getfixturevalue("pg_url")
    )
    st = db.open_store(url, spool_dir=tmp_path / "spool")
    yield st
    st.close()


def test_an_unimportable_pyarrow_reads_the_same_curves_through_core(
    store: db.Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store.ensure_sweep(SWEEP, {})
    for i, variant in enumerate(("baseline", "loo-dapo")):
        run_id = f"{SWEEP}-r{i}"
        store.register_run(db.RunRecord(run_id, SWEEP, variant, i, {}, "h" * 16))
        with store.writer(run_id, store.start_attempt(run_id)) as w:
            for step in range(30):
                w.add(
                    step,
                    {"val/pass_rate": (i + 1) * step / 100},
                    {"flops": step * 1e12},
                    n={"val/pass_rate": 64},
                )
    with_arrow = db.curves(store, SWEEP)

    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenArrow(), *sys.meta_path])
    fastread.arrow_usable.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="scalerl.db.fastread"):
            assert not fastread.arrow_usable() and store.fast_reader() is None
            without = db.curves(store, SWEEP)
    finally:
        fastread.arrow_usable.cache_clear()
    assert "pyarrow is installed but cannot be imported (pyarrow requires NumPy 2.0" in caplog.text
    assert "fix: install a pyarrow built for this numpy" in caplog.text
    pd.testing.assert_frame_equal(without, with_arrow)
    assert len(without) == 60
