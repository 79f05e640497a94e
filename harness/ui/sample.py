"""What the live view reads of a run to draw it, without reading the run.

A lab-scale sweep holds a million points; reading them before the page can draw took 4-7 s on
the machine bench/README.md names, and a lab opens sweeps the server has not read all the time
(another sweep, a restart). :func:`read_drawn` reads instead, per run of the view's metric:

- its first, second and last step (:func:`scalerl.db.live.point_bounds`: three index seeks);
  runs that log every ``s`` steps (the writer's and most trackers' way) have their steps on the
  grid ``first + k * s``, so the ranks :func:`scalerl.harness.report.downsample.grid_indices`
  picks (evenly spaced and log-spaced, first and last) are known steps, read by one index seek
  each (:func:`scalerl.db.live.points_at`);
- beside it, in a second thread, its point count, step range and the points holding its
  lowest and highest value (:func:`scalerl.db.live.point_stats`: one aggregate the database
  answers, sending one row per run plus its extremes), added to the sample: a spike the grid
  steps over is still drawn. A run's sample is kept only when that count and range are the
  grid's (and every asked step came back); a run whose steps are not on one grid, or that moved
  between the two reads, is read whole (:func:`scalerl.db.live.points_after`), which costs its
  own size only.

So a sample always holds the run's first, last, lowest and highest point. It is the first draw
only: :meth:`scalerl.harness.ui.live.SweepLive.load_full` then reads every point and draws each
run by the report's rule, as the static report does. Fits read every point themselves
(:mod:`scalerl.harness.ui.fitting`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from scalerl.db import live as store_live

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scalerl.db.store import Store


@dataclass(frozen=True)
class Drawn:
    """One run as read to draw it: ``points`` (how many it has), ``rows``
    (:data:`scalerl.db.live.POINT_ROW_COLUMNS` tuples in step order, the last one the run's last
    point) and ``whole`` (True: ``rows`` is every point; False: the grid's sample of them)."""

    points: int
    rows: list[tuple[Any, ...]]
    whole: bool


def grid_steps(bounds: tuple[int, int | None, int], max_points: int) -> tuple[int, list[int]] | None:
    """(points on the grid, steps to draw) for a run whose (first, second, last) step is
    ``bounds``, if its steps can lie on one grid; None when they cannot (read it whole)."""
    first, second, last = bounds
    if second is None:
        return 1, [first]
    stride = second - first
    if (last - first) % stride:
        return None
    n = (last - first) // stride + 1
    return n, [first + r * stride for r in _ranks(n, max_points)]


@lru_cache(maxsize=64)
def _ranks(n: int, max_points: int) -> tuple[int, ...]:
    """:func:`~scalerl.harness.report.downsample.grid_indices` as ints, once per size (a sweep's
    runs mostly share one)."""
    from scalerl.harness.report.downsample import grid_indices

    return tuple(int(r) for r in grid_indices(n, max_points))


def read_drawn(store: Store, metric: str, run_ids: Sequence[str], max_points: int) -> dict[str, Drawn]:
    """run_id -> :class:`Drawn` for the given runs that logged ``metric`` (see the module
    docstring): at most about ``max_points`` points per run unless the run is read whole."""
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        return {}
    # The count walks every run's index in the database while this thread seeks the grid: the
    # two reads overlap (the driver releases the interpreter while the database works).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalerl-ui-count") as pool:
        counted = pool.submit(store_live.point_stats, store, metric, ids)
        plans: dict[str, tuple[int, list[int]]] = {}
        whole: list[str] = []
        for run_id, bounds in store_live.point_bounds(store, metric, ids).items():
            plan = grid_steps(bounds, max_points)
            if plan is None:
                whole.append(run_id)
            else:
                plans[run_id] = plan
        got = store_live.points_at(store, metric, {rid: steps for rid, (_, steps) in plans.items()})
        stats = counted.result()
    by_run: dict[str, list[tuple[Any, ...]]] = {}
    for row in got:
        by_run.setdefault(str(row[0]), []).append(row)
    out: dict[str, Drawn] = {}
    for run_id, (n, steps) in plans.items():
        rows = by_run.get(run_id, [])
        st = stats.get(run_id)
        if (
            st is not None
            and (st.points, st.first, st.last) == (n, steps[0], steps[-1])
            and len(rows) == len(steps)
        ):
            if len(rows) < n:  # a sample: add the run's lowest and highest points to it
                seen = {int(r[1]) for r in rows}
                extra = [r for r in st.extremes if int(r[1]) not in seen]
                rows = sorted([*rows, *extra], key=lambda r: int(r[1])) if extra else rows
            out[run_id] = Drawn(points=n, rows=rows, whole=len(rows) == n)
        else:  # off the grid, or moved between the reads
            whole.append(run_id)
    if whole:
        read: dict[str, list[tuple[Any, ...]]] = {}
        for row in store_live.points_after(store, metric, dict.fromkeys(whole, -1)):
            read.setdefault(str(row[0]), []).append(row)
        for run_id, rows in read.items():
            out[run_id] = Drawn(points=len(rows), rows=rows, whole=True)
    return out
