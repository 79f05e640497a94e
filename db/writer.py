"""PointWriter: the non-blocking, batched, fenced, spooling writer a training process uses.

Contract (``scalerl.harness.rl.PointSink``):

- ``add(step, metrics, compute, n=None)`` validates and enqueues; it never waits for the
  database. What the store's columns cannot hold (a step outside [0, 2**31 - 1], a metric name
  that is empty or longer than 200 characters, a value that is not a number) raises StoreError
  from ``add`` itself (:mod:`scalerl.db.limits`): one bad point never fails a batch of good ones.
  ``n`` maps a metric to the number of Bernoulli samples behind its value (e.g.
  ``{"val/pass_rate": 512}``), so its binomial noise is known; metrics it leaves out get NULL.
- A background thread writes batches (every ``interval`` seconds, or ``batch_size`` rows, or on
  ``flush``) through :meth:`Store.write_points`: one fenced transaction per batch, idempotent
  on (run, metric, step).
- ``flush()`` returns once every point added before it is *acknowledged*: committed to the
  database or fsync'd to this writer's spool file. An acknowledged point is never lost.
- Database unreachable (or any unexpected write error): batches go to the spool; the thread
  retries the database with backoff (0.25 s doubling to 5 s), replays the spool in order, then
  resumes direct writes. ``close()`` makes one last attempt; what is left stays in the spool for
  ``scalerl db replay``.
- Fenced (a newer attempt started): the rejected batch and everything after it are dropped, one
  ``fenced`` event is logged, ``fenced`` becomes True. Nothing is raised to the caller.
- Non-finite metric values are stored as NULL with ``nonfinite`` = 'nan' / '+inf' / '-inf'
  (``scalerl.db.queries.curves`` gives them back as NaN / ±inf). Compute must be finite: a non-finite
  or unknown compute unit raises StoreError from ``add`` (that is a bug in the accounting).

Thread safety: ``add``/``flush``/``close`` may be called from any thread.
"""

from __future__ import annotations

import logging
import math
import operator
import threading
import time
from collections.abc import Mapping
from numbers import Integral
from types import TracebackType
from typing import TYPE_CHECKING

from scalerl.db.errors import StoreError, scrub
from scalerl.db.limits import NAME_MAX, STEP_MAX, check_name, step_problem
from scalerl.db.spool import SpoolFile, spool_dir
from scalerl.harness.axes import COMPUTE_UNITS

if TYPE_CHECKING:
    from pathlib import Path

    from scalerl.db.store import PointRow, Store

log = logging.getLogger(__name__)
_NONFINITE = {math.inf: "+inf", -math.inf: "-inf"}
_UNIT_SLOT = {unit: i for i, unit in enumerate(COMPUTE_UNITS)}
isfinite = math.isfinite


