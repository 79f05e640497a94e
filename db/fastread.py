"""Fast columnar reads of a SQLite file through ADBC, in a helper process.

Why a helper process: ADBC's SQLite driver carries its own copy of SQLite. Two copies of SQLite
in one process break POSIX file locking (closing a file in one copy drops the other's locks; see
sqlite.org/howtocorrupt.html, "multiple copies of SQLite"), which with concurrent writers could
corrupt the database. So the ADBC copy lives in its own process, started on first use and shared
by every store in the process; results come back as Arrow IPC streams over a pipe (no Python
object per value). The helper exits when its stdin closes (so it never outlives its parent), runs
in its own session and ignores SIGINT (interrupts are the parent's), and is restarted once if it
died between queries.

Optional: needs ``adbc-driver-sqlite`` and ``pyarrow``; without them :func:`available` is False
and ``scalerl.db.queries`` uses its Core path. So does a pyarrow that is installed but cannot be
imported (:func:`arrow_usable`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import json
import logging
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

_HEADER = struct.Struct("<q")  # payload length; negative = error message of that length (see _SERVER)
_SERVER = Path(__file__).with_name("_fastread_server.py")


log = logging.getLogger(__name__)


def available() -> bool:
    return importlib.util.find_spec("adbc_driver_sqlite") is not None and arrow_usable()


@functools.cache
def arrow_usable() -> bool:
    """Whether pyarrow is installed and imports. An installed one can fail to: pyarrow 26 needs
    numpy >= 2 without declaring it, so pip pairs it with the numpy 1.26 that pandas 2.1 pins. The
    readers then take their Core path (the same frame, slower) and say why, once."""
    if importlib.util.find_spec("pyarrow") is None:
        return False
    try:
        import pyarrow  # noqa: F401
    except ImportError as err:
        log.warning(
            "pyarrow is installed but cannot be imported (%s): reading points without it, slower "
            "(fix: install a pyarrow built for this numpy: pip install 'pyarrow<26' with numpy 1.x, "
            "or 'numpy>=2')",
            err,
        )
        return False
    return True


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
        self._owner = os.getpid()
        self._lock = threading.Lock()

    def query(self, path: str, sql: str, params: list[Any]) -> Any:
        """Run ``sql`` on the SQLite file ``path``; returns a ``pyarrow.Table``."""
        return self.query_many(path, [(sql, params)])[0]

    def query_many(self, path: str, queries: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        """Run ``queries`` in one read transaction (one snapshot); one ``pyarrow.Table`` each."""
        return self.query_parts(path, [queries])[0]

    def query_parts(self, path: str, parts: Sequence[Sequence[tuple[str, list[Any]]]]) -> list[list[Any]]:
        """Run each part's queries in its own read transaction, the parts in parallel.

        Returns one list of ``pyarrow.Table`` per part. A helper that died since the last query
        (killed, out of memory) is restarted and the request sent once more before the error
        reaches the caller.
        """
        import pyarrow as pa

        body = {"path": path, "parts": [[[q, p] for q, p in part] for part in parts]}
        request = json.dumps(body).encode() + b"\n"
        answers = sum(len(part) for part in parts)
        with self._lock:
            try:
                payloads = self._ask(request, answers)
            except (KeyboardInterrupt, SystemExit):
                # Interrupted mid-answer (Ctrl-C in a notebook): the pipe holds the rest of this
                # answer, so the helper cannot be reused; end it now, the next query starts one.
                self._stop(kill=True)
                raise
            except _HelperExited:
                self._stop()
                try:
                    payloads = self._ask(request, answers)
                except _HelperExited as err:
                    self._stop()
                    raise RuntimeError(f"the ADBC reader process exited ({err})") from None
        tables = iter([pa.ipc.open_stream(pa.py_buffer(p)).read_all() for p in payloads])
        return [[next(tables) for _ in part] for part in parts]

    def _ask(self, request: bytes, answers: int) -> list[bytes]:
        proc = self._ensure()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise _HelperExited(f"writing the request: {err}") from None
        payloads: list[bytes] = []
        for _ in range(answers):
            (size,) = _HEADER.unpack(_read_exact(proc.stdout, _HEADER.size))
            payload = _read_exact(proc.stdout, abs(size))
            if size < 0:
                raise RuntimeError(payload.decode(errors="replace"))
            payloads.append(payload)
        return payloads

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._owner != os.getpid():  # forked: never share the parent's pipes
            self._proc, self._owner = None, os.getpid()
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                # Run by path, not "-m db...": the helper needs neither db nor SQLAlchemy; -P keeps
                # db/ itself off its sys.path (db/errors.py etc. must not shadow other modules).
                # Its own session: a terminal Ctrl-C or a notebook interrupt goes to the parent
                # only; the helper still ends when the parent does (its stdin closes).
                [sys.executable, "-P", str(_SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,
            )
            _widen_pipe(self._proc.stdout)
        return self._proc

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.pid is None:
            return
        if self._owner != os.getpid():  # a forked child: the helper is its parent's to stop
            return
        if kill:
            proc.kill()
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the helper exits on EOF
        except OSError:  # it is already gone (broken pipe while flushing)
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _widen_pipe(stream: IO[bytes] | None) -> None:
    """Linux: a 1 MiB pipe instead of 64 KiB, so a 50 MB answer needs 16x fewer wake-ups."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if stream is None or setpipe is None:
        return
    with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size: keep the default
        fcntl.fcntl(stream.fileno(), setpipe, 1 << 20)


class _HelperExited(Exception):
    """The helper process is gone (its pipe closed); the request can be retried on a new one."""


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        chunk = stream.read(n)
        if not chunk:
            raise _HelperExited("its output closed mid-answer")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
