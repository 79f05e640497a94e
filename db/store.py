"""The results store: one session scope, run bookkeeping, fenced point writes.

Open it with :func:`open_store`. Thread safety: a :class:`Store` may be shared by threads (each
transaction takes its own pooled connection; in-memory SQLite serialises on a lock). Processes
each open their own.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from scalerl.db import fastread, schema
from scalerl.db.bulk import UPSERTS
from scalerl.db.engine import EngineBundle, is_readonly_url, make_engine, redact, resolve_url, sqlite_file
from scalerl.db.errors import (
    StoreError,
    StoreIntegrityError,
    StorePermissionError,
    StoreReadOnlyError,
    StoreUnavailableError,
    is_locked,
    scrub,
    translate,
)
from scalerl.db.fastread import FastReader
from scalerl.db.limits import RUN_ID_MAX, check_name
from scalerl.db.models import FIT_COLUMNS, VERDICT_COLUMNS, Event, Fit, Point, Run, Sweep, SweepRun, Verdict
from scalerl.db.records import RUN_STATUSES, RunInfo, RunRecord, WriteOutcome
from scalerl.db.redaction import redact_value

if TYPE_CHECKING:
    from scalerl.db.writer import PointWriter

T = TypeVar("T")
LOCK_RETRIES = 8
# One point row as the writer and the spool carry it:
# (step, metric, value, nonfinite, gpu_hours, flops, tokens, samples, wall_s, n)
# ``n``: Bernoulli samples behind the value (None when unknown); last, so a 9-field row of an
# older spool file is the same row with n unknown.
PointRow = tuple[int, str, float | None, str | None, float | None, float | None, float | None,
                 float | None, float | None, int | None]  # fmt: skip


def open_store(
    url: str | None = None,
    *,
    create: bool = True,
    readonly: bool = False,
    spool_dir: str | Path | None = None,
) -> Store:
    """Open the store at ``url``: argument, else ``$SCALERL_DB_URL``, else ``sqlite:///./scalerl.db``.

    Modes (pick one per caller; writers create, readers never do):

    - ``create=True`` (the default; ``sweep``, ``import``, ``train``, jobs and workers): a missing
      SQLite file and its folders, or an empty database, become a store at the head revision.
    - ``create=False`` (``status``, ``fit``): the store must exist; a missing SQLite file raises
      :class:`StoreError` naming the path, and nothing is created (no file, no folder). The open
      writes nothing; writes later in the store's life are allowed. A SQLite file that this
      process cannot write (the file or its folder) is opened read-only, as below.
    - ``readonly=True`` (``report``, ``forecast``; implies ``create=False``): nothing is written,
      ever: a SQLite file through ``mode=ro`` (a read-only file or folder reads fine), PostgreSQL
      in read-only transactions. A write method raises :class:`StoreReadOnlyError` (see
      :attr:`Store.readonly`). A ``sqlite:///file:PATH?mode=ro&uri=true`` URL is read-only too.

    Raises :class:`SchemaOutOfDateError` for an existing store at another schema revision and
    :class:`StoreUnavailableError` when the database cannot be reached.
    """
    resolved = resolve_url(url)
    readonly = readonly or is_readonly_url(resolved)
    create = create and not readonly
    path = sqlite_file(resolved)
    if path is not None and not create:
        if not path.is_file():
            raise StoreError(
                f"no store at {path}: the SQLite file does not exist, and reading a store never "
                "creates one (fix: check the path in --db / $SCALERL_DB_URL; `scalerl sweep` and "
                "`scalerl import` create stores)"
            )
        # Without write access to the file (or to its folder, where SQLite keeps the WAL and the
        # shared-memory file) only a read-only open can read it.
        readonly = readonly or not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
    bundle = make_engine(resolved, create=create, readonly=readonly)
    try:
        schema.check_or_create(bundle, create=create)
    except SQLAlchemyError as err:
        bundle.engine.dispose()
        raise translate(err, url=redact(bundle.url), doing="opening the store") from None
    except BaseException:
        bundle.engine.dispose()
        raise
    return Store(bundle, spool_dir=spool_dir)


def _now() -> datetime:
    return datetime.now(UTC)


def _scrub_detail(value: Any) -> Any:
    """An event's detail with its secrets masked: the one rule, :func:`redact_value`."""
    return redact_value(value)