class PointWriter:
    """See the module docstring. Create through ``store.writer(run_id, attempt)``."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        attempt: int,
        *,
        batch_size: int = 20_000,
        interval: float = 0.5,
        spool: str | Path | None = None,
    ) -> None:
        self._store = store
        self.run_id = run_id
        self.attempt = attempt
        self._batch_size = batch_size
        self._interval = interval
        self._spool = SpoolFile(spool_dir(spool if spool is not None else store.spool_dir), run_id, attempt)
        self._cond = threading.Condition()
        self._pending: list[PointRow] = []
        self._added = 0  # rows accepted by add()
        self._left: tuple[Path, int] | None = None
        self._done = 0  # rows acknowledged (in the database, in the spool, or dropped as fenced)
        self._flush_wanted = False
        self._closing = False
        self._closed = False
        self._error: StoreError | None = None
        self._fenced = False
        self._retry_at = 0.0
        self._backoff = 0.25
        self.points_written = 0
        self.points_spooled = 0
        self.points_fenced = 0
        self._thread = threading.Thread(target=self._loop, name=f"PointWriter[{run_id}]", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ caller side
    @property
    def fenced(self) -> bool:
        """True once the store rejected this attempt's writes (a newer attempt exists)."""
        return self._fenced

    @property
    def spool_path(self) -> Path | None:
        """The spool file while it holds points not yet in the database."""
        return self._spool.path if self._spool.active else None

    @property
    def left_in_spool(self) -> tuple[Path, int] | None:
        """After :meth:`close`: (spool file, points) that never reached the database, or None.
        A run whose points are not all in the store has not finished, whatever its trainer says."""
        return self._left

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        rows = self._rows(step, metrics, compute, n)
        with self._cond:
            if self._closing:
                raise StoreError(f"PointWriter for run {self.run_id!r} is closed (fix: add before close())")
            if self._fenced:
                return
            self._pending.extend(rows)
            self._added += len(rows)
            if len(self._pending) >= self._batch_size:
                self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        """Block until every point added so far is acknowledged (database or fsync'd spool)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = self._added
            self._flush_wanted = True
            self._cond.notify_all()
            while self._done < target and self._error is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise StoreError(
                        f"PointWriter for run {self.run_id!r}: flush timed out after {timeout} s"
                    )
                if not self._thread.is_alive():
                    break
                self._cond.wait(timeout=left if left is not None else 1.0)
            if self._error is not None:
                raise self._error
            if self._done < target:
                raise StoreError(f"PointWriter for run {self.run_id!r}: writer thread died; see the log")

    def close(self) -> None:
        """Flush, try the database one last time for spooled points, stop the thread."""
        with self._cond:
            if self._closed:
                return
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self._closed = True
        if self._error is not None:
            raise self._error

    def __enter__(self) -> PointWriter:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _rows(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None,
    ) -> list[PointRow]:
        # Hot path (called once per training step): plain loops, no per-call dict building.
        if type(step) is not int:  # numpy integers are fine; floats and bools are not
            step = self._as_step(step)
        if step < 0 or step > STEP_MAX:
            # Checked here, not by the database: on PostgreSQL a step past int4 fails its whole
            # batch in the background thread, which would spool it and every later point.
            raise StoreError(
                f"run {self.run_id!r}: step={step!r} {step_problem(step)} "
                f"(fix: log an int step in [0, {STEP_MAX}])"
            )
        units: list[float | None] = [None] * len(COMPUTE_UNITS)
        for unit, raw in compute.items():
            slot = _UNIT_SLOT.get(unit)
            if slot is None:
                raise StoreError(
                    f"run {self.run_id!r} step {step}: compute unit {unit!r} is unknown "
                    f"(fix: use {', '.join(COMPUTE_UNITS)})"
                )
            # A str, None, a bool or an int past a double (10**400): refused with its unit, not raised
            # raw (OverflowError) from float().
            try:
                val = float(raw)
            except (TypeError, ValueError, OverflowError):
                val = math.nan
            if not isfinite(val) or isinstance(raw, bool) or val < 0:
                big = isinstance(raw, int) and not isinstance(raw, bool)
                shown = "<an int past a double's range>" if big else repr(raw)[:80]
                raise StoreError(
                    f"run {self.run_id!r} step {step}: compute {unit}={shown} must be finite and "
                    ">= 0 (fix: log the cumulative compute as a float)"
                )
            units[slot] = val
        gpu_hours, flops, tokens, samples, wall_s = units
        counts = self._counts(step, metrics, n) if n else {}
        rows: list[PointRow] = []
        for metric, raw in metrics.items():
            if type(metric) is not str or not 0 < len(metric) <= NAME_MAX or "\x00" in metric:
                # The metric column is VARCHAR(200): PostgreSQL would fail the whole batch.
                check_name(metric, "metric name", where=f"run {self.run_id!r} step {step}")
            try:
                value = float(raw)
            except (TypeError, ValueError, OverflowError):
                raise self._not_a_number(step, metric, raw) from None
            k = counts.get(metric)
            if isfinite(value):
                rows.append((step, metric, value, None, gpu_hours, flops, tokens, samples, wall_s, k))
            else:
                flag = _NONFINITE.get(value, "nan")
                rows.append((step, metric, None, flag, gpu_hours, flops, tokens, samples, wall_s, k))
        return rows

    def _not_a_number(self, step: int, metric: str, raw: object) -> StoreError:
        return StoreError(
            f"run {self.run_id!r} step {step}: metric {metric!r} = {raw!r} is not a number "
            "(fix: log a float; NaN and ±inf are stored as non-finite points)"
        )

    def _counts(self, step: int, metrics: Mapping[str, float], n: Mapping[str, int]) -> dict[str, int]:
        """Validate ``n``: each key one of this call's metrics, each value an int >= 1."""
        out: dict[str, int] = {}
        for metric, raw in n.items():
            if metric not in metrics:
                raise StoreError(
                    f"run {self.run_id!r} step {step}: n[{metric!r}] names no metric of this point "
                    f"(fix: use one of {sorted(metrics)})"
                )
            if isinstance(raw, bool) or not isinstance(raw, Integral) or int(raw) < 1:
                raise StoreError(
                    f"run {self.run_id!r} step {step}: n[{metric!r}]={raw!r} must be an int >= 1 "
                    "(the number of samples behind the value)"
                )
            out[metric] = int(raw)
        return out

    def _as_step(self, step: object) -> int:
        bad = StoreError(
            f"run {self.run_id!r}: step={step!r} must be an int in [0, {STEP_MAX}] "
            "(fix: log the training step as an int >= 0; the store's step column is int4)"
        )
        if isinstance(step, bool):
            raise bad
        try:
            return operator.index(step)  # type: ignore[arg-type]
        except TypeError:
            raise bad from None

    # ------------------------------------------------------------------ background thread
    def _loop(self) -> None:
        while True:
            with self._cond:
                if not (self._flush_wanted or self._closing or len(self._pending) >= self._batch_size):
                    self._cond.wait(timeout=self._interval)
                batch = self._pending[: self._batch_size]
                del self._pending[: self._batch_size]
                if not self._pending:
                    self._flush_wanted = False
                closing = self._closing and not self._pending
            try:
                if batch:
                    self._handle(batch)
                elif self._spool.active and time.monotonic() >= self._retry_at:
                    self._reconnect()
            except StoreError as err:  # only the spool itself failing lands here
                log.error("%s", err)
                with self._cond:
                    self._error = err
            with self._cond:
                self._done += len(batch)
                self._cond.notify_all()
            if closing:
                self._finish()
                return

    def _handle(self, batch: list[PointRow]) -> None:
        if self._fenced:
            self.points_fenced += len(batch)
            return
        if self._spool.active:
            if time.monotonic() >= self._retry_at:
                self._reconnect()
            if self._spool.active:
                self._spool.append(batch)
                self.points_spooled += len(batch)
                return
        try:
            outcome = self._store.write_points(self.run_id, self.attempt, batch)
        except Exception as err:  # unreachable, locked past retries, or a bug: keep the points
            log.warning("run %s: database write failed, spooling to %s: %s", self.run_id,
                        self._spool.path, scrub(str(err)))  # fmt: skip
            self._spool.append(batch)
            self.points_spooled += len(batch)
            self._retry_at = time.monotonic() + self._backoff
            return
        if outcome == "ok":
            self.points_written += len(batch)
        else:
            self._on_fenced(outcome, len(batch))

    def _reconnect(self) -> None:
        """Replay the spool into the database, in order; on failure back off."""
        try:
            for rows in self._spool.batches():
                outcome = self._store.write_points(self.run_id, self.attempt, rows)
                if outcome != "ok":
                    self._on_fenced(outcome, len(rows))
                    break
                self.points_written += len(rows)
        except Exception as err:
            self._backoff = min(5.0, self._backoff * 2)
            self._retry_at = time.monotonic() + self._backoff
            log.debug("run %s: database still unreachable: %s", self.run_id, scrub(str(err)))
            return
        log.info("run %s: database reachable again, replayed spool %s", self.run_id, self._spool.path)
        self._spool.discard()
        self._backoff = 0.25

    def _on_fenced(self, outcome: str, n: int) -> None:
        self.points_fenced += n
        if self._fenced:
            return
        self._fenced = True
        why = "a newer attempt started" if outcome == "fenced" else "the run is not registered"
        log.warning(
            "run %s attempt %d: writes rejected (%s); this writer stops", self.run_id, self.attempt, why
        )
        try:
            self._store.log_event(self.run_id, "fenced", {"attempt": self.attempt, "reason": why})
        except Exception as err:  # the event is informative; the fencing itself already held
            log.warning("run %s: could not log the fenced event: %s", self.run_id, scrub(str(err)))

    def _finish(self) -> None:
        if self._spool.active and not self._fenced:
            self._reconnect()
        if self._spool.active:
            self._left = (self._spool.path, int(self._spool.points))
            log.warning(
                "run %s: %d points left in spool %s (fix: `scalerl db replay --spool %s %s`)",
                self.run_id, self._spool.points, self._spool.path, self._spool.directory, self._store.url,
            )  # fmt: skip
            self._spool.release()
        elif self._fenced:
            self._spool.discard()
