"""The verifier worker process and the parent's handle on it: both ends of one JSON-lines protocol.

Why a process: a verifier check can hang (sympy on ``\\boxed{10^{10^{10}}}`` against ``5``, a regex
that backtracks catastrophically), and nothing interrupts a Python thread stuck in C code.
math-verify's own time limits use ``signal.alarm``, which only works in the main thread, and the
reference trainer scores from a thread. So :class:`~scalerl.harness.rl.verifiers.Scorer` runs such checks in
one child process, ``python -m scalerl.harness.rl.verify_worker``, waits for each reply with a deadline
(``selectors`` on the pipe, no threads) and kills the child on a miss. Not :mod:`multiprocessing`:
its spawn mode re-imports the parent's ``__main__`` (a training script).

Protocol, one JSON object per line, ASCII-escaped so any text (lone surrogates included) survives:

    parent -> worker, once   {"cls": "pkg.module:QualName", "params": {...}, "path": [parent's sys.path]}
    worker -> parent, once   {"ok": true}  |  {"ok": false, "error": "..."}
    parent -> worker, each   {"c": completion, "a": answer}
    worker -> parent, each   {"r": true | false}  |  {"e": "ExceptionType: message"}

The worker imports the verifier's module itself, so any verifier class defined at the top level of
an importable module works here, a lab's own included; ``warm_up()`` runs before ``{"ok": true}``,
so imports do not count against a check's deadline. The worker exits when its stdin closes (the
parent closed it or died). On Linux it also asks to be killed with its parent
(``PR_SET_PDEATHSIG``), so a check stuck in C code cannot outlive a crashed trainer; Linux sends
that when the *thread* that started the worker exits, and the next check then finds the worker gone
and starts another. Whatever a verifier prints goes to stderr, never into the protocol; the parent
keeps stderr in a temporary file and quotes its tail in errors. It ignores SIGINT: a Ctrl-C is for
the parent, which stops it.

:class:`WorkerProcess` is the parent's side; it is not thread-safe (the Scorer holds a lock).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from typing import IO, Any

from scalerl.harness.errors import ExecutionError


class WorkerTimeout(Exception):
    """A check did not answer within its deadline; the worker must be stopped."""


class WorkerDied(Exception):
    """The worker closed its stdout (it exited or crashed) or broke the protocol.

    ``idle``: it was already gone when the request was sent (not this input's doing).
    """

    def __init__(self, message: str, *, idle: bool = False) -> None:
        super().__init__(message)
        self.idle = idle


class CheckRaised(Exception):
    """The verifier's ``check`` raised inside the worker; the message names the exception."""


def _encode(msg: Mapping[str, Any]) -> bytes:
    return json.dumps(msg, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def _reap(proc: subprocess.Popen[bytes], stderr: IO[bytes], sel: selectors.BaseSelector) -> None:
    """Kill and reap the worker and close its pipes (a :func:`weakref.finalize` callback)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    sel.close()
    for pipe in (proc.stdin, proc.stdout, stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):  # a flush into a pipe the dead worker no longer reads
                pipe.close()


class WorkerProcess:
    """One running worker for one verifier; started (handshake included) by the constructor.

    ``label`` names the verifier in errors. Raises :class:`ExecutionError`, with the worker's stderr
    tail, when the worker cannot start or does not answer the handshake within ``start_timeout_s``.
    """

    def __init__(
        self, label: str, cls_path: str, params: Mapping[str, Any], *, start_timeout_s: float
    ) -> None:
        self.label = label
        # Lives as long as the worker; closed by _reap.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "scalerl.harness.rl.verify_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except OSError as err:
            self._stderr.close()
            raise ExecutionError(
                f"verifier {label!r}: cannot start its worker process ({sys.executable}): {err}"
            ) from err
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin = self._proc.stdin
        self._fd = self._proc.stdout.fileno()
        self._buf = bytearray()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._fd, selectors.EVENT_READ)
        self._stop = weakref.finalize(self, _reap, self._proc, self._stderr, self._sel)
        try:
            self._send({"cls": cls_path, "params": dict(params), "path": list(sys.path)})
            reply = self._receive(start_timeout_s)
        except (WorkerDied, WorkerTimeout) as err:
            why = "did not answer in time" if isinstance(err, WorkerTimeout) else "exited"
            reply = {"ok": False, "error": f"the worker {why} while starting"}
        if reply.get("ok") is not True:
            tail = self.stderr_tail()
            self.stop()
            raise ExecutionError(
                f"verifier {label!r} ({cls_path}): its worker process could not start: "
                f"{reply.get('error')}; worker stderr: {tail or '(empty)'}"
            )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def check(self, completion: str, answer: str, timeout_s: float) -> bool:
        """One check, answered within ``timeout_s`` of sending it.

        Raises :class:`WorkerTimeout` (stop this worker), :class:`WorkerDied`, or
        :class:`CheckRaised` (the verifier raised; the worker is fine).
        """
        self._send({"c": completion, "a": answer})
        reply = self._receive(timeout_s)
        if "e" in reply:
            raise CheckRaised(str(reply["e"]))
        if not isinstance(reply.get("r"), bool):
            raise WorkerDied(f"malformed reply {reply!r}")
        return bool(reply["r"])

    def stop(self) -> None:
        """Kill and reap the worker; idempotent."""
        self._stop()

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the worker wrote to stderr."""
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):  # already closed
            return ""

    def _send(self, msg: Mapping[str, Any]) -> None:
        try:
            self._stdin.write(_encode(msg))
            self._stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as err:  # ValueError: pipe already closed
            raise WorkerDied(str(err), idle=True) from err

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while (nl := self._buf.find(b"\n")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                raise WorkerTimeout(f"no reply within {timeout_s} s")
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise WorkerDied("the worker closed its stdout")
            self._buf += chunk
        line = bytes(self._buf[:nl])
        del self._buf[: nl + 1]
        try:
            reply = json.loads(line)
        except ValueError as err:
            raise WorkerDied(f"unreadable reply {line[:200]!r}") from err
        if not isinstance(reply, dict):
            raise WorkerDied(f"malformed reply {line[:200]!r}")
        return reply


# ---------------------------------------------------------------------------------- worker side
def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent goes (best effort; Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass


def _build(spec: Mapping[str, Any]) -> Any:
    """The verifier instance a start message describes."""
    sys.path[:0] = [p for p in spec.get("path", []) if p not in sys.path]
    module, _, qualname = str(spec["cls"]).partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj(**spec.get("params", {}))


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err)[:500]}"


def main() -> int:
    """Serve checks on stdin/stdout until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # prints (Python's and C's) go to stderr, never into the protocol
    sys.stdout = sys.stderr

    def reply(msg: Mapping[str, Any]) -> None:
        out.write(_encode(msg))
        out.flush()

    stdin = sys.stdin.buffer
    first = stdin.readline()
    if not first:
        return 0
    try:
        verifier = _build(json.loads(first))
        verifier.warm_up()
    except Exception as err:
        import traceback

        traceback.print_exc()
        reply({"ok": False, "error": _describe(err)})
        return 1
    reply({"ok": True})
    for line in stdin:
        request = json.loads(line)
        try:
            result: dict[str, Any] = {"r": bool(verifier.check(request["c"], request["a"]))}
        except Exception as err:
            result = {"e": _describe(err)}
        try:
            reply(result)
        except BrokenPipeError:  # the parent is gone
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
