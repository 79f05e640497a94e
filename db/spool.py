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
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalerl.db.errors import StoreError
from scalerl.db.records import ReplayReport

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


def replay(store: Store, directory: str | Path | None = None) -> ReplayReport:
    """Write every spool file of a dead writer into the store and remove it.

    Files locked by a live writer are skipped (it replays them itself); points of a superseded
    attempt are dropped with a ``fenced`` event; files of a run the store does not know are kept.
    """
    root = spool_dir(directory)
    files = points = fenced = 0
    skipped: list[str] = []
    unknown: list[str] = []
    for path in sorted(root.glob("*.jsonl")) if root.is_dir() else []:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # its writer replayed and removed it meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                skipped.append(str(path))
                continue
            keep = False
            fenced_here = 0
            for run_id, attempt, rows in read_batches(path):
                outcome = store.write_points(run_id, attempt, rows)
                if outcome == "ok":
                    points += len(rows)
                elif outcome == "fenced":
                    fenced_here += len(rows)
                else:
                    keep = True
            if fenced_here:
                fenced += fenced_here
                store.log_event(run_id, "fenced", {"attempt": attempt, "dropped_points": fenced_here,
                                                   "source": f"spool replay {path.name}"})  # fmt: skip
            if keep:
                unknown.append(str(path))
                continue
            path.unlink(missing_ok=True)
            files += 1
        finally:
            os.close(fd)
    return ReplayReport(files, points, fenced, tuple(skipped), tuple(unknown))
