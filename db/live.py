"""Reads for a live view of the store (``scalerl ui``): what changed since the last look.

A page left open polls; each poll must cost in proportion to what changed, not to the sweep's
size, and a page opened on a sweep must draw before every point of it could be read. Points
carry no timestamp or sequence, but they are keyed by ``(run_id, metric, step)`` and a run's
writer appends in step order, so "new points" are each run's points past the step the viewer
has seen: :func:`points_after` reads exactly those, one index range per run (the primary key's
order), for the runs the caller names (the ones that can still move: running, or whose status
or attempt just changed). A run row is small (no config), so :func:`run_rows`
reads every member of a sweep in one select; the caller diffs them. To draw a run without
reading it, :func:`point_bounds` (three index seeks per run) gives its first, second and last
step, from which a caller plans the steps to draw, :func:`points_at` reads exactly those (one
seek each) and :func:`point_stats` counts the points and finds each run's lowest and highest
one (an aggregate joined back to those rows: the database walks each run's index range, and
sends one row per run plus its extremes).

Loading strategy: one Core select per call (``points_after`` is one ``UNION ALL`` per 100 runs,
each part an index range scan; ``points_at`` one ``UNION ALL`` of ``IN`` lists per 100 runs on
SQLite, one ``LATERAL`` join over (run, step) arrays on PostgreSQL, whose planner takes a long ``UNION ALL``
slowly); rows come back as plain tuples and dicts, never ORM objects. Nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, func, or_, select, text, union_all
from sqlalchemy.orm import aliased

from scalerl.db.models import Point, Run, SweepRun

if TYPE_CHECKING:
    from scalerl.db.store import Store

# Per-run columns a live view shows (no config: it can be large, and it never changes for a run id).
RUN_ROW_COLUMNS: tuple[str, ...] = (
    "run_id",
    "variant",
    "knob",
    "alternative",
    "seed",
    "status",
    "attempts",
    "executor",
    "job_id",
    "host",
    "created_at",
    "started_at",
    "ended_at",
    "error",
    "provenance",
)
# The columns of a point row, in the order :func:`points_after` and :func:`run_points` return them.
POINT_ROW_COLUMNS: tuple[str, ...] = (
    "run_id",
    "step",
    "value",
    "nonfinite",
    "gpu_hours",
    "flops",
    "tokens",
    "samples",
    "wall_s",
    "n",
)
_MEMBER = frozenset({"variant", "knob", "alternative"})
_UNION_PARTS = 100  # selects per UNION ALL (SQLite allows 500 compound terms)
_IN_CHUNK = 500  # ids per IN list (under every driver's bound-parameter limit)
_PG_IN_CHUNK = 20_000  # psycopg's limit is 65,535 parameters


def _read(store: Store, fn: Any, doing: str) -> Any:
    return store.transaction(fn, doing=doing, write=False)


def _aware(value: Any) -> Any:
    """SQLite keeps no time zone; the store writes UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def run_rows(store: Store, sweep: str) -> list[dict[str, Any]]:
    """Every run of ``sweep`` as a dict of :data:`RUN_ROW_COLUMNS` (names as this sweep gives
    them), ordered by variant and seed. One select."""
    cols = [getattr(SweepRun if c in _MEMBER else Run, c) for c in RUN_ROW_COLUMNS]
    stmt = (
        select(*cols)
        .join(Run, Run.run_id == SweepRun.run_id)
        .where(SweepRun.sweep == sweep)
        .order_by(SweepRun.variant, Run.seed, Run.run_id)
    )
    rows = _read(store, lambda c: c.execute(stmt).all(), f"reading the runs of sweep {sweep!r}")
    out = []
    for row in rows:
        d = dict(zip(RUN_ROW_COLUMNS, row, strict=True))
        d["provenance"] = _json(d["provenance"])
        for k in ("created_at", "started_at", "ended_at"):
            d[k] = _aware(d[k])
        out.append(d)
    return out


def run_configs(store: Store, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """run_id -> stored config for the given runs (selects of 500 ids). A run's config never
    changes (its id is the config's hash), so a viewer reads each once."""
    ids = list(dict.fromkeys(run_ids))

    def fn(conn: Connection) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), _IN_CHUNK):
            stmt = select(Run.run_id, Run.config).where(Run.run_id.in_(ids[i : i + _IN_CHUNK]))
            for run_id, config in conn.execute(stmt):
                out[str(run_id)] = _json(config) or {}
        return out

    result: dict[str, dict[str, Any]] = _read(store, fn, "reading runs' configs")
    return result


