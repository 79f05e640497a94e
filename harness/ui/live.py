"""One sweep as the live view holds it: a downsampled copy of each run's curve (for drawing),
its point count and last point, the run rows, and a change counter that lets a page fetch only
what moved. The server keeps drawn copies only; the fit reads every point in its own process.

:class:`SweepLive` is built once per (sweep, metric, axis) without reading the sweep's points:
the run rows, the stored fits, and per run a sample of its points plus its count (the first,
last, lowest and highest point and evenly spaced ones: :func:`scalerl.harness.ui.sample.read_drawn`,
index seeks and one aggregate, read side by side), so a lab-scale sweep's page draws without
waiting for a million points. :meth:`SweepLive.load_full` then (the app calls it in a thread
once the page has drawn) reads every point once, in bulk, and redraws each run by the report's rule,
replacing the sample. It is kept current by :meth:`SweepLive.refresh`, which costs in
proportion to what changed:

- the run rows (one small select, no configs; a run's config is read once, when it first
  appears) are diffed against the last ones; a changed row gets the next ``seq``;
- the runs that can still move (running, or whose row just changed) get their points past the
  last step seen (:func:`scalerl.db.live.points_after`: one index range per run), appended raw
  to the run's drawn copy, which is read again from the store (``read_drawn``, for that run)
  once it holds twice its share of the drawing budget; a run whose attempt changed (a resumed
  attempt may have replaced its tail) or that is new is read the same way.

A page asks for :meth:`SweepLive.changes` since the ``seq`` it has: the rows changed after it,
each run's drawn points appended after it (or the whole drawn curve, ``reset``, when it was
redrawn), and the fit when a newer one is ready. Fits (``scalerl fit``'s, through
:func:`scalerl.harness.report.build.compute_fits`, on every point, which the worker reads from
the store itself) run in a worker process (:mod:`scalerl.harness.ui.fitting`) only when the
points changed (``data_version``), one at a time, never more often than the last fit took and
not in the first seconds after the sweep was opened (the page draws first), so a lab-scale
sweep never keeps a core busy fitting. Until the first fit lands, the fits and verdicts
``scalerl fit`` stored are shown.

Thread safety: every method takes the object's lock; the refit runs outside it.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from scalerl.db import live as store_live
from scalerl.db.redaction import scrub
from scalerl.harness.ui.safety import redact_config

if TYPE_CHECKING:
    from concurrent.futures import Future

    import pandas as pd

    from scalerl.db.store import Store
    from scalerl.harness.ui.sample import Drawn

log = logging.getLogger(__name__)

# Points drawn for a whole sweep, shared by its runs (each gets at least MIN and at most MAX).
DRAW_BUDGET = 40_000
DRAW_MIN, DRAW_MAX = 16, 400
# Row fields whose change a page must see (the rest never change for a run id).
_WATCHED = (
    "status",
    "attempts",
    "executor",
    "job_id",
    "host",
    "started_at",
    "ended_at",
    "error",
    "provenance",
)
_ACTIVE = frozenset({"running"})
_NONFINITE = {"nan": math.nan, "+inf": math.inf, "-inf": -math.inf}
AXES: tuple[str, ...] = ("gpu_hours", "flops", "tokens", "samples", "step")
# Seconds at least between two fits of a sweep, and from its opening to its first fit (that fit
# reads every point and takes a core while the page that opened the sweep draws).
FIT_GAP_S = 2.0


def iso(value: Any) -> str | None:
    """A time as ISO 8601 text (the store keeps UTC), None for none."""
    if value is None or value != value:
        return None
    return str(value.isoformat()) if hasattr(value, "isoformat") else str(value)


def floats(values: Any) -> list[float | None]:
    """Numbers for JSON: 6 significant digits, non-finite as None (JSON has no NaN)."""
    arr = np.asarray(values, dtype=float)
    return [float(f"{v:.6g}") if math.isfinite(v) else None for v in arr.tolist()]


@dataclass
class _Run:
    """One run on the view's metric and axis: how many points it has, its last one, and the
    drawn copy of its curve with what a page has been sent of it."""

    row: dict[str, Any]
    row_seq: int
    points: int = 0
    last_step: int = -1
    last_x: float = math.nan
    last_y: float = math.nan
    drawn_x: list[float | None] = field(default_factory=list)
    drawn_y: list[float | None] = field(default_factory=list)
    # False while the drawn copy is the first open's sample (harness/ui/sample.py), not drawn
    # from every point by the report's rule.
    whole: bool = True
    # (seq, index in drawn_*) each time points were appended; reset_seq: when drawn_* was rebuilt.
    marks: list[tuple[int, int]] = field(default_factory=list)
    reset_seq: int = 0


@dataclass
class FitState:
    """The fit a page shows: ``source`` ``stored`` (``scalerl fit``'s rows), ``live`` (fitted
    here on every point) or ``none``; ``running`` while a refit is under way."""

    source: str = "none"
    seq: int = 0
    data_version: int = -1
    axis: str | None = None
    fits: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    knob_map: dict[str, Any] | None = None
    bands: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    fitted_at: str | None = None
    points: int = 0
    seconds: float | None = None
    running: bool = False
    running_since: str | None = None


class SweepLive:
    """A sweep's live state on one metric and axis (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        name: str,
        *,
        metric: str,
        axis: str,
        spec: dict[str, Any],
        fitter: Callable[..., Future[Any]] | None = None,
        n_boot: int = 200,
        min_refresh_s: float = 1.0,
        fit_gap_s: float = FIT_GAP_S,
    ) -> None:
        self.store, self.name, self.metric, self.axis, self.spec = store, name, metric, axis, spec
        self._fitter = fitter
        self.n_boot = n_boot
        self.min_refresh_s = min_refresh_s
        self.fit_gap_s = fit_gap_s
        self._lock = threading.RLock()
        self.seq = 1
        self.data_version = 0
        self.runs: dict[str, _Run] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.fit = FitState()
        self.notes: list[str] = []
        self.refreshed_at = 0.0
        self._fit_started = 0.0
        self._last_fit_s = 0.0
        self._snapshot: tuple[tuple[int, int, bool], bytes] | None = None
        self._full_claimed = False
        self._redraw_next: set[str] = set()  # runs load_full could not take: read whole next refresh
        self._load()

    # ------------------------------------------------------------------ loading
    def _draw_cap(self) -> int:
        share = DRAW_BUDGET // max(len(self.runs), 1)
        return int(min(DRAW_MAX, max(DRAW_MIN, share)))

    def _load(self) -> None:
        from scalerl.harness.ui.sample import read_drawn

        rows = store_live.run_rows(self.store, self.name)
        self.runs = {r["run_id"]: _Run(row=r, row_seq=self.seq) for r in rows}
        # The stored fits (a few thousand rows and the knob map drawn from them: Python work) are
        # read in a thread while this one reads what to draw (mostly the database's work).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalerl-ui-load") as pool:
            stored = pool.submit(self._stored_fit, self.axis)
            self.configs = store_live.run_configs(self.store, list(self.runs))
            drawn = read_drawn(self.store, self.metric, list(self.runs), self._draw_cap())
            fit = stored.result()
        axis = self._pick_axis(drawn)
        if axis != self.axis:
            self.axis = axis
            fit = self._stored_fit(axis)
        if fit is not None:
            self.fit = fit
        cap = self._draw_cap()
        for rid, got in drawn.items():
            if rid in self.runs:
                self._take(self.runs[rid], got, cap, self.seq)
        self.data_version = 1
        self.refreshed_at = time.monotonic()
        self._fit_started = time.monotonic()  # the first fit waits fit_gap_s: the page draws first

    def _pick_axis(self, drawn: dict[str, Drawn]) -> str:
        """The view's axis, or the first one the drawn points carry when none carries it (noted)."""
        if self.axis == "step" or not drawn:
            return self.axis
        cols = store_live.POINT_ROW_COLUMNS

        def carried(axis: str) -> bool:
            i = cols.index(axis)
            return any(r[i] is not None for d in drawn.values() for r in d.rows)

        if carried(self.axis):
            return self.axis
        filled = [a for a in AXES if a == "step" or carried(a)]
        self.notes.append(f"no point carries the {self.axis!r} axis: drawn against {filled[0]!r}")
        return filled[0]

    def _stored_fit(self, axis: str) -> FitState | None:
        """The fits and verdicts ``scalerl fit`` stored for this metric and ``axis``, if any."""
        from scalerl.db import queries

        fits = queries.fits(self.store, self.name, metric=self.metric, axis=axis)
        verdicts = queries.verdicts(self.store, self.name, metric=self.metric, axis=axis)
        if fits.empty and verdicts.empty:
            return None
        return FitState(
            source="stored",
            seq=self.seq,
            axis=axis,
            fits=records(fits),
            verdicts=records(verdicts),
            knob_map=knob_map(verdicts) if not verdicts.empty else None,
        )

    def _take(self, run: _Run, got: Drawn, cap: int, seq: int) -> None:
        """Make ``got`` (a read of ``run``: every point, or the first open's sample) the run's
        count, last point and drawn copy, stamped ``seq`` (a page gets it whole)."""
        self._apply(run, self._draw(got, cap), seq)

    def _draw(self, got: Drawn, cap: int) -> tuple[Any, ...]:
        """:meth:`_draw_arrays` of ``got``'s rows."""
        step, x, y = self._columns(got.rows)
        return self._draw_arrays(got.points, step, x, y, cap, whole=got.whole)

    @staticmethod
    def _draw_arrays(
        points: int, step: np.ndarray, x: np.ndarray, y: np.ndarray, cap: int, *, whole: bool
    ) -> tuple[Any, ...]:
        """(points, last step, last x, last y, drawn x, drawn y, whole) of a run read as
        ``step, x, y``: every point (``whole``) drawn by the report's rule
        (:func:`~scalerl.harness.report.downsample.display_indices`, which keeps the first, last,
        lowest and highest point), a sample as it is. Touches no state: :meth:`load_full` runs it
        outside the lock."""
        from scalerl.harness.report.downsample import display_indices

        unsorted = x.size > 1 and bool(np.any(np.diff(x) < 0))
        order = np.argsort(x, kind="stable") if unsorted else np.arange(x.size)
        keep = order[np.sort(display_indices(x[order], y[order], cap))] if whole else order
        last = (int(step[-1]), float(x[-1]), float(y[-1]))
        return (points, *last, floats(x[keep]), floats(y[keep]), whole)

    def _apply(self, run: _Run, drawn: tuple[Any, ...], seq: int) -> None:
        run.points, run.last_step, run.last_x, run.last_y, run.drawn_x, run.drawn_y, run.whole = drawn
        run.marks = []
        run.reset_seq = seq

    @property
    def sampled(self) -> bool:
        """True while some run is drawn from the first open's sample (:meth:`load_full` pending)."""
        with self._lock:
            return any(not r.whole for r in self.runs.values())

    def full_load_pending(self) -> bool:
        """True while some run is drawn from a sample and no one has claimed :meth:`load_full`."""
        with self._lock:
            return not self._full_claimed and self.sampled

    def claim_full_load(self) -> bool:
        """True to the one caller that should run :meth:`load_full` (once per view)."""
        with self._lock:
            if self._full_claimed:
                return False
            self._full_claimed = True
            return True

    def load_full(self) -> int:
        """Read every point of the sweep's metric and draw each run still drawn from the first
        open's sample by the report's rule, replacing the sample (a page gets the new copies as
        a ``reset``); returns how many runs were redrawn. One bulk read
        (:func:`scalerl.db.queries.curves`, the store's fast path; ~1.5 s for 10^6 points on
        SQLite), then the downsampling, both outside the lock, so polls are answered meanwhile;
        the points are dropped once drawn. A run that moved past the read, or started a new
        attempt, keeps its copy and is read whole by the next refresh."""
        from scalerl.db import queries

        with self._lock:
            todo = {rid: r.row.get("attempts") for rid, r in self.runs.items() if not r.whole}
            cap, axis = self._draw_cap(), self.axis
            some = sorted(todo) if len(todo) < len(self.runs) else None  # None: the sweep's every run
        if not todo:
            return 0
        frame = queries.curves(self.store, self.name, metric=self.metric, run_ids=some)
        if frame.empty:
            return 0
        codes = frame["run_id"].cat.codes.to_numpy()
        names = frame["run_id"].cat.categories
        cuts = np.flatnonzero(np.diff(codes)) + 1
        starts, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [len(codes)]])
        step = frame["step"].to_numpy(dtype=np.int64)
        x = step.astype(float) if axis == "step" else frame[axis].to_numpy(dtype=float)
        y = frame["value"].to_numpy(dtype=float)
        del frame
        drawn = {
            str(names[codes[s]]): self._draw_arrays(int(e - s), step[s:e], x[s:e], y[s:e], cap, whole=True)
            for s, e in zip(starts, ends, strict=True)
        }
        done = 0
        with self._lock:
            nxt = self.seq + 1
            for rid, copy in drawn.items():
                run = self.runs.get(rid)
                if run is None or run.whole or axis != self.axis or run.row.get("attempts") != todo.get(rid):
                    continue
                # The read must hold everything the view has of the run (it may hold more: then
                # the refresh follows on from the read's last step).
                if copy[0] < run.points or copy[1] < run.last_step:
                    self._redraw_next.add(rid)  # the next refresh reads it whole, under the lock
                    continue
                self._apply(run, copy, nxt)
                done += 1
            if done:
                self.seq = nxt
        return done

    # ------------------------------------------------------------------ refreshing
    def refresh(self, *, force: bool = False) -> bool:
        """Bring the view up to date with the store (at most once per ``min_refresh_s`` unless
        ``force``); True when something changed. Also starts a refit when the points changed."""
        with self._lock:
            if not force and time.monotonic() - self.refreshed_at < self.min_refresh_s:
                self._maybe_refit()
                return False
            self.refreshed_at = time.monotonic()
            changed = self._refresh()
            self._maybe_refit()
            return changed

    def _refresh(self) -> bool:
        from scalerl.harness.ui.sample import Drawn

        rows = store_live.run_rows(self.store, self.name)
        nxt = self.seq + 1
        follow: dict[str, int] = {}  # run_id -> the step to read past
        # Runs read again, whole, to draw: new, a new attempt, a full drawn copy, or a sample
        # load_full could not replace (the run moved past its read).
        redraw: set[str] = {rid for rid in self._redraw_next if rid in self.runs}
        self._redraw_next.clear()
        new_ids = []
        for row in rows:
            rid = row["run_id"]
            run = self.runs.get(rid)
            if run is None:
                self.runs[rid] = _Run(row=row, row_seq=nxt)
                new_ids.append(rid)
                redraw.add(rid)
                continue
            before = run.row
            if any(before.get(k) != row.get(k) for k in _WATCHED):
                run.row, run.row_seq = row, nxt
                if before.get("attempts") != row.get("attempts"):
                    redraw.add(rid)  # a new attempt may have replaced the tail: read it again
                else:
                    follow.setdefault(rid, run.last_step)
            if row["status"] in _ACTIVE:
                follow.setdefault(rid, run.last_step)
        gone = set(self.runs) - {r["run_id"] for r in rows}
        for rid in gone:  # left the sweep (a store rewritten under us): drop it
            del self.runs[rid]
        if new_ids:
            self.configs.update(store_live.run_configs(self.store, new_ids))
        cap = self._draw_cap()
        follow = {rid: cursor for rid, cursor in follow.items() if rid not in redraw}
        got = store_live.points_after(self.store, self.metric, follow) if follow else []
        by_run: dict[str, list[tuple[Any, ...]]] = {}
        for r in got:
            by_run.setdefault(str(r[0]), []).append(r)
        for rid, pts in by_run.items():
            run = self.runs[rid]
            step, x, y = self._columns(pts)
            run.points += len(pts)
            run.last_step, run.last_x, run.last_y = int(step[-1]), float(x[-1]), float(y[-1])
            self.data_version += 1
            if len(run.drawn_x) + len(pts) > 2 * cap:
                redraw.add(rid)  # its drawn copy is full: read a fresh one (cap points) from the store
            else:
                run.marks.append((nxt, len(run.drawn_x)))
                run.drawn_x.extend(floats(x))
                run.drawn_y.extend(floats(y))
        if redraw:  # read whole (a run's own size), drawn by the report's rule
            read: dict[str, list[tuple[Any, ...]]] = {}
            for r in store_live.points_after(self.store, self.metric, dict.fromkeys(redraw, -1)):
                read.setdefault(str(r[0]), []).append(r)
            fresh = {rid: Drawn(len(pts), pts, True) for rid, pts in read.items()}
            for rid in redraw:
                run = self.runs[rid]
                if rid not in by_run and (run.points or rid in fresh):
                    self.data_version += 1  # new or a new attempt: its points changed
                if rid in fresh:
                    self._take(run, fresh[rid], cap, nxt)
                elif run.points or run.drawn_x:  # a fresh start left it no point yet
                    run.points, run.last_step, run.last_x, run.last_y = 0, -1, math.nan, math.nan
                    run.drawn_x, run.drawn_y, run.marks, run.reset_seq, run.whole = [], [], [], nxt, True
        changed = bool(new_ids or gone or got or redraw) or any(r.row_seq == nxt for r in self.runs.values())
        if changed:
            self.seq = nxt
        return changed

    def _columns(self, pts: Sequence[tuple[Any, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(step, x on the view's axis, value) of :data:`scalerl.db.live.POINT_ROW_COLUMNS` rows."""
        cols = store_live.POINT_ROW_COLUMNS
        if not pts:
            return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
        step = np.array([r[1] for r in pts], dtype=np.int64)
        value = np.array([_NONFINITE.get(r[3], math.nan) if r[2] is None else r[2] for r in pts], dtype=float)
        if self.axis == "step":
            x = step.astype(float)
        else:
            i = cols.index(self.axis)
            x = np.array([math.nan if r[i] is None else r[i] for r in pts], dtype=float)
        return step, x, value

    # ------------------------------------------------------------------ fitting
    def _maybe_refit(self) -> None:
        if self._fitter is None or self.fit.running or self.fit.data_version == self.data_version:
            return
        if not any(r.points for r in self.runs.values()):
            return
        # Never more often than the last fit took (a fit of a lab-scale sweep takes minutes), nor
        # in the first fit_gap_s after the sweep was opened.
        if time.monotonic() - self._fit_started < max(self.fit_gap_s, self._last_fit_s):
            return
        version = self.data_version
        self.fit.running = True
        self.fit.running_since = iso(datetime.now(UTC))
        self._fit_started = time.monotonic()
        # The worker reads every point itself, from the store, in its own process.
        future = self._fitter(
            sweep=self.name, spec=self.spec, metric=self.metric, axis=self.axis, n_boot=self.n_boot
        )
        future.add_done_callback(lambda f: self._fitted(f, version))

    def _fitted(self, future: Future[Any], version: int) -> None:
        seconds = time.monotonic() - self._fit_started
        with self._lock:
            self._last_fit_s = seconds
            try:
                got: dict[str, Any] = future.result()
            except Exception as err:  # AnalysisError (too few points), a crashed worker: say so
                message = scrub(str(err))
                state = FitState(
                    source=self.fit.source,
                    axis=self.fit.axis,
                    fits=self.fit.fits,
                    verdicts=self.fit.verdicts,
                    notes=self.fit.notes,
                    knob_map=self.fit.knob_map,
                    bands=self.fit.bands,
                    error=message,
                    fitted_at=self.fit.fitted_at,
                    points=self.fit.points,
                    seconds=seconds,
                )
            else:
                state = FitState(
                    source="live",
                    axis=got["axis"],
                    fits=got["fits"],
                    verdicts=got["verdicts"],
                    notes=[scrub(n) for n in got["notes"]],
                    knob_map=got["knob_map"],
                    bands=got["bands"],
                    fitted_at=iso(datetime.now(UTC)),
                    points=int(got["points"]),
                    seconds=seconds,
                )
            self.seq += 1
            state.seq, state.data_version = self.seq, version
            self.fit = state
        log.debug("sweep %s: fit of data version %d took %.1f s", self.name, version, seconds)

    # ------------------------------------------------------------------ what a page reads
    def run_summary(self, run: _Run) -> dict[str, Any]:
        """One runs-table row: the run's state, last value and compute, code and source."""
        from scalerl.harness.execution.provenance import short

        row = run.row
        config = self.configs.get(row["run_id"]) or {}
        imported = config.get("imported_from")
        if imported:
            source = "import: " + ", ".join(map(str, imported if isinstance(imported, list) else [imported]))
        else:
            source = " ".join(str(v) for v in (row.get("executor"), row.get("job_id")) if v) or "-"
        has = run.points > 0
        prov = row.get("provenance")
        return {
            "run_id": row["run_id"],
            "variant": row["variant"],
            "knob": row.get("knob"),
            "alternative": row.get("alternative"),
            "seed": row["seed"],
            "status": row["status"],
            "attempts": row["attempts"],
            "points": run.points,
            "last_step": run.last_step if has else None,
            "value": floats([run.last_y])[0] if has else None,
            "compute": floats([run.last_x])[0] if has else None,
            "code": short(prov if isinstance(prov, dict) else None),
            "source": scrub(source),
            "source_status": scrub(str(config["source_status"]))
            if config.get("source_status") is not None
            else None,
            "error": scrub(str(row["error"]))[:2000] if row.get("error") else None,
            "started_at": iso(row.get("started_at")),
            "ended_at": iso(row.get("ended_at")),
        }

    def _fit_json(self) -> dict[str, Any]:
        f = self.fit
        return {
            "source": f.source,
            "axis": f.axis,
            "fits": f.fits,
            "verdicts": f.verdicts,
            "notes": f.notes,
            "knob_map": f.knob_map,
            "bands": f.bands,
            "error": f.error,
            "fitted_at": f.fitted_at,
            "points": f.points,
            "seconds": f.seconds,
            "running": f.running,
            "running_since": f.running_since,
            "stale": f.data_version != self.data_version,
        }

    def _counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.runs.values():
            out[str(r.row["status"])] = out.get(str(r.row["status"]), 0) + 1
        return out

    def snapshot(self) -> dict[str, Any]:
        """Everything a sweep page draws on opening (drawn points, not every point)."""
        with self._lock:
            return {
                "sweep": self.name,
                "metric": self.metric,
                "axis": self.axis,
                "seq": self.seq,
                "design": self.spec.get("design"),
                "notes": list(self.notes),
                "sampled": self.sampled,
                "counts": self._counts(),
                "points": sum(r.points for r in self.runs.values()),
                "runs": [self.run_summary(r) for r in self.runs.values()],
                "curves": [
                    {"run_id": rid, "x": r.drawn_x, "y": r.drawn_y, "reset": True}
                    for rid, r in self.runs.items()
                    if r.drawn_x
                ],
                "fit": self._fit_json(),
            }

    def snapshot_json(self) -> bytes:
        """:meth:`snapshot` as JSON bytes, numbers in 6 significant digits (``1.23457e+13``, not
        ``12345700000000.0``), kept until the next change: every page that opens the sweep
        between two changes gets the same bytes without encoding them again."""
        import json

        with self._lock:
            key = (self.seq, self.fit.seq, self.fit.running)
            if self._snapshot is not None and self._snapshot[0] == key:
                return self._snapshot[1]
            data = self.snapshot()
            curves = data.pop("curves")
            head = json.dumps(data, separators=(",", ":"), allow_nan=False)
            parts = [
                f'{{"run_id":{json.dumps(c["run_id"])},"x":{_array(c["x"])},"y":{_array(c["y"])},"reset":true}}'
                for c in curves
            ]
            body = (head[:-1] + ',"curves":[' + ",".join(parts) + "]}").encode()
            self._snapshot = (key, body)
            return body

    def changes(self, since: int) -> dict[str, Any]:
        """What changed after ``since`` (a ``seq`` an earlier answer gave): changed runs, drawn
        points appended to each run (or its whole drawn curve, ``reset``), the fit if newer."""
        with self._lock:
            if since >= self.seq:
                curves: list[dict[str, Any]] = []
                rows: list[dict[str, Any]] = []
            else:
                rows = [self.run_summary(r) for r in self.runs.values() if r.row_seq > since]
                listed = {row["run_id"] for row in rows}
                curves = []
                for rid, r in self.runs.items():
                    if r.reset_seq > since:
                        curves.append({"run_id": rid, "x": r.drawn_x, "y": r.drawn_y, "reset": True})
                    else:
                        i = bisect.bisect_right([s for s, _ in r.marks], since)
                        if i >= len(r.marks):
                            continue
                        at = r.marks[i][1]
                        curves.append(
                            {"run_id": rid, "x": r.drawn_x[at:], "y": r.drawn_y[at:], "reset": False}
                        )
                    if rid not in listed:
                        rows.append(self.run_summary(r))  # its last value and point count moved
            return {
                "sweep": self.name,
                "seq": self.seq,
                "sampled": self.sampled,
                "counts": self._counts(),
                "points": sum(r.points for r in self.runs.values()),
                "runs": rows,
                "curves": curves,
                "fit": self._fit_json() if self.fit.seq > since or self.fit.running else None,
            }

    def config_of(self, run_id: str) -> dict[str, Any]:
        with self._lock:
            return redact_config(self.configs.get(run_id) or {})


def _array(values: list[float | None]) -> str:
    """A JSON array of numbers in 6 significant digits (None as null)."""
    return "[" + ",".join("null" if v is None else f"{v:.6g}" for v in values) + "]"


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts: NaN/inf -> None, numpy scalars -> Python, text scrubbed."""
    out = []
    for row in frame.to_dict("records"):
        clean: dict[str, Any] = {}
        for k, v in row.items():
            if hasattr(v, "item") and callable(v.item):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            elif isinstance(v, str):
                v = scrub(v)
            elif v is not None and not isinstance(v, int | float | bool):
                v = scrub(str(v))
            clean[str(k)] = v
        out.append(clean)
    return out


def knob_map(verdicts: pd.DataFrame) -> dict[str, Any]:
    """The report's knob map (:func:`scalerl.harness.report.figures.knob_map_figure`) as Plotly JSON."""
    import json

    import plotly.io as pio

    from scalerl.harness.report.figures import knob_map_figure

    fig = knob_map_figure(verdicts)
    parsed: dict[str, Any] = json.loads(pio.to_json(fig, validate=False, engine="json"))
    return parsed
