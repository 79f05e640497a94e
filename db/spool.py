"""The local spool: where acknowledged points wait while the database is unreachable.

Format: one JSON object per line, ``{"v": 2, "run_id", "attempt", "rows": [[step, metric, value,
nonfinite, gpu_hours, flops, tokens, samples, wall_s, n], ...]}``; each line is written with one
``write`` and ``fsync``'d before the writer acknowledges its points. Version 1 lines (written
before points carried ``n``) have 9 fields per row and replay with ``n`` unknown (NULL). A
torn last line (the process died mid-write) was never acknowledged and is ignored on replay.

One file per live writer: ``<run_id>.a<attempt>.<pid>.<random>.jsonl`` under the spool
directory (argument, else ``$SCALERL_SPOOL_DIR``, else ``.scalerl/spool``). The writer holds an
exclusive ``flock`` on its file for its lifetime; :func:`replay` skips locked files, so it never
races a live writer, and picks up the files of dead ones (a SIGKILL releases the lock).
Replaying is idempotent (points are upserted and fenced), so a crash mid-replay is harmless.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import re
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalerl.db.errors import StoreError, StoreReadOnlyError, StoreUnavailableError
from scalerl.db.limits import SEED_MAX, STEP_MAX, name_problem
from scalerl.db.records import ReplayReport, WriteOutcome
from scalerl.harness.axes import COMPUTE_UNITS

if TYPE_CHECKING:
    from scalerl.db.store import PointRow, Store

log = logging.getLogger(__name__)
ENV_SPOOL = "SCALERL_SPOOL_DIR"
DEFAULT_SPOOL = Path(".scalerl") / "spool"
_ROW_FIELDS = 10  # len(PointRow)


def spool_dir(directory: str | Path | None = None) -> Path:
    return Path(directory) if directory is not None else Path(os.environ.get(ENV_SPOOL) or DEFAULT_SPOOL)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SpoolFile:
    """One writer's spool file; created lazily on the first append. Not thread safe."""

    def __init__(self, directory: Path, run_id: str, attempt: int) -> None:
        self.directory = directory
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
        self.path = directory / f"{safe}.a{attempt}.{os.getpid()}.{uuid.uuid4().hex[:8]}.jsonl"
        self.run_id = run_id
        self.attempt = attempt
        self._fd: int | None = None
        self.points = 0

    @property
    def active(self) -> bool:
        """True while the file holds points not yet replayed into the database."""
        return self._fd is not None

    def append(self, rows: list[PointRow]) -> None:
        """Durably append one batch (returns after fsync). Raises StoreError if the disk fails."""
        line = json.dumps({"v": 2, "run_id": self.run_id, "attempt": self.attempt, "rows": rows})
        try:
            if self._fd is None:
                self._open()
            assert self._fd is not None
            os.write(self._fd, (line + "\n").encode())
            os.fsync(self._fd)
        except OSError as err:
            raise StoreError(
                f"spool file {self.path}: cannot write {len(rows)} points of run {self.run_id!r} while "
                f"the database is unreachable: {err} (fix: free disk space or set ${ENV_SPOOL})"
            ) from None
        self.points += len(rows)

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # Lock under a name replay ignores, then rename: replay can never see it unlocked.
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(tmp, self.path)
        _fsync_dir(self.directory)
        self._fd = fd

    def batches(self) -> Iterator[list[PointRow]]:
        yield from (rows for _, _, rows in read_batches(self.path))

    def discard(self) -> None:
        """Everything here is in the database now: remove the file and drop the lock."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None
            self.points = 0

    def release(self) -> None:
        """Close, keeping the file for ``scalerl db replay``."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_batches(path: Path) -> Iterator[tuple[str, int, list[PointRow]]]:
    """(run_id, attempt, rows) per complete line; a torn last line is skipped."""
    data = path.read_bytes()
    # Everything after the last newline is a torn (never acknowledged) line.
    for raw in data.split(b"\n")[:-1]:
        if not raw.strip():
            continue
        try:
            obj: dict[str, Any] = json.loads(raw)
        except json.JSONDecodeError:
            log.warning("spool file %s: skipping an unreadable line", path)
            continue
        # A v1 row has no n (9 fields): pad it, so old spool files still replay.
        rows = [tuple(r) if len(r) == _ROW_FIELDS else (*r, None) for r in obj["rows"]]
        yield str(obj["run_id"]), int(obj["attempt"]), rows


QUARANTINE_DIR = "quarantine"
_FLAGS = {"nan", "+inf", "-inf"}


