"""Fast columnar reads of a SQLite file through ADBC, in a helper process.

Why a helper process: ADBC's SQLite driver carries its own copy of SQLite. Two copies of SQLite
in one process break POSIX file locking (closing a file in one copy drops the other's locks; see
sqlite.org/howtocorrupt.html, "multiple copies of SQLite"), which with concurrent writers could
corrupt the database. So the ADBC copy lives in its own process, started on first use and shared
by every store in the process; results come back as one Arrow IPC stream over a pipe (no Python object
per value). The helper exits when its stdin closes (so it never outlives its parent).

Optional: needs ``adbc-driver-sqlite`` and ``pyarrow``; without them :func:`available` is False
and ``db.queries`` uses its Core path.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

_HEADER = struct.Struct("<q")  # payload length; negative = error message of that length (see _SERVER)
_SERVER = Path(__file__).with_name("_fastread_server.py")


def available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("adbc_driver_sqlite", "pyarrow"))


_shared: FastReader | None = None
_shared_lock = threading.Lock()


def shared() -> FastReader:
    """The process-wide helper (started on first query, stopped at interpreter exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FastReader()
            atexit.register(_shared.close)
        return _shared


class FastReader:
    """Client side: one helper process, one query at a time (a lock serialises callers)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def query(self, path: str, sql: str, params: list[Any]) -> Any:
        """Run ``sql`` on the SQLite file ``path``; returns a ``pyarrow.Table``."""
        import pyarrow as pa

        with self._lock:
            proc = self._ensure()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"path": path, "sql": sql, "params": params}).encode() + b"\n")
            proc.stdin.flush()
            head = proc.stdout.read(_HEADER.size)
            if len(head) < _HEADER.size:
                self._stop()
                raise RuntimeError("the ADBC reader process exited")
            (size,) = _HEADER.unpack(head)
            payload = _read_exact(proc.stdout, abs(size))
        if size < 0:
            raise RuntimeError(payload.decode(errors="replace"))
        return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                # Run by path, not "-m db...": the helper needs neither db nor SQLAlchemy.
                [sys.executable, str(_SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        return self._proc

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # the helper exits on EOF
            self._proc.wait(timeout=10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        chunk = stream.read(n)
        if not chunk:
            raise RuntimeError("the ADBC reader process exited mid-answer")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