def run_row(store: Store, run_id: str) -> dict[str, Any] | None:
    """One run (any sweep) as :data:`RUN_ROW_COLUMNS` (its first sweep's names) plus ``config``
    and ``sweeps`` (every sweep it belongs to); None when there is no such run. Two selects."""
    cols = [getattr(Run, c) for c in RUN_ROW_COLUMNS if c not in _MEMBER] + [Run.config]

    def fn(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(
            select(*cols, Run.variant, Run.knob, Run.alternative).where(Run.run_id == run_id)
        ).first()
        if row is None:
            return None
        names = [c for c in RUN_ROW_COLUMNS if c not in _MEMBER] + [
            "config",
            "variant",
            "knob",
            "alternative",
        ]
        d = dict(zip(names, row, strict=True))
        d["sweeps"] = sorted(
            conn.execute(select(SweepRun.sweep).where(SweepRun.run_id == run_id)).scalars().all()
        )
        return d

    found: dict[str, Any] | None = _read(store, fn, f"reading run {run_id!r}")
    if found is not None:
        found["provenance"] = _json(found["provenance"])
        found["config"] = _json(found["config"]) or {}
        for k in ("created_at", "started_at", "ended_at"):
            found[k] = _aware(found[k])
    return found


def points_after(store: Store, metric: str, cursors: Mapping[str, int]) -> list[tuple[Any, ...]]:
    """The points of ``metric`` past each run's cursor: for every ``run_id -> step`` in
    ``cursors``, the run's points with a larger step (``-1``: all of them). Rows are tuples of
    :data:`POINT_ROW_COLUMNS`, ordered by run then step. One ``UNION ALL`` per 100 runs, each
    part a range of the primary key (run_id, metric, step), so the cost is the rows returned
    plus one index seek per run."""
    items = sorted(cursors.items())
    if not items:
        return []
    cols = [getattr(Point, c) for c in POINT_ROW_COLUMNS]

    def fn(conn: Connection) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for i in range(0, len(items), _UNION_PARTS):
            parts = [
                select(*cols).where(Point.run_id == run_id, Point.metric == metric, Point.step > int(after))
                for run_id, after in items[i : i + _UNION_PARTS]
            ]
            stmt = parts[0] if len(parts) == 1 else union_all(*parts)
            rows = conn.execute(stmt).all()
            out.extend(tuple(r) for r in rows)
        out.sort(key=lambda r: (r[0], r[1]))
        return out

    result: list[tuple[Any, ...]] = _read(store, fn, f"reading new points of {metric!r}")
    return result


def run_metrics(store: Store, run_id: str) -> list[str]:
    """The metrics one run logged, sorted (an index prefix of the primary key)."""
    stmt = select(Point.metric).where(Point.run_id == run_id).distinct()
    rows = _read(store, lambda c: c.execute(stmt).scalars().all(), f"reading the metrics of run {run_id!r}")
    return sorted(map(str, rows))


@dataclass(frozen=True)
class PointStats:
    """One run's points of a metric as :func:`point_stats` counts them: ``points`` (how many),
    ``first`` and ``last`` step, and ``extremes``: the point rows (:data:`POINT_ROW_COLUMNS`, in
    step order) holding its lowest and its highest finite value (ties: every such row)."""

    points: int
    first: int
    last: int
    extremes: tuple[tuple[Any, ...], ...]


def point_stats(store: Store, metric: str, run_ids: Sequence[str]) -> dict[str, PointStats]:
    """run_id -> :class:`PointStats` of ``metric`` for the given runs that logged it. One
    statement per 500 runs: an aggregate (the database walks each run's index range; one row
    per run comes back) joined back to the rows holding each run's lowest and highest value.
    Count, steps and extremes come from one statement, so they agree even while a writer
    appends."""
    ids = list(dict.fromkeys(run_ids))
    cols = [getattr(Point, c) for c in POINT_ROW_COLUMNS]

    # PostgreSQL answers the aggregate by scanning the table (in parallel) whatever the runs
    # asked, so one statement for them all; SQLite walks each run's index range, 500 per IN list.
    chunk = _PG_IN_CHUNK if store.dialect == "postgresql" else _IN_CHUNK

    def fn(conn: Connection) -> dict[str, PointStats]:
        found: dict[str, tuple[int, int, int, list[tuple[Any, ...]]]] = {}
        for i in range(0, len(ids), chunk):
            agg = (
                select(
                    Point.run_id.label("rid"),
                    func.count().label("n"),
                    func.min(Point.step).label("first"),
                    func.max(Point.step).label("last"),
                    func.min(Point.value).label("lo"),
                    func.max(Point.value).label("hi"),
                )
                .where(Point.metric == metric, Point.run_id.in_(ids[i : i + chunk]))
                .group_by(Point.run_id)
                .subquery()
            )
            # An outer join: a run whose every value is non-finite has no extreme, but a count.
            on = and_(
                Point.run_id == agg.c.rid,
                Point.metric == metric,
                or_(Point.value == agg.c.lo, Point.value == agg.c.hi),
            )
            stmt = select(agg.c.rid, agg.c.n, agg.c.first, agg.c.last, *cols).select_from(
                agg.outerjoin(Point, on)
            )
            for rid, n, first, last, *row in conn.execute(stmt).all():
                got = found.setdefault(str(rid), (int(n), int(first), int(last), []))
                if row[0] is not None:
                    got[3].append(tuple(row))
        return {
            rid: PointStats(n, first, last, tuple(sorted(rows, key=lambda r: int(r[1]))))
            for rid, (n, first, last, rows) in found.items()
        }

    result: dict[str, PointStats] = _read(store, fn, f"counting the points of {metric!r}")
    return result


def point_bounds(store: Store, metric: str, run_ids: Sequence[str]) -> dict[str, tuple[int, int | None, int]]:
    """run_id -> (first step, second step or None, last step) of ``metric`` for the given runs
    that logged it: three seeks of the primary key per run (selects of 500 runs), whatever the
    number of points."""
    ids = list(dict.fromkeys(run_ids))
    later = aliased(Point)
    mine = (Point.run_id == Run.run_id, Point.metric == metric)
    first = select(func.min(Point.step)).where(*mine).correlate(Run).scalar_subquery()
    second = (
        select(func.min(later.step))
        .where(later.run_id == Run.run_id, later.metric == metric, later.step > first)
        .scalar_subquery()
    )
    last = select(func.max(Point.step)).where(*mine).scalar_subquery()

    def fn(conn: Connection) -> dict[str, tuple[int, int | None, int]]:
        out: dict[str, tuple[int, int | None, int]] = {}
        for i in range(0, len(ids), _IN_CHUNK):
            stmt = select(Run.run_id, first, second, last).where(Run.run_id.in_(ids[i : i + _IN_CHUNK]))
            for run_id, lo, lo2, hi in conn.execute(stmt).all():
                if lo is not None and hi is not None:
                    out[str(run_id)] = (int(lo), None if lo2 is None else int(lo2), int(hi))
        return out

    result: dict[str, tuple[int, int | None, int]] = _read(store, fn, f"reading the step range of {metric!r}")
    return result


def points_at(store: Store, metric: str, steps: Mapping[str, Sequence[int]]) -> list[tuple[Any, ...]]:
    """The points of ``metric`` at the given steps of each run (``run_id -> steps``; a step the
    run did not log is skipped), as tuples of :data:`POINT_ROW_COLUMNS` ordered by run then
    step. One primary-key seek per step: the cost is the rows asked for, not the run's size."""
    items = [(run_id, sorted({int(s) for s in wanted})) for run_id, wanted in sorted(steps.items()) if wanted]
    if not items:
        return []
    reader = _points_at_postgresql if store.dialect == "postgresql" else _points_at_core
    result: list[tuple[Any, ...]] = _read(
        store, lambda conn: reader(conn, metric, items), f"reading points of {metric!r} to draw"
    )
    result.sort(key=lambda r: (r[0], r[1]))
    return result


def _points_at_core(
    conn: Connection, metric: str, items: list[tuple[str, list[int]]]
) -> list[tuple[Any, ...]]:
    # Written as text: built as SQLAlchemy expressions, 1,000 selects cost more to construct and
    # compile than SQLite takes to answer them. The steps are our own integers, written into the
    # statement: bound, a lab-scale sweep's 40,000 of them would pass SQLite's parameter limit.
    cols = ", ".join(POINT_ROW_COLUMNS)
    out: list[tuple[Any, ...]] = []
    for i in range(0, len(items), _UNION_PARTS):
        chunk = items[i : i + _UNION_PARTS]
        sql = " UNION ALL ".join(
            f"SELECT {cols} FROM point WHERE run_id = :r{j} AND metric = :metric "
            f"AND step IN ({','.join(str(int(s)) for s in wanted)})"
            for j, (_, wanted) in enumerate(chunk)
        )
        params: dict[str, Any] = {f"r{j}": run_id for j, (run_id, _) in enumerate(chunk)}
        params["metric"] = metric
        out.extend(map(tuple, conn.execute(text(sql), params).all()))
    return out


def _points_at_postgresql(
    conn: Connection, metric: str, items: list[tuple[str, list[int]]]
) -> list[tuple[Any, ...]]:
    # One statement: the (run, step) pairs as two arrays, joined LATERAL so each pair is one seek
    # of the whole primary key. (Each run's steps as one array, ``step = ANY(...)``, was planned
    # as a walk of the run's range with the steps as a filter: 2.2 s instead of 0.46 s for 37,000
    # points of 10^6 on a store not yet analyzed.)
    cols = ", ".join(f"p.{c}" for c in POINT_ROW_COLUMNS)
    stmt = text(
        f"SELECT {cols} FROM unnest(CAST(:runs AS TEXT[]), CAST(:steps AS INTEGER[])) AS t(run_id, step) "
        "CROSS JOIN LATERAL (SELECT * FROM point q WHERE q.run_id = t.run_id AND q.metric = :metric "
        "AND q.step = t.step OFFSET 0) AS p"
    )
    runs = [run_id for run_id, wanted in items for _ in wanted]
    steps = [int(step) for _, wanted in items for step in wanted]
    return list(map(tuple, conn.execute(stmt, {"runs": runs, "steps": steps, "metric": metric}).all()))