def _parse_line(raw: bytes) -> tuple[str, int, list[Any]]:
    """(run_id, attempt, raw rows) of one spool line; ValueError naming what is wrong with it."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError("not a JSON line") from None
    except RecursionError:  # [[[[...]]]]: no writer spools that; set aside like any bad line
        raise ValueError("a JSON line nested too deep to read") from None
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON {type(obj).__name__}, not an object")
    run_id, attempt, rows = obj.get("run_id"), obj.get("attempt"), obj.get("rows")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"run_id {run_id!r} is not a run id")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or not 0 <= attempt <= SEED_MAX:
        raise ValueError(f"attempt {attempt!r} is not an attempt number")
    if not isinstance(rows, list):
        raise ValueError(f"rows is a {type(rows).__name__}, not a list")
    return run_id, attempt, rows


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_row(row: Any) -> tuple[PointRow | None, str | None]:
    """A spooled row as the store takes it, or why it cannot be stored (a step past int4 or
    int64, a bad metric name, a non-finite compute value, a wrong shape...). A raw non-finite
    metric value is normalised to NULL + its flag, as the writer stores it: nothing is lost."""
    if not isinstance(row, list | tuple) or len(row) not in (_ROW_FIELDS - 1, _ROW_FIELDS):
        return None, f"not a row of {_ROW_FIELDS} fields"
    step, metric, value, flag, *compute = (*row, None) if len(row) == _ROW_FIELDS - 1 else row
    n = compute.pop()
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= STEP_MAX:
        return None, f"step {step!r} is not a whole number in [0, {STEP_MAX}]"
    problem = name_problem(metric)
    if problem is not None:
        return None, f"metric name {str(metric)[:60]!r} {problem}"
    if flag is not None and (flag not in _FLAGS or value is not None):
        return None, f"nonfinite flag {flag!r} is not one of {sorted(_FLAGS)} on a NULL value"
    if value is not None:
        if not _number(value):
            return None, f"value {value!r} is not a number"
        if not math.isfinite(value):
            flag, value = ("nan" if value != value else "+inf" if value > 0 else "-inf"), None
    for unit, amount in zip(COMPUTE_UNITS, compute, strict=True):
        if amount is not None and not (_number(amount) and math.isfinite(amount)):
            return None, f"compute {unit}={amount!r} is not a finite number"
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= SEED_MAX):
        return None, f"n={n!r} is not a whole number >= 1"
    return (step, metric, value, flag, *compute, n), None


def _write_quarantine(root: Path, source: Path, bad: list[dict[str, Any]]) -> Path:
    """Write (atomically, replacing an earlier one of the same spool file) the set-aside records."""
    folder = root / QUARANTINE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    tmp = target.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        for record in bad:
            fh.write(json.dumps(record, default=repr) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    _fsync_dir(folder)
    return target


def _write_or_isolate(
    store: Store, run_id: str, attempt: int, rows: list[PointRow], bad: list[dict[str, Any]], line: int
) -> tuple[WriteOutcome, int]:
    """Write one line's rows; when the store refuses the batch for its content (not because it is
    unreachable), write them one by one and set aside the ones it refuses. -> (outcome, written)."""
    try:
        return store.write_points(run_id, attempt, rows), len(rows)
    except (StoreUnavailableError, StoreReadOnlyError):
        raise
    except StoreError:
        if len(rows) == 1:
            raise
    written = 0
    outcome: WriteOutcome = "ok"
    for row in rows:
        try:
            outcome = store.write_points(run_id, attempt, [row])
        except (StoreUnavailableError, StoreReadOnlyError):
            raise
        except StoreError as err:
            bad.append({"line": line, "run_id": run_id, "attempt": attempt, "row": list(row),
                        "reason": str(err)[:300]})  # fmt: skip
            continue
        written += outcome == "ok"
    return outcome, written


def replay(store: Store, directory: str | Path | None = None) -> ReplayReport:
    """Write every spool file of a dead writer into the store and remove it.

    Files locked by a live writer are skipped (it replays them itself); points of a superseded
    attempt are dropped with a ``fenced`` event; files of a run the store does not know are kept.
    Records the store cannot hold (a step past int4, an unreadable line, a non-finite compute
    value...) are set aside in ``quarantine/<file>`` with their reasons, counted in the report,
    and the rest of the file drains: one poisoned record never blocks a spool.
    """
    root = spool_dir(directory)
    files = points = fenced = quarantined_points = 0
    skipped: list[str] = []
    unknown: list[str] = []
    quarantined: list[str] = []
    for path in sorted(root.glob("*.jsonl")) if root.is_dir() else []:
        try:
            # O_NONBLOCK: a FIFO named *.jsonl must not block the open (a hang); it is skipped below.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            continue  # its writer replayed and removed it meanwhile
        except IsADirectoryError:
            fd = -1
        try:
            if fd < 0 or not stat.S_ISREG(os.fstat(fd).st_mode):
                # Writers only ever create regular files: anything else is not a spool file.
                log.warning(
                    "spool %s: %s is not a regular file (holds no points); left alone", root, path.name
                )
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                skipped.append(str(path))
                continue
            keep = False
            fenced_here = 0
            bad: list[dict[str, Any]] = []
            # Everything after the last newline is a torn (never acknowledged) line.
            for line, raw in enumerate(path.read_bytes().split(b"\n")[:-1], start=1):
                if not raw.strip():
                    continue
                try:
                    run_id, attempt, raw_rows = _parse_line(raw)
                except ValueError as err:
                    bad.append({"line": line, "reason": str(err), "raw": raw.decode("utf-8", "replace")})
                    continue
                rows: list[PointRow] = []
                for raw_row in raw_rows:
                    row, problem = check_row(raw_row)
                    if row is None:
                        bad.append({"line": line, "run_id": run_id, "attempt": attempt, "row": raw_row,
                                    "reason": problem})  # fmt: skip
                    else:
                        rows.append(row)
                if not rows:
                    continue
                outcome, written = _write_or_isolate(store, run_id, attempt, rows, bad, line)
                if outcome == "ok":
                    points += written
                elif outcome == "fenced":
                    fenced_here += len(rows)
                else:
                    keep = True
            if fenced_here:
                fenced += fenced_here
                store.log_event(run_id, "fenced", {"attempt": attempt, "dropped_points": fenced_here,
                                                   "source": f"spool replay {path.name}"})  # fmt: skip
            if bad:
                # Before the spool file goes: the set-aside records are never lost.
                quarantined.append(str(_write_quarantine(root, path, bad)))
                quarantined_points += len(bad)
                log.warning("spool file %s: set aside %d record(s) the store cannot hold", path, len(bad))
            if keep:
                unknown.append(str(path))
                continue
            path.unlink(missing_ok=True)
            files += 1
        finally:
            if fd >= 0:
                os.close(fd)
    finish_replayed(store, root)  # runs whose last points were spooled end as their writer asked
    return ReplayReport(
        files, points, fenced, tuple(skipped), tuple(unknown), quarantined_points, tuple(quarantined)
    )


FINISH_SUFFIX = ".finish"


def note_finish(spool_file: Path, run_id: str, attempt: int, status: str, error: str | None = None) -> Path:
    """Ask the replay of ``spool_file`` to end the run as ``status`` once its points are stored.

    For a writer with no job behind it (``scalerl import``): when the database dies before the
    run's last points and its end are recorded, the points wait in the spool and the run would
    stay ``running`` forever after they are replayed; nothing else (no scheduler sync) ends it.
    The request is a sidecar ``<spool file>.finish``; :func:`finish_replayed` applies it once the
    spool file is gone (drained), fenced on the attempt and only to a run still ``running``."""
    sidecar = spool_file.with_name(spool_file.name + FINISH_SUFFIX)
    tmp = sidecar.with_name(sidecar.name + ".tmp")
    body = {"run_id": run_id, "attempt": attempt, "status": status, "error": error}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(body))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, sidecar)
    _fsync_dir(sidecar.parent)
    return sidecar


def finish_replayed(store: Store, directory: str | Path | None = None) -> int:
    """Apply every finish request whose spool file has been replayed; returns how many runs ended.

    A request whose run moved on (another attempt started, or something else ended it) is dropped:
    the run's own later history wins."""
    root = spool_dir(directory)
    ended = 0
    for sidecar in sorted(root.glob(f"*{FINISH_SUFFIX}")) if root.is_dir() else []:
        if sidecar.with_name(sidecar.name[: -len(FINISH_SUFFIX)]).exists():
            continue  # its points are not all stored yet (locked, kept for an unknown run)
        if not sidecar.is_file():
            continue  # a FIFO or folder under that name: reading it would block or fail
        try:
            req = json.loads(sidecar.read_text())
            run_id, attempt, status = str(req["run_id"]), int(req["attempt"]), str(req["status"])
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("finish request %s is unreadable; removing it", sidecar)
            sidecar.unlink(missing_ok=True)
            continue
        run = store.get_run(run_id)
        if run is not None and run.status == "running" and run.attempts == attempt:
            ended += bool(store.finish_run(run_id, attempt, status, error=req.get("error")))
        sidecar.unlink(missing_ok=True)
    return ended