class Store:
    """The results store (see ``docs/architecture.md``, "Store API").

    Methods (each one transaction, retried on SQLite lock errors, driver errors translated):

    - ``session()``: the one ORM session scope (commit on success, rollback + StoreError on failure).
    - ``transaction(fn, doing=..., write=True)``: run ``fn(conn)`` in one Core transaction, retried
      whole on SQLite lock errors; ``doing`` names the operation in error messages.
    - ``ensure_sweep(name, spec)``: create the sweep if missing (spec is kept from the first call).
    - ``update_sweep_spec(name, changes)``: set top-level keys of an existing sweep's spec.
    - ``register_run(RunRecord) -> bool``: idempotent on run_id; False if it already existed.
      Always records the run's membership of ``record.sweep`` (a run can be in several sweeps).
    - ``register_runs(records) -> int``: the same for many records in one transaction.
    - ``get_run(run_id) -> RunInfo | None``.
    - ``set_job(run_id, executor, job_id)``: record where a run was submitted (not fenced).
    - ``set_status(run_id, status, error=None)``: scheduler-side status sync (not fenced).
    - ``start_attempt(run_id, *, executor, job_id, host, resume_step=None) -> int``: atomically
      bumps the attempt counter (which fences every older writer), sets status ``running`` and
      logs ``started``. ``resume_step=N`` deletes the run's points with step > N in the same
      transaction (the new attempt re-writes them from its checkpoint); ``resume_step=-1``
      deletes all of them (a fresh start); ``None`` keeps everything (rewrites overwrite).
    - ``finish_run(run_id, attempt, status, error=None) -> bool``: fenced like points; a
      superseded attempt gets False and a ``fenced`` event, nothing changes.
    - ``log_event(run_id | None, kind, detail, *, sweep=None)``.
    - ``writer(run_id, attempt) -> PointWriter``: background batched writer with spool.
    - ``write_points(run_id, attempt, rows) -> "ok" | "fenced" | "unknown_run"``: the fenced,
      idempotent bulk upsert the writer and the spool replay use.
    - ``replace_fits(sweep, rows, metric=, axis=)``, ``replace_verdicts(...)``: replace the rows
      of one (sweep, metric, axis); fits on another metric or axis stay.
    - ``readonly``: True when opened read-only; every write method then raises
      :class:`StoreReadOnlyError` before touching the database.

    Point rewrites: the upsert on (run_id, metric, step) overwrites (last write wins). Because
    every write is fenced on the run's current attempt, the last writer is always the current
    attempt; a same-attempt rewrite (a spool replay) carries the same values.
    """

    def __init__(self, bundle: EngineBundle, *, spool_dir: str | Path | None = None) -> None:
        self._bundle = bundle
        self._write_engine = bundle.engine.execution_options(scalerl_write=True)
        self.url = redact(bundle.url)
        self.dialect = bundle.dialect
        self.spool_dir = Path(spool_dir) if spool_dir is not None else None
        self.readonly = bundle.readonly
        self._upsert = UPSERTS[self.dialect]()
        self._store_id: str | None = None

    # ------------------------------------------------------------------ plumbing
    @property
    def store_id(self) -> str | None:
        """This store's identity (``scalerl_meta.store_id``, made once by migration 0007): spool
        records carry it, so a replay never writes one store's points into another. None when
        it cannot be read (an older schema in a read-only open, the database unreachable)."""
        if self._store_id is None:
            from scalerl.db.models import Meta

            def tx(conn: Connection) -> str | None:
                return conn.execute(select(Meta.value).where(Meta.key == "store_id")).scalar_one_or_none()

            try:
                self._store_id = self.transaction(tx, doing="reading the store's id", write=False)
            except StoreError:
                return None
        return self._store_id

    # ------------------------------------------------------------------ plumbing
    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine (for queries inside ``db``; not part of the public contract)."""
        return self._bundle.engine

    @property
    def sqlite_path(self) -> str | None:
        """The SQLite file path, or None (PostgreSQL or in-memory)."""
        path = sqlite_file(self._bundle.url)
        return None if path is None else str(path)

    def fast_reader(self) -> FastReader | None:
        """The ADBC helper for bulk reads of a SQLite file (None elsewhere or if not installed)."""
        if self.sqlite_path is None or not fastread.available():
            return None
        return fastread.shared()

    def close(self) -> None:
        """Dispose of the engine's connections; the store is unusable after."""
        self._bundle.engine.dispose()

    def _lock(self) -> AbstractContextManager[Any]:
        return self._bundle.tx_lock if self._bundle.tx_lock is not None else nullcontext()

    def _check_writable(self, doing: str) -> None:
        if self.readonly:
            raise StoreReadOnlyError(
                f"store {self.url} is open read-only: {doing} needs write access "
                "(fix: open it with scalerl.db.open_store(url) from a process that may write it)"
            )

    @contextmanager
    def session(self) -> Iterator[Session]:
        """The one session scope: commit on success, roll back and translate on failure.

        On a read-only store the session may read; its commit raises the read-only error."""
        with self._lock():
            sess = Session(self._write_engine, expire_on_commit=False)
            try:
                yield sess
                sess.commit()
            except SQLAlchemyError as err:
                sess.rollback()
                raise translate(err, url=self.url, doing="a store session") from None
            except BaseException:
                sess.rollback()
                raise
            finally:
                sess.close()

    def transaction(self, fn: Callable[[Connection], T], *, doing: str, write: bool = True) -> T:
        """Run ``fn`` in one Core transaction; retry the whole of it on SQLite lock errors."""
        if write:
            self._check_writable(doing)
        engine = self._write_engine if write else self._bundle.engine
        for attempt in range(LOCK_RETRIES + 1):
            try:
                with self._lock(), engine.begin() as conn:
                    return fn(conn)
            except SQLAlchemyError as err:
                if attempt < LOCK_RETRIES and self.dialect == "sqlite" and is_locked(err):
                    time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
                    continue
                raise translate(err, url=self.url, doing=doing) from None
            except OverflowError as err:  # SQLite's driver: an int past int64 never reaches SQL
                raise StoreIntegrityError(
                    f"store {self.url}: {doing}: a number is too large for the database: {err} "
                    "(fix: keep steps, seeds and counts within the store's integer range)"
                ) from None
            except UnicodeEncodeError as err:  # a lone surrogate: the driver cannot encode it
                raise StoreIntegrityError(
                    f"store {self.url}: {doing}: text the database cannot store: "
                    f"{err.object[err.start : err.end]!r} at position {err.start} ({err.reason}) "
                    "(fix: names must be valid Unicode text; decode bytes as UTF-8 first)"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _event(
        conn: Connection, kind: str, run_id: str | None, sweep: str | None, detail: Mapping[str, Any]
    ) -> None:
        conn.execute(
            insert(Event).values(
                time=_now(), kind=kind, run_id=run_id, sweep=sweep, detail=_scrub_detail(dict(detail))
            )
        )

    def _require_run(self, conn: Connection, run_id: str, *, for_update: bool = False) -> tuple[str, int]:
        q = select(Run.first_sweep, Run.attempts).where(Run.run_id == run_id)
        if for_update:
            q = q.with_for_update()
        row = conn.execute(q).first()
        if row is None:
            self._missing_run(conn, run_id)
        assert row is not None
        return str(row[0]), int(row[1])

    def _missing_run(self, conn: Connection, run_id: str) -> None:
        """Raise for a run a locking read or an UPDATE did not find: not registered, or (on a
        shared PostgreSQL store) registered by a sweep this role may not change, which row-level
        security hides from writes without an error."""
        first = conn.execute(select(Run.first_sweep).where(Run.run_id == run_id)).scalar_one_or_none()
        if first is None:
            raise StoreError(f"run {run_id!r} is not registered (fix: register_run it before starting it)")
        owner = conn.execute(select(Sweep.owner).where(Sweep.name == first)).scalar_one_or_none()
        raise StorePermissionError(
            f"store {self.url}: run {run_id!r} belongs to sweep {first!r} (owner {owner or 'unset'}), "
            f"which this role may not change (fix: ask its owner for `scalerl db grant ROLE --sweep "
            f"{first}`; every role may read it)"
        )

    # ------------------------------------------------------------------ sweeps and runs
    def ensure_sweep(self, name: str, spec: Mapping[str, Any]) -> None:
        """Create the sweep if missing (its spec is kept from the first call, its owner is the
        role creating it). An existing sweep must be one this role may change (on a shared
        PostgreSQL store: its owner's, or granted; :mod:`scalerl.db.sharing`): every command
        that writes into a sweep (``sweep``, ``import``, a search worker, ``client.init`` of a
        new sweep) comes here first, so a refusal names the owner before anything is written."""
        check_name(name, "sweep name")  # VARCHAR(200): PostgreSQL would refuse it, SQLite not
        if self.dialect == "postgresql":
            from scalerl.db.sharing import require_write

            require_write(self, name, f"writing into sweep {name!r}")

        def tx(conn: Connection) -> None:
            if conn.execute(select(Sweep.name).where(Sweep.name == name)).first() is None:
                # Two launches of one new sweep at once: the second insert does nothing.
                row = {"name": name, "spec": dict(spec), "created_at": _now()}
                _insert_missing(conn, Sweep, [row], "name")

        self.transaction(tx, doing=f"creating sweep {name!r}")

    def update_sweep_spec(self, name: str, changes: Mapping[str, Any]) -> None:
        """Set top-level keys of an existing sweep's spec (the other keys stay), in one transaction.
        An import keeps its sweep's default metric and axis there (``fit``)."""

        def tx(conn: Connection) -> None:
            row = conn.execute(select(Sweep.spec).where(Sweep.name == name)).first()
            if row is None:
                raise StoreError(f"sweep {name!r} does not exist (fix: ensure_sweep it first)")
            spec = {**dict(row[0] or {}), **dict(changes)}
            if not conn.execute(update(Sweep).where(Sweep.name == name).values(spec=spec)).rowcount:
                raise StorePermissionError(
                    f"store {self.url}: sweep {name!r} belongs to another role, which did not grant it "
                    f"to this one (fix: ask its owner for `scalerl db grant ROLE --sweep {name}`)"
                )

        self.transaction(tx, doing=f"updating sweep {name!r}")

    def register_run(self, record: RunRecord) -> bool:
        """Register the run (if new) and its membership of ``record.sweep`` (always).

        Returns False when the run itself already existed (so executors skip completed work),
        even if this call just added it to another sweep.
        """
        return self.register_runs([record]) == 1

    def register_runs(self, records: Sequence[RunRecord]) -> int:
        """:meth:`register_run` for many records in one transaction; returns how many runs were new.

        Every record's (sweep, run) membership is recorded with that record's variant, knob and
        alternative; a membership already there keeps its names (the first registration wins).
        The config is stored with its secrets masked (:func:`scalerl.db.redaction.redact_value`:
        an imported ``db_url``'s password, a param named ``api_key``, a token by its shape); its
        hash is the caller's, of the config as given, so a run's id never depends on the mask.
        """
        if not records:
            return 0
        # What the columns cannot hold fails here, the same on every backend, before the write.
        for r in records:
            where = f"run {r.run_id!r}"
            check_name(r.sweep, "sweep name", where=where)
            check_name(r.run_id, "run id", limit=RUN_ID_MAX, where=where)
            check_name(r.variant, "variant", where=where)
            for what, value in (("knob", r.knob), ("alternative", r.alternative)):
                if value is not None:
                    check_name(value, what, where=where)

        def tx(conn: Connection) -> int:
            ids = list(dict.fromkeys(r.run_id for r in records))
            sweeps = list(dict.fromkeys(r.sweep for r in records))
            existing = _existing(conn, select(Run.run_id), Run.run_id, ids)
            known_sweeps = _existing(conn, select(Sweep.name), Sweep.name, sweeps)
            now = _now()
            new_sweeps = [{"name": n, "spec": {}, "created_at": now} for n in sweeps if n not in known_sweeps]
            _insert_missing(conn, Sweep, new_sweeps, "name")
            new_runs: dict[str, dict[str, Any]] = {}
            for r in records:
                if r.run_id not in existing and r.run_id not in new_runs:
                    new_runs[r.run_id] = dict(
                        run_id=r.run_id, first_sweep=r.sweep, variant=r.variant, knob=r.knob,
                        alternative=r.alternative, seed=r.seed, config=redact_value(dict(r.config)),
                        config_hash=r.config_hash, status="pending", attempts=0, created_at=now,
                    )  # fmt: skip
            # Another process may register the same new run between the read above and here
            # (PostgreSQL: N array tasks attaching one run at once): only the rows this insert
            # wrote count as new, the others are left as they are.
            created = _insert_missing(conn, Run, list(new_runs.values()), "run_id")
            members: set[tuple[str, str]] = set()
            for name in sweeps:
                members.update(
                    (name, rid)
                    for rid in _existing(
                        conn, select(SweepRun.run_id).where(SweepRun.sweep == name), SweepRun.run_id, ids
                    )
                )
            rows: list[dict[str, Any]] = []
            for r in records:
                if (r.sweep, r.run_id) not in members:
                    members.add((r.sweep, r.run_id))
                    rows.append({"sweep": r.sweep, "run_id": r.run_id, "variant": r.variant,
                                 "knob": r.knob, "alternative": r.alternative})  # fmt: skip
            _insert_missing(conn, SweepRun, rows, "sweep", "run_id")
            return len(created)

        what = f"run {records[0].run_id!r}" if len(records) == 1 else f"{len(records)} runs"
        return self.transaction(tx, doing=f"registering {what}")

    def get_run(self, run_id: str) -> RunInfo | None:
        def tx(conn: Connection) -> RunInfo | None:
            row = conn.execute(select(Run.__table__).where(Run.run_id == run_id)).mappings().first()
            if row is None:
                return None
            values = {k: _aware(row[k]) for k in RunInfo.__dataclass_fields__ if k != "sweep"}
            return RunInfo(sweep=row["first_sweep"], **values)

        return self.transaction(tx, doing=f"reading run {run_id!r}", write=False)

    def set_job(self, run_id: str, executor: str, job_id: str | None) -> None:
        def tx(conn: Connection) -> None:
            self._require_run(conn, run_id)
            if not conn.execute(
                update(Run).where(Run.run_id == run_id).values(executor=executor, job_id=job_id)
            ).rowcount:
                self._missing_run(conn, run_id)

        self.transaction(tx, doing=f"recording the job of run {run_id!r}")

    def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        _check_status(status)

        def tx(conn: Connection) -> None:
            self._require_run(conn, run_id)
            values: dict[str, Any] = {"status": status, "error": scrub(error) if error else None}
            if not conn.execute(update(Run).where(Run.run_id == run_id).values(**values)).rowcount:
                self._missing_run(conn, run_id)

        self.transaction(tx, doing=f"setting the status of run {run_id!r}")

    def mark_runs(self, run_ids: Sequence[str], status: str) -> None:
        """Set many runs' status in one transaction (e.g. ``submitted`` for a whole job array).

        Unlike :meth:`set_status` it leaves each run's error text alone: a retried run keeps the
        last failure's text until its next attempt ends. Unknown run ids are ignored.
        """
        _check_status(status)
        ids = list(run_ids)

        def tx(conn: Connection) -> None:
            for i in range(0, len(ids), 500):  # stay under every driver's bound-parameter limit
                conn.execute(update(Run).where(Run.run_id.in_(ids[i : i + 500])).values(status=status))

        if ids:
            self.transaction(tx, doing=f"setting {len(ids)} runs to {status!r}")

    def log_events(self, sweep: str | None, kind: str, details: Mapping[str, Mapping[str, Any]]) -> None:
        """One ``kind`` event per ``{run_id: detail}`` in one transaction, scrubbed like
        :meth:`log_event`'s."""
        _check_kind(kind)
        now = _now()
        rows = [
            {"time": now, "kind": kind, "run_id": run_id, "sweep": sweep, "detail": _scrub_detail(dict(d))}
            for run_id, d in details.items()
        ]

        def tx(conn: Connection) -> None:
            conn.execute(insert(Event), rows)

        if rows:
            self.transaction(tx, doing=f"logging {len(rows)} {kind!r} events")

    def start_attempt(
        self,
        run_id: str,
        *,
        executor: str | None = None,
        job_id: str | None = None,
        host: str | None = None,
        resume_step: int | None = None,
        provenance: Mapping[str, Any] | None = None,
        pid: int | None = None,
        pid_start: str | None = None,
    ) -> int:
        """Start the run's next attempt; returns its number. ``provenance`` (the code this attempt
        runs, :mod:`scalerl.harness.execution.provenance`) replaces the run's, and is logged on the
        ``started`` event, so every attempt's code stays in the event log; None keeps the run's.
        ``pid`` / ``pid_start``: the attempt's process (:mod:`scalerl.harness.execution.liveness`),
        whose heartbeat starts now; None for an attempt with no process of its own to watch."""

        def tx(conn: Connection) -> int:
            # The UPDATE takes the run row's write lock (PostgreSQL) / the database write lock
            # (SQLite BEGIN IMMEDIATE), so it serialises against every fenced point write.
            code = {} if provenance is None else {"provenance": dict(provenance)}
            row = conn.execute(
                update(Run)
                .where(Run.run_id == run_id)
                .values(
                    attempts=Run.attempts + 1, status="running", started_at=_now(), ended_at=None,
                    error=None, executor=func.coalesce(executor, Run.executor),
                    job_id=func.coalesce(job_id, Run.job_id), host=func.coalesce(host, Run.host),
                    pid=pid, pid_start=pid_start, heartbeat_at=_now(), **code,
                )
                .returning(Run.attempts, Run.first_sweep)
            ).first()  # fmt: skip
            if row is None:
                self._missing_run(conn, run_id)
            assert row is not None
            attempt, sweep = int(row[0]), str(row[1])
            deleted = 0
            if resume_step is not None:
                res = conn.execute(delete(Point).where(Point.run_id == run_id, Point.step > resume_step))
                deleted = int(res.rowcount or 0)
            detail = {"attempt": attempt, "executor": executor, "job_id": job_id, "host": host,
                      "resume_step": resume_step, "deleted_points": deleted, **code}  # fmt: skip
            self._event(conn, "started", run_id, sweep, detail)
            return attempt

        return self.transaction(tx, doing=f"starting an attempt of run {run_id!r}")

    def finish_run(
        self, run_id: str, attempt: int, status: str, error: str | None = None, *, expect: str | None = None
    ) -> bool:
        """End ``attempt`` of the run as ``status``; False (nothing changed) when a newer attempt
        owns the run (a ``fenced`` event), or, with ``expect``, when the run's status is no
        longer ``expect`` (a sync that judged a ``running`` run lost must not fail one that
        completed meanwhile)."""
        _check_status(status)

        def tx(conn: Connection) -> bool:
            sweep, current = self._require_run(conn, run_id, for_update=True)
            if current != attempt:
                detail = {"attempt": attempt, "current": current, "what": f"finish_run({status})"}
                self._event(conn, "fenced", run_id, sweep, detail)
                return False
            if expect is not None:
                now = conn.execute(select(Run.status).where(Run.run_id == run_id)).scalar_one()
                if now != expect:
                    return False
            conn.execute(
                update(Run)
                .where(Run.run_id == run_id)
                .values(status=status, ended_at=_now(), error=scrub(error) if error else None)
            )
            detail = {"attempt": attempt} | ({"error": error} if error else {})
            self._event(conn, status, run_id, sweep, detail)
            return True

        return self.transaction(tx, doing=f"finishing run {run_id!r}")

    def beat(self, run_id: str, attempt: int) -> bool:
        """The attempt's process lives: bump the run's ``heartbeat_at`` (a no-op once the run is no
        longer ``running`` at ``attempt``). Returns whether the run is still running at it."""

        def tx(conn: Connection) -> bool:
            res = conn.execute(
                update(Run)
                .where(Run.run_id == run_id, Run.attempts == attempt, Run.status == "running")
                .values(heartbeat_at=_now())
            )
            return bool(res.rowcount)

        return self.transaction(tx, doing=f"recording the heartbeat of run {run_id!r}")

    def log_event(
        self, run_id: str | None, kind: str, detail: Mapping[str, Any], *, sweep: str | None = None
    ) -> None:
        _check_kind(kind)

        def tx(conn: Connection) -> None:
            nonlocal sweep
            if sweep is None and run_id is not None:
                sweep = conn.execute(select(Run.first_sweep).where(Run.run_id == run_id)).scalar_one_or_none()
            self._event(conn, kind, run_id, sweep, detail)

        self.transaction(tx, doing=f"logging a {kind!r} event")

    # ------------------------------------------------------------------ points
    def writer(self, run_id: str, attempt: int, **options: Any) -> PointWriter:
        """A background batched :class:`scalerl.db.writer.PointWriter` for one attempt of one run."""
        from scalerl.db.writer import PointWriter

        return PointWriter(self, run_id, attempt, **options)

    def write_points(self, run_id: str, attempt: int, rows: Sequence[PointRow]) -> WriteOutcome:
        """Upsert ``rows`` iff ``attempt`` is the run's current attempt, atomically.

        The check and the insert are one transaction holding a lock that ``start_attempt``
        needs: ``SELECT ... FOR SHARE`` on the run row (PostgreSQL), the database write lock
        taken by ``BEGIN IMMEDIATE`` (SQLite). The upsert itself: :mod:`scalerl.db.bulk`.
        """

        def tx(conn: Connection) -> WriteOutcome:
            q = select(Run.attempts).where(Run.run_id == run_id)
            if self.dialect == "postgresql":
                q = q.with_for_update(read=True)
            current = conn.execute(q).scalar_one_or_none()
            if current is None:
                # FOR SHARE on PostgreSQL skips a row this role may not change (row-level security).
                visible = (
                    self.dialect == "postgresql"
                    and conn.execute(select(Run.attempts).where(Run.run_id == run_id)).first()
                )
                return "denied" if visible else "unknown_run"
            if current != attempt:
                return "fenced"
            if rows:
                self._upsert.write(conn, run_id, attempt, rows)
            return "ok"

        return self.transaction(tx, doing=f"writing {len(rows)} points of run {run_id!r}")

    # ------------------------------------------------------------------ analysis outputs
    def replace_fits(self, sweep: str, rows: Sequence[Mapping[str, Any]], *, metric: str, axis: str) -> None:
        """Replace the fits of ``sweep`` on ``metric`` and ``axis`` with ``rows`` (one transaction).

        Fits of the sweep on another metric or axis stay. A row's ``metric``/``axis`` may be left
        out (they are filled in) but must not disagree."""
        self._replace(Fit, FIT_COLUMNS, sweep, metric, axis, rows, "fits")

    def replace_verdicts(
        self, sweep: str, rows: Sequence[Mapping[str, Any]], *, metric: str, axis: str
    ) -> None:
        """:meth:`replace_fits` for verdicts: keyed by (sweep, metric, axis) the same way."""
        self._replace(Verdict, VERDICT_COLUMNS, sweep, metric, axis, rows, "verdicts")

    def _replace(
        self,
        model: Any,
        columns: tuple[str, ...],
        sweep: str,
        metric: str,
        axis: str,
        rows: Sequence[Mapping[str, Any]],
        what: str,
    ) -> None:
        allowed = set(columns)
        key = {"metric": metric, "axis": axis}
        where = f"replace_{what}({sweep!r}, metric={metric!r}, axis={axis!r})"
        clean: list[dict[str, Any]] = []
        for i, row in enumerate(rows):
            unknown = sorted(set(row) - allowed)
            if unknown:
                raise StoreError(
                    f"{where}: row {i} has unknown column(s) {unknown} (fix: use only {', '.join(columns)})"
                )
            for name, want in key.items():
                if row.get(name) is not None and row[name] != want:
                    raise StoreError(
                        f"{where}: row {i} has {name}={row[name]!r} (fix: replace each metric and "
                        "axis's rows in their own call)"
                    )
            clean.append(
                {c: _plain(row.get(c)) for c in columns} | key | {"sweep": sweep, "created_at": _now()}
            )

        def tx(conn: Connection) -> None:
            if conn.execute(select(Sweep.name).where(Sweep.name == sweep)).first() is None:
                raise StoreError(f"sweep {sweep!r} does not exist (fix: ensure_sweep it first)")
            conn.execute(
                delete(model).where(model.sweep == sweep, model.metric == metric, model.axis == axis)
            )
            if clean:
                conn.execute(insert(model), clean)

        self.transaction(tx, doing=f"replacing the {what} of sweep {sweep!r} on {metric} / {axis}")


def _insert_missing(conn: Connection, model: Any, rows: Sequence[Mapping[str, Any]], *key: str) -> set[Any]:
    """Insert ``rows``, skipping any whose ``key`` exists already (``ON CONFLICT DO NOTHING``, so
    a concurrent insert of the same key is no error); returns the first key column's values of
    the rows this statement inserted."""
    if not rows:
        return set()
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    column = getattr(model, key[0])
    stmt = dialect.insert(model).on_conflict_do_nothing(index_elements=list(key)).returning(column)
    return set(conn.execute(stmt, list(rows)).scalars())


def _existing(conn: Connection, stmt: Any, column: Any, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` ``stmt`` finds (IN lists bounded: SQLite caps bound parameters)."""
    found: set[str] = set()
    for i in range(0, len(keys), 500):
        found.update(conn.execute(stmt.where(column.in_(keys[i : i + 500]))).scalars())
    return found


def _aware(value: Any) -> Any:
    """SQLite keeps no time zone; every time the store writes is UTC, so say so."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _plain(value: Any) -> Any:
    """numpy scalars -> Python; NaN -> NULL (a fit with no value has no number)."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def _check_kind(kind: str) -> None:
    if not kind or len(kind) > 32:
        raise StoreError(f"event kind {kind!r} must be 1-32 characters (e.g. 'submitted', 'requeued')")


def _check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise StoreError(f"run status {status!r} is not one of {sorted(RUN_STATUSES)}")


# Re-exported for callers that want to catch the "database down" case specifically.
__all__ = ["PointRow", "Store", "StoreReadOnlyError", "StoreUnavailableError", "open_store"]
