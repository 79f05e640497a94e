"""bench/ is a package run as ``python -m bench.NAME``: one loader for the real curves, no path hacks."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.fixtures.real import unavailable
from tests.unit.execution.helpers import REPO


def test_no_benchmark_edits_sys_path() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "bench").rglob("*.py"))
        if re.search(r"sys\.path\.(insert|append)", p.read_text())
    ]
    assert offenders == []


def test_the_library_never_imports_bench() -> None:
    # bench/ holds what only the benchmarks use (backtests, the calibration and noise fits); the
    # installed package has no bench, so nothing under harness/ or db/ may import it.
    offenders = [
        str(p.relative_to(REPO))
        for top in ("harness", "db")
        for p in sorted((REPO / top).rglob("*.py"))
        if re.search(r"^\s*(from|import) bench\b", p.read_text(), re.M)
    ]
    assert offenders == []


def test_one_loader_reads_every_source() -> None:
    from bench import data

    if not data.REAL.is_dir():
        unavailable("the real RL curves", f"{data.REAL} is missing")
    # No benchmark reads the curve files itself: the importer is called from bench/data.py only.
    readers = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "bench").rglob("*.py"))
        if re.search(r"\bread_(curves|file)\(", p.read_text())
    ]
    assert readers == ["bench/data.py"]
    curves = data.load_real()
    assert Counter(c.source for c in curves) == {
        data.WANDB: 17,
        data.TENSORBOARD: 22,
        data.VERL: 7,
        data.SPEEDRL: 100,
    }
    assert all(c.x.dtype.kind == "f" and c.x.size == c.y.size > 0 for c in curves)

    from bench.search.pools import build_pools

    pools = build_pools(curves)
    assert (len(pools), sum(len(p.curves) for p in pools)) == (14, 144)
    assert all(c.steps[-1] <= p.target for p in pools for c in p.curves)


@pytest.mark.parametrize(
    "name", ["search.table", "search.loso", "search.beat", "search.ties", "search.reliability"]
)
def test_each_search_experiment_is_a_module_with_a_main(name: str) -> None:
    import importlib

    assert callable(importlib.import_module(f"bench.{name}").main)
