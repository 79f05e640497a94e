"""A command in its own process group, ended with the run, even when the harness is SIGKILLed.

A lab's training command may start children of its own (``torchrun``, data loaders, a shell
script's ``python``). Signalling only the command's pid leaves them running, writing into the run's
folder beside the next attempt. So :class:`ProcessGroup`:

- starts the command as the leader of a new session (``start_new_session``): its pid is the group
  id of every process it starts, and a terminal's Ctrl-C does not reach it behind our back;
- signals the whole group (:meth:`ProcessGroup.signal`) and ends it (:meth:`ProcessGroup.end`:
  SIGTERM, a grace period, then SIGKILL) on every way out of the run, success included;
- starts a watchdog process that holds the read end of a pipe whose write end only this process
  holds. When this process dies in any way (SIGKILL included, where no ``finally`` runs), the
  kernel closes the write end, the watchdog reads EOF and ends the group. A clean :meth:`end`
  writes one byte first, so the watchdog exits without signalling a group id that may be reused.
  (``prctl(PR_SET_PDEATHSIG)`` would reach only the direct child, and it needs a ``preexec_fn``,
  which is unsafe in a threaded process like the job's.)

POSIX only, as the local executor and Slurm are.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

# Run by ``python -c`` in the watchdog: argv = [read fd, group id, grace seconds].
_WATCHDOG = """
import os, signal, sys, time
fd, pgid, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
signal.signal(signal.SIGINT, signal.SIG_IGN)
def gone():
    try:
        os.killpg(pgid, 0)
    except OSError:
        return True
    return False
def end(*_):
    try:
        os.killpg(pgid, signal.SIGTERM)
    except OSError:
        os._exit(0)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not gone():
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)
signal.signal(signal.SIGTERM, end)
try:
    data = os.read(fd, 1)
except OSError:
    data = b""
if not data:
    end()
"""


class ProcessGroup:
    """``argv`` running as the leader of its own process group, with a parent-death watchdog."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stdout: IO[bytes] | int,
        stderr: IO[bytes] | int,
        orphan_grace_s: float = 10.0,
    ) -> None:
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pgid = self.proc.pid  # a session leader's pid is its group id
        self._ended = False
        self._watch_w: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        try:
            self._start_watchdog(orphan_grace_s)
        except OSError:  # no watchdog is no reason to lose the run; end() still ends the group
            self._close_pipe()

    def _start_watchdog(self, grace_s: float) -> None:
        read_fd, write_fd = os.pipe()  # both non-inheritable: only pass_fds hands one on
        self._watch_w = write_fd
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-S", "-c", _WATCHDOG, str(read_fd), str(self.pgid), str(grace_s)],
                pass_fds=(read_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not in our group: it must outlive a signal sent to us
            )
        finally:
            os.close(read_fd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every process of the group (no-op once it is empty)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def alive(self) -> bool:
        """True while any process of the group (the command or a child it started) is left."""
        if self.proc.poll() is None:
            return True
        try:
            os.killpg(self.pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def end(self, grace_s: float) -> None:
        """End the group: SIGTERM, up to ``grace_s`` for it to exit, then SIGKILL; reap the
        command and stand the watchdog down. Idempotent; safe on an already empty group."""
        if self._ended:
            return
        self._ended = True
        try:
            if self.alive():
                self.signal(signal.SIGTERM)
                deadline = time.monotonic() + grace_s
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.signal(signal.SIGKILL)
            # An unkillable command (D state) is left to the kernel: nothing more to do here.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5.0)
        finally:
            self._stand_down()

    def _stand_down(self) -> None:
        if self._watch_w is not None:
            with contextlib.suppress(OSError):  # "ended cleanly": the watchdog exits quietly
                os.write(self._watch_w, b"x")
        self._close_pipe()
        if self._watchdog is not None:
            try:
                self._watchdog.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
                self._watchdog.wait()
            self._watchdog = None

    def _close_pipe(self) -> None:
        if self._watch_w is not None:
            os.close(self._watch_w)
            self._watch_w = None

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end(grace_s=0.0)
