"""Read API: pandas DataFrames with the columns in ``docs/architecture.md``.

Sweep scope: a run can belong to several sweeps (``sweep_run``, one row per membership), so
every sweep-scoped query goes through membership, and ``variant``/``knob``/``alternative`` (and
``runs``' ``sweep``) are the ones *that* sweep gives the run.

Loading strategy, per query:

- ``curves``: the hot one (a sweep can hold millions of points). Runs' metadata is read once
  (a small Core select); points are read without a join, as columns, and the per-run columns
  (variant, knob, alternative, seed) are attached by indexing arrays with the run codes. On a
  SQLite file the points come through ADBC's SQLite driver, in a helper process, straight into
  Arrow columns: numbers only (each point's run and metric come from a per-(run, metric) count
  query in the same snapshot), runs split into parts read in parallel; on PostgreSQL through
  ``COPY ... TO STDOUT`` (CSV) parsed by pyarrow's CSV reader; elsewhere (in-memory SQLite, ADBC
  missing) through one Core select whose rows are transposed into column arrays.
  ``_POINT_READERS`` is the registry.
- ``sweeps``, ``runs``, ``fits``, ``verdicts``, ``events``: one Core select each (``runs`` adds
  one GROUP BY for point counts); small tables, built from rows. ``progress``: the runs' configs
  (for their budgets) and one GROUP BY for the compute each has reached.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Select, String, case, cast, func, or_, select

from scalerl.db.models import FIT_COLUMNS, VERDICT_COLUMNS, Event, Fit, Point, Run, Sweep, SweepRun, Verdict
from scalerl.harness.axes import COMPUTE_UNITS

if TYPE_CHECKING:
    import pandas as pd

    from scalerl.db.store import Store

log = logging.getLogger(__name__)
# How many parallel parts a SQLite curves read is split into (by run): the helper process steps
# SQLite in one thread per part, so two parts use both cores of a 2-core machine.
READ_PARTS = 2
_PART_IDS = 10_000


@dataclass(frozen=True)
class PointScope:
    """What a curves read covers: ``stmt`` (the points select, filtered by sweep membership and
    the caller's metric / run ids), the run ids it covers (sorted) and the metric filter."""

    stmt: Select[Any]
    run_ids: tuple[str, ...]
    metric: str | None


CURVE_COLUMNS: tuple[str, ...] = (
    "run_id", "variant", "knob", "alternative", "seed", "step", "metric", "value", "n", "gpu_hours",
    "flops", "tokens", "samples", "wall_s",
)  # fmt: skip
_POINT_COLUMNS = ("run_id", "step", "metric", "value", "nonfinite", "gpu_hours", "flops", "tokens",
                  "samples", "wall_s", "n")  # fmt: skip
# Read as float64 columns (NULL -> NaN): the value, the compute units and n.
_FLOAT_COLUMNS = ("value", *COMPUTE_UNITS, "n")
RUN_COLUMNS: tuple[str, ...] = (
    "run_id", "sweep", "variant", "knob", "alternative", "seed", "config_hash", "status", "attempts",
    "executor", "job_id", "host", "created_at", "started_at", "ended_at", "error", "provenance",
    "n_points", "last_step",
)  # fmt: skip


_MEMBER_COLUMNS = frozenset({"sweep", "variant", "knob", "alternative"})


def _members(sweep: str) -> Select[Any]:
    """The run ids of a sweep: its membership rows (a run can belong to several sweeps)."""
    return select(SweepRun.run_id).where(SweepRun.sweep == sweep)


def _read(store: Store, fn: Any, doing: str) -> Any:
    return store.transaction(fn, doing=doing, write=False)


def sweeps(store: Store) -> pd.DataFrame:
    """Columns: name, spec (dict), created_at, n_runs. One select with a count subquery."""
    import pandas as pd

    n_runs = select(func.count()).where(SweepRun.sweep == Sweep.name).scalar_subquery()
    stmt = select(Sweep.name, Sweep.spec, Sweep.created_at, n_runs.label("n_runs")).order_by(Sweep.name)
    rows = _read(store, lambda c: c.execute(stmt).all(), "listing sweeps")
    return pd.DataFrame([tuple(r) for r in rows], columns=["name", "spec", "created_at", "n_runs"])


def runs(store: Store, sweep: str) -> pd.DataFrame:
    """Columns: RUN_COLUMNS. Runs select + one grouped count of points per run."""
    import pandas as pd

    def fn(conn: Connection) -> pd.DataFrame:
        # The sweep and the names are this sweep's (its membership row), the rest the run's own.
        cols = [getattr(SweepRun if c in _MEMBER_COLUMNS else Run, c) for c in RUN_COLUMNS[:-2]]
        rows = conn.execute(
            select(*cols)
            .join(Run, Run.run_id == SweepRun.run_id)
            .where(SweepRun.sweep == sweep)
            .order_by(SweepRun.variant, Run.seed)
        ).all()
        counts = conn.execute(
            select(Point.run_id, func.count(), func.max(Point.step))
            .where(Point.run_id.in_(_members(sweep)))
            .group_by(Point.run_id)
        ).all()
        per_run = {r[0]: (int(r[1]), int(r[2])) for r in counts}
        out = [(*r, *per_run.get(r[0], (0, None))) for r in rows]
        return pd.DataFrame(out, columns=list(RUN_COLUMNS))

    df: pd.DataFrame = _read(store, fn, f"listing the runs of sweep {sweep!r}")
    return df


def run_states(store: Store, run_ids: Sequence[str]) -> dict[str, tuple[str, int, dict[str, Any] | None]]:
    """run_id -> (status, attempts, provenance) for the given runs that exist, whatever sweeps
    they belong to (a planned run may have been made by another sweep). Selects of 500 ids."""
    ids = list(dict.fromkeys(run_ids))

    def fn(conn: Connection) -> dict[str, tuple[str, int, dict[str, Any] | None]]:
        out: dict[str, tuple[str, int, dict[str, Any] | None]] = {}
        for i in range(0, len(ids), 500):  # under every driver's bound-parameter limit
            chunk = ids[i : i + 500]
            stmt = select(Run.run_id, Run.status, Run.attempts, Run.provenance).where(Run.run_id.in_(chunk))
            for run_id, status, attempts, prov in conn.execute(stmt):
                prov = json.loads(prov) if isinstance(prov, str) else prov
                out[str(run_id)] = (str(status), int(attempts), prov)
        return out

    result: dict[str, tuple[str, int, dict[str, Any] | None]] = _read(store, fn, "reading runs' states")
    return result


def point_count(store: Store, run_id: str) -> int:
    """How many points the store holds for one run (one indexed COUNT)."""

    def fn(conn: Connection) -> int:
        return int(conn.execute(select(func.count()).where(Point.run_id == run_id)).scalar_one())

    n: int = _read(store, fn, f"counting the points of run {run_id!r}")
    return n


PROGRESS_COLUMNS: tuple[str, ...] = ("run_id", "status", "budget", "unit", "reached")
_BUDGET_UNITS = ("steps", "gpu_hours", "flops", "tokens", "samples")


def progress(store: Store, sweep: str) -> pd.DataFrame:
    """How far each run of a sweep is on its planned compute. Columns: PROGRESS_COLUMNS: the run's
    ``budget`` and ``unit`` as its stored config plans them (``config["budget"]``; NaN / None when
    the config has none, e.g. imported or simulated runs) and ``reached``, the compute it has
    logged in that unit (its last step for ``steps``, the largest value of the unit's column
    otherwise; NaN when no point carries it). An ``--extend`` is not applied here (see
    ``scalerl.harness.execution.extend.extensions``). One select of the runs' configs + one GROUP BY."""
    import pandas as pd

    def fn(conn: Connection) -> pd.DataFrame:
        rows = conn.execute(
            select(Run.run_id, Run.status, Run.config)
            .join(SweepRun, Run.run_id == SweepRun.run_id)
            .where(SweepRun.sweep == sweep)
            .order_by(Run.run_id)
        ).all()
        maxes = conn.execute(
            select(
                Point.run_id,
                func.max(Point.step),
                *[func.max(getattr(Point, u)) for u in _BUDGET_UNITS[1:]],
            )
            .where(Point.run_id.in_(_members(sweep)))
            .group_by(Point.run_id)
        ).all()
        reached = {r[0]: dict(zip(_BUDGET_UNITS, r[1:], strict=True)) for r in maxes}
        out = []
        for run_id, status, config in rows:
            cfg = config if isinstance(config, dict) else json.loads(config or "{}")
            planned = cfg.get("budget")
            budget: dict[str, Any] = planned if isinstance(planned, dict) else {}
            unit = budget.get("unit", "steps") if "value" in budget else None
            value = float(budget["value"]) if unit is not None else float("nan")
            got = (reached.get(run_id) or {}).get(unit) if unit in _BUDGET_UNITS else None
            out.append((run_id, status, value, unit, float("nan") if got is None else float(got)))
        return pd.DataFrame(out, columns=list(PROGRESS_COLUMNS))

    df: pd.DataFrame = _read(store, fn, f"reading the progress of sweep {sweep!r}")
    return df


def curves(
    store: Store,
    sweep: str,
    metric: str | None = None,
    *,
    run_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every point of a sweep (optionally one metric / some runs), ordered by run, metric, step.

    Columns: CURVE_COLUMNS. ``value`` is NaN/±inf where a non-finite value was written. ``n``
    (float64) is the number of Bernoulli samples behind the value, NaN when the writer did not
    give it (imported curves, points written before schema 0004).
    """
    import pandas as pd

    meta_rows = _read(
        store,
        lambda c: c.execute(
            select(SweepRun.run_id, SweepRun.variant, SweepRun.knob, SweepRun.alternative, Run.seed)
            .join(Run, Run.run_id == SweepRun.run_id)
            .where(SweepRun.sweep == sweep)
            .order_by(SweepRun.run_id)
        ).all(),
        f"reading the runs of sweep {sweep!r}",
    )
    if run_ids is not None:
        wanted = set(run_ids)
        meta_rows = [r for r in meta_rows if r[0] in wanted]
    meta = pd.DataFrame(
        [tuple(r) for r in meta_rows], columns=["run_id", "variant", "knob", "alternative", "seed"]
    )
    stmt = select(*[getattr(Point, c) for c in _POINT_COLUMNS]).where(Point.run_id.in_(_members(sweep)))
    if metric is not None:
        stmt = stmt.where(Point.metric == metric)
    if run_ids is not None:
        stmt = stmt.where(Point.run_id.in_(list(run_ids)))
    # No ORDER BY here: SQLite's readers add it (free: points are clustered by that key), while
    # on PostgreSQL the sort costs more than the scan, so _assemble sorts the codes instead.
    reader = _POINT_READERS[_reader_kind(store)]
    scope = PointScope(stmt, tuple(meta["run_id"]), metric)
    columns = reader(store, scope) if run_ids is None or run_ids else None
    if columns is None:
        columns = _read_points_core(store, scope)
    return _assemble(columns, meta)


def logged_metrics(store: Store, sweep: str) -> list[str]:
    """The metrics any run of ``sweep`` logged, sorted: what a mistyped ``--metric`` could be."""
    return sorted(
        _read(
            store,
            lambda c: (
                c.execute(select(Point.metric).where(Point.run_id.in_(_members(sweep))).distinct())
                .scalars()
                .all()
            ),
            f"reading the metrics of sweep {sweep!r}",
        )
    )


def _reader_kind(store: Store) -> str:
    if store.dialect == "postgresql":
        return "copy"
    return "adbc" if store.fast_reader() is not None else "core"


def _columns_from_arrow(table: Any) -> dict[str, Any]:
    """Column arrays from an Arrow table without a Python object per value.

    Strings are dictionary-encoded (codes + a small dictionary -> Categorical); the sparse
    ``nonfinite`` flags become two boolean masks.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, Any] = {}
    for name in ("run_id", "metric"):
        enc = pc.dictionary_encode(table.column(name)).combine_chunks()
        codes = enc.indices.to_numpy(zero_copy_only=False)
        out[name] = pd.Categorical.from_codes(codes, categories=enc.dictionary.to_pylist())
    # SQLite has no column types: an all-NULL column arrives typed by guess; cast it.
    flags = table.column("nonfinite").cast(pa.string())
    out["+inf"] = pc.fill_null(pc.equal(flags, "+inf"), False).to_numpy(zero_copy_only=False)
    out["-inf"] = pc.fill_null(pc.equal(flags, "-inf"), False).to_numpy(zero_copy_only=False)
    out["step"] = table.column("step").to_numpy(zero_copy_only=False).astype(np.int64)
    for name in _FLOAT_COLUMNS:
        # NULL -> NaN.
        out[name] = table.column(name).cast(pa.float64()).to_numpy(zero_copy_only=False)
    return out


def _run_parts(run_ids: Sequence[str]) -> list[list[str]]:
    """The sorted ``run_ids`` cut into contiguous parts: at least ``READ_PARTS`` (when there are
    that many runs), at most ``_PART_IDS`` ids each (SQLite caps bound parameters per query)."""
    ids = sorted(run_ids)
    n = max(min(READ_PARTS, len(ids)), -(-len(ids) // _PART_IDS))
    cuts = [round(i * len(ids) / n) for i in range(n + 1)]
    return [ids[cuts[i] : cuts[i + 1]] for i in range(n)]


def _read_points_adbc(store: Store, scope: PointScope) -> dict[str, Any] | None:
    """SQLite file: ADBC in a helper process, Arrow columns back (see scalerl.db.fastread).

    Two queries per part, in one snapshot, so no string crosses per point: the (run, metric)
    groups in key order with their sizes and their few non-finite flags (``step:flag`` lists),
    then the points' numbers alone in the same order; each point's run and metric are the groups
    repeated by size (ADBC's per-cell cost dominates: the flags column alone cost ~0.3 s per 1M
    rows). Parts are contiguous runs named by an explicit IN list (SQLite then seeks each run's
    key range; a membership subquery plus a range made every part scan every run) and are read
    in parallel by the helper.
    """
    import pandas as pd
    import pyarrow as pa

    reader, path = store.fast_reader(), store.sqlite_path
    assert reader is not None and path is not None
    if not scope.run_ids:
        return None  # nothing to read: the Core path answers an empty frame at once
    filters = [Point.metric == scope.metric] if scope.metric is not None else []
    flag = case((Point.nonfinite.is_not(None), cast(Point.step, String) + ":" + Point.nonfinite))
    numbers = ("step", *_FLOAT_COLUMNS)
    parts = []
    for ids in _run_parts(scope.run_ids):
        where = [Point.run_id.in_(ids), *filters]
        groups_stmt = (
            select(Point.run_id, Point.metric, func.count().label("n"))
            .add_columns(func.group_concat(flag).label("flags"))
            .where(*where)
            .group_by(Point.run_id, Point.metric)
            .order_by(Point.run_id, Point.metric)
        )
        points_stmt = (
            select(*[getattr(Point, c) for c in numbers])
            .where(*where)
            .order_by(Point.run_id, Point.metric, Point.step)
        )
        parts.append([_sqlite_sql(groups_stmt), _sqlite_sql(points_stmt)])
    try:
        answers = reader.query_parts(path, parts)
    except RuntimeError as err:  # the helper failed twice: the Core path still answers
        log.warning("fast SQLite reader failed, using the Core path: %s", err)
        return None

    # Per part, then joined: SQLite has no column types, so an empty or all-NULL column arrives
    # typed by guess (parts may disagree); every column is cast before it is joined.
    def joined(column: str, typ: Any, tables: list[Any]) -> Any:
        return np.concatenate([t.column(column).cast(typ).to_numpy(zero_copy_only=False) for t in tables])

    groups, points = [a[0] for a in answers], [a[1] for a in answers]
    sizes = joined("n", pa.int64(), groups)
    step = joined("step", pa.int64(), points)
    if int(sizes.sum()) != len(step):  # cannot happen in one snapshot; never guess
        log.warning("fast SQLite reader: group sizes disagree with the rows, using the Core path")
        return None
    out: dict[str, Any] = {"step": step}
    for name in ("run_id", "metric"):
        per_group = pd.Categorical([v for t in groups for v in t.column(name).to_pylist()])
        out[name] = pd.Categorical.from_codes(np.repeat(per_group.codes, sizes), per_group.categories)
    for name in numbers[1:]:
        out[name] = joined(name, pa.float64(), points)  # NULL -> NaN
    out["+inf"], out["-inf"] = np.zeros(len(step), dtype=bool), np.zeros(len(step), dtype=bool)
    starts = np.cumsum(sizes) - sizes
    all_flags = [v for t in groups for v in t.column("flags").cast(pa.string()).to_pylist()]
    for start, size, flags in zip(starts, sizes, all_flags, strict=True):
        for entry in flags.split(",") if flags else ():
            at, kind = entry.split(":")
            if kind in ("+inf", "-inf"):  # 'nan' is already NaN
                pos = int(start) + int(np.searchsorted(step[start : start + size], int(at)))
                out[kind][pos] = True
    return out


def _sqlite_sql(stmt: Select[Any]) -> tuple[str, list[Any]]:
    from sqlalchemy.dialects import sqlite

    compiled = stmt.compile(dialect=sqlite.dialect(), compile_kwargs={"render_postcompile": True})
    return str(compiled), [compiled.params[name] for name in compiled.positiontup or []]


def _read_points_copy(store: Store, scope: PointScope) -> dict[str, Any] | None:
    """PostgreSQL: ``COPY (query) TO STDOUT`` as CSV, parsed into Arrow by pyarrow's CSV reader.

    COPY takes no bind parameters, so the query's parameters are bound client-side by psycopg
    (``ClientCursor.mogrify``, its quoting), never by string formatting here.
    """
    import io

    import psycopg

    from scalerl.db import fastread

    if not fastread.arrow_usable():
        return None  # the Core path answers
    import pyarrow as pa
    from pyarrow import csv

    compiled = scope.stmt.compile(dialect=store.engine.dialect, compile_kwargs={"render_postcompile": True})

    def fn(conn: Connection) -> bytes:
        raw = conn.connection.driver_connection
        assert raw is not None
        query = psycopg.ClientCursor(raw).mogrify(str(compiled), compiled.params)
        buf = io.BytesIO()
        with raw.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)") as copy:
            for chunk in copy:
                buf.write(chunk)
        return buf.getvalue()

    data = _read(store, fn, "reading curves")
    types = {name: pa.float64() for name in _FLOAT_COLUMNS}
    types |= {"run_id": pa.string(), "metric": pa.string(), "nonfinite": pa.string(), "step": pa.int64()}
    if not data:
        # COPY of no rows writes nothing, and Arrow refuses an empty CSV: a sweep with no points
        # yet (every fresh sweep's first `--wait` tick) is an empty frame, not an error.
        return _columns_from_arrow(
            pa.schema([(c, types.get(c, pa.string())) for c in _POINT_COLUMNS]).empty_table()
        )
    table = csv.read_csv(
        io.BytesIO(data),
        read_options=csv.ReadOptions(column_names=list(_POINT_COLUMNS)),
        convert_options=csv.ConvertOptions(
            column_types=types, null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=False
        ),
    )
    return _columns_from_arrow(table)


def _read_points_core(store: Store, scope: PointScope) -> dict[str, Any]:
    """Anywhere: one Core select, rows transposed into column arrays."""
    import pandas as pd

    ordered = scope.stmt.order_by(Point.run_id, Point.metric, Point.step)
    rows = _read(store, lambda c: c.execute(ordered).all(), "reading curves")
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in _POINT_COLUMNS]
    by_name = dict(zip(_POINT_COLUMNS, cols, strict=True))
    flags = np.array(by_name["nonfinite"], dtype=object)
    out: dict[str, Any] = {
        "run_id": pd.Categorical(np.array(by_name["run_id"], dtype=object)),
        "metric": pd.Categorical(np.array(by_name["metric"], dtype=object)),
        "+inf": flags == "+inf",
        "-inf": flags == "-inf",
        "step": np.array(by_name["step"], dtype=np.int64),
    }
    for name in _FLOAT_COLUMNS:
        out[name] = np.array(by_name[name], dtype=float)  # None -> NaN
    return out


# Each reader: (store, scope) -> column arrays, or None when it cannot answer (Core then does).
_POINT_READERS: dict[str, Callable[[Store, PointScope], dict[str, Any] | None]] = {
    "adbc": _read_points_adbc,
    "copy": _read_points_copy,
    "core": _read_points_core,
}


def _sort_order(run: Any, metric: Any, step: Any) -> Any:
    """None when rows are already ordered by (run, metric, step), else the permutation."""
    if len(step) < 2:
        return None
    key = run.astype(np.int64) * (int(metric.max()) + 1) + metric
    dk, ds = np.diff(key), np.diff(step)
    if bool(np.all((dk > 0) | ((dk == 0) & (ds > 0)))):
        return None
    return np.lexsort((step, metric, run))


def _assemble(cols: dict[str, Any], meta: pd.DataFrame) -> pd.DataFrame:
    """The curves frame: per-run columns attached through integer codes, never per-row strings."""
    import pandas as pd

    value = cols["value"]
    if cols["+inf"].any() or cols["-inf"].any():
        value = value.copy()
        value[cols["+inf"]] = np.inf
        value[cols["-inf"]] = -np.inf
    # Codes of each point's run in meta's order (meta is every run of the sweep).
    run_ids = pd.Index(meta["run_id"])
    lookup = run_ids.get_indexer(cols["run_id"].categories)
    codes = lookup[cols["run_id"].codes] if len(lookup) else np.zeros(0, dtype=np.int64)
    metric = cols["metric"]
    metric = metric.reorder_categories(sorted(metric.categories))  # codes follow name order
    step = cols["step"]
    order = _sort_order(codes, np.asarray(metric.codes), step)
    if order is not None:
        codes, metric, step, value = codes[order], metric[order], step[order], value[order]
    frame: dict[str, Any] = {"run_id": pd.Categorical.from_codes(codes, categories=run_ids)}
    for name in ("variant", "knob", "alternative"):
        per_run = pd.Categorical(meta[name])
        frame[name] = pd.Categorical.from_codes(per_run.codes[codes], categories=per_run.categories)
    frame["seed"] = meta["seed"].to_numpy(dtype=np.int64)[codes]
    frame["step"] = step
    frame["metric"] = metric
    frame["value"] = value
    for unit in ("n", *COMPUTE_UNITS):
        frame[unit] = cols[unit] if order is None else cols[unit][order]
    return pd.DataFrame(frame, columns=list(CURVE_COLUMNS))


def fits(store: Store, sweep: str, *, metric: str | None = None, axis: str | None = None) -> pd.DataFrame:
    """Columns: FIT_COLUMNS. One select, in insertion order; ``metric``/``axis`` narrow it to the
    fits of one metric / compute axis (a sweep keeps one set per (metric, axis))."""
    import pandas as pd

    stmt = select(*[getattr(Fit, c) for c in FIT_COLUMNS]).where(*_keyed(Fit, sweep, metric, axis))
    rows = _read(
        store, lambda c: c.execute(stmt.order_by(Fit.id)).all(), f"reading the fits of sweep {sweep!r}"
    )
    return pd.DataFrame([tuple(r) for r in rows], columns=list(FIT_COLUMNS))


def verdicts(store: Store, sweep: str, *, metric: str | None = None, axis: str | None = None) -> pd.DataFrame:
    """Columns: VERDICT_COLUMNS. One select, in insertion order; ``metric``/``axis`` as in :func:`fits`."""
    import pandas as pd

    stmt = select(*[getattr(Verdict, c) for c in VERDICT_COLUMNS]).where(
        *_keyed(Verdict, sweep, metric, axis)
    )
    rows = _read(
        store, lambda c: c.execute(stmt.order_by(Verdict.id)).all(), f"reading verdicts of {sweep!r}"
    )
    return pd.DataFrame([tuple(r) for r in rows], columns=list(VERDICT_COLUMNS))


def _keyed(model: Any, sweep: str, metric: str | None, axis: str | None) -> list[Any]:
    where = [model.sweep == sweep]
    if metric is not None:
        where.append(model.metric == metric)
    if axis is not None:
        where.append(model.axis == axis)
    return where


def events(store: Store, sweep: str | None = None, *, run_id: str | None = None) -> pd.DataFrame:
    """Columns: id, time, sweep, run_id, kind, detail (dict). One select, oldest first.

    ``sweep``: the events logged for that sweep plus every event of its member runs (a run shared
    with another sweep logs under the sweep that first registered it, ``run.first_sweep``;
    ``sweep`` shows that).
    """
    import pandas as pd

    stmt = select(Event.id, Event.time, Event.sweep, Event.run_id, Event.kind, Event.detail)
    if sweep is not None:
        stmt = stmt.where(or_(Event.sweep == sweep, Event.run_id.in_(_members(sweep))))
    if run_id is not None:
        stmt = stmt.where(Event.run_id == run_id)
    rows = _read(store, lambda c: c.execute(stmt.order_by(Event.id)).all(), "reading events")
    out = [(*r[:5], r[5] if isinstance(r[5], dict) else json.loads(r[5])) for r in rows]
    return pd.DataFrame(out, columns=["id", "time", "sweep", "run_id", "kind", "detail"])


# Run statuses in the groups :func:`sweep_summaries` counts (every status in RUN_STATUSES once).
STATUS_GROUPS: dict[str, tuple[str, ...]] = {
    "completed": ("completed",),
    "running": ("running",),
    "waiting": ("pending", "submitted", "queued", "requeued", "preempted"),
    "failed": ("failed", "timeout", "unknown"),
    "stopped": ("cancelled", "pruned", "stopped-decided"),
}
SWEEP_SUMMARY_COLUMNS: tuple[str, ...] = (
    "name", "created_at", "n_runs", *STATUS_GROUPS, "last_event", "spec",
)  # fmt: skip


def sweep_source(spec: Mapping[str, Any]) -> str:
    """Where a sweep's runs came from, read off its stored spec: ``source`` where it says one
    (``import``, ``attach``), ``train`` for ``kind: adhoc`` (``scalerl train``), ``recipe`` for a
    recipe sweep's full spec (it has a ``design``), else ``-``. The ``source`` column of
    ``scalerl ls`` and ``scalerl.list_sweeps``."""
    if spec.get("source") is not None:
        return str(spec["source"])
    if spec.get("kind") == "adhoc":
        return "train"
    return "recipe" if "design" in spec else "-"


def sweep_summaries(store: Store) -> pd.DataFrame:
    """Every sweep with its runs counted by status group. Columns: SWEEP_SUMMARY_COLUMNS: the
    sweep's ``name``, ``created_at``, ``n_runs``, one count per :data:`STATUS_GROUPS` key
    (``completed``, ``running``, ``waiting``, ``failed``, ``stopped``; a status outside them is
    counted in ``n_runs`` only), ``last_event`` (the time of the newest event logged under the
    sweep, None when none) and the stored ``spec`` (dict). The listing ``scalerl ls`` and
    :func:`scalerl.harness.api.list_sweeps` read. Three selects: the sweeps, one GROUP BY
    (membership x status) and one GROUP BY of the event log (indexed on sweep, time)."""
    import pandas as pd

    def fn(conn: Connection) -> pd.DataFrame:
        rows = conn.execute(select(Sweep.name, Sweep.created_at, Sweep.spec).order_by(Sweep.name)).all()
        counts = conn.execute(
            select(SweepRun.sweep, Run.status, func.count())
            .join(Run, Run.run_id == SweepRun.run_id)
            .group_by(SweepRun.sweep, Run.status)
        ).all()
        latest = dict(
            conn.execute(
                select(Event.sweep, func.max(Event.time))
                .where(Event.sweep.is_not(None))
                .group_by(Event.sweep)
            ).all()
        )
        group_of = {s: g for g, statuses in STATUS_GROUPS.items() for s in statuses}
        per: dict[str, dict[str, int]] = {}
        for sweep, status, n in counts:
            tally = per.setdefault(sweep, dict.fromkeys(("n_runs", *STATUS_GROUPS), 0))
            tally["n_runs"] += int(n)
            if status in group_of:
                tally[group_of[status]] += int(n)
        out = []
        for name, created_at, spec in rows:
            tally = per.get(name) or dict.fromkeys(("n_runs", *STATUS_GROUPS), 0)
            spec = spec if isinstance(spec, dict) else json.loads(spec or "{}")
            out.append(
                (
                    name,
                    created_at,
                    tally["n_runs"],
                    *(tally[g] for g in STATUS_GROUPS),
                    latest.get(name),
                    spec,
                )
            )
        return pd.DataFrame(out, columns=list(SWEEP_SUMMARY_COLUMNS))

    df: pd.DataFrame = _read(store, fn, "listing sweeps")
    return df


FINAL_COLUMNS: tuple[str, ...] = ("run_id", "step", "value", *COMPUTE_UNITS, "n_points")


def final_points(store: Store, sweep: str, metric: str) -> pd.DataFrame:
    """Each run's last point of ``metric`` (its largest step) in ``sweep``: one row per run that
    logged the metric. Columns: FINAL_COLUMNS (``value`` NaN/±inf where a non-finite value was
    written; ``n_points``: how many points of the metric the run has). One select: a GROUP BY
    for each run's last step and count, joined back to the point on its primary key."""
    import pandas as pd

    last = (
        select(Point.run_id, func.max(Point.step).label("step"), func.count().label("n_points"))
        .where(Point.run_id.in_(_members(sweep)), Point.metric == metric)
        .group_by(Point.run_id)
        .subquery()
    )
    stmt = (
        select(
            Point.run_id,
            Point.step,
            Point.value,
            Point.nonfinite,
            *[getattr(Point, u) for u in COMPUTE_UNITS],
        )
        .add_columns(last.c.n_points)
        .join(last, (Point.run_id == last.c.run_id) & (Point.step == last.c.step))
        .where(Point.metric == metric)
        .order_by(Point.run_id)
    )
    rows = _read(store, lambda c: c.execute(stmt).all(), f"reading the final {metric!r} of sweep {sweep!r}")
    flags = {"nan": float("nan"), "+inf": float("inf"), "-inf": float("-inf")}
    out = [(r[0], int(r[1]), flags[r[3]] if r[3] in flags else r[2], *r[4:-1], int(r[-1])) for r in rows]
    frame = pd.DataFrame(out, columns=list(FINAL_COLUMNS))
    for name in ("value", *COMPUTE_UNITS):
        frame[name] = frame[name].astype("float64")  # None -> NaN
    return frame


def run_configs(store: Store, sweep: str) -> dict[str, dict[str, Any]]:
    """run_id -> the run's stored config (its resolved recipe; an imported run's source params),
    for every run of ``sweep``. One select."""
    stmt = select(Run.run_id, Run.config).where(Run.run_id.in_(_members(sweep))).order_by(Run.run_id)
    rows = _read(store, lambda c: c.execute(stmt).all(), f"reading the configs of sweep {sweep!r}")
    return {str(r[0]): (r[1] if isinstance(r[1], dict) else json.loads(r[1] or "{}")) for r in rows}


def run_ids_starting(store: Store, prefix: str, *, limit: int = 20) -> list[str]:
    """The run ids that start with ``prefix`` (sorted, at most ``limit``): ``scalerl logs`` takes
    a unique prefix as git takes a short hash. One indexed select (the primary key)."""
    stmt = (
        select(Run.run_id)
        .where(Run.run_id.startswith(prefix, autoescape=True))
        .order_by(Run.run_id)
        .limit(limit)
    )
    rows = _read(store, lambda c: c.execute(stmt).all(), f"finding runs whose id starts with {prefix!r}")
    return [str(r[0]) for r in rows]
