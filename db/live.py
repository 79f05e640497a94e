"""Reads for a live view of the store (``scalerl ui``): what changed since the last look.

A page left open polls; each poll must cost in proportion to what changed, not to the sweep's
size. Points carry no timestamp or sequence, but they are keyed by ``(run_id, metric, step)``
and a run's writer appends in step order, so "new points" are each run's points past the step
the viewer has seen: :func:`points_after` reads exactly those, one index range per run (the
primary key's order), for the runs the caller names (the ones that can still move: running, or
whose status or attempt just changed). A run row is small (no config), so :func:`run_rows`
reads every member of a sweep in one select; the caller diffs them.

Loading strategy: one Core select per call (``points_after`` is one ``UNION ALL`` per 100 runs,
each part an index range scan); rows come back as plain tuples and dicts, never ORM objects.
Nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select, union_all

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
