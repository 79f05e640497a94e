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
- finds the processes that left the group: a child that calls ``setsid`` (or double-forks into
  a new session) is out of reach of a group signal. This process becomes a child subreaper
  (Linux ``PR_SET_CHILD_SUBREAPER``), so such orphans are re-parented to it rather than to init,
  and every process of the command carries a tag in its environment (``SCALERL_PROCESS_TAG``);
  :meth:`ProcessGroup.end` and the watchdog end whatever carries the tag or descends from the
  command. Where neither works (no /proc, a child that clears its environment after this process
  died) such a process is out of reach, and the log says so when the subreaper is unavailable.

POSIX only, as the local executor and Slurm are.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import IO, Any

log = logging.getLogger(__name__)

# Run by ``python -c`` in the watchdog: argv = [read fd, group id, grace seconds, tag].
_WATCHDOG = """
import os, signal, sys, time
fd, pgid, grace, tag = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].encode()
signal.signal(signal.SIGINT, signal.SIG_IGN)
def tagged():
    out = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if tag in fh.read().split(b"\\0"):
                        out.append(int(name))
            except OSError:
                pass
    return out
def kill(sig):
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
    for pid in tagged():  # those that left the group (setsid) carry the tag in their environment
        try:
            os.kill(pid, sig)
        except OSError:
            pass
def gone():
    try:
        os.killpg(pgid, 0)
    except OSError:
        return not tagged()
    return False
def end(*_):
    kill(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not gone():
        time.sleep(0.05)
    kill(signal.SIGKILL)
    os._exit(0)
signal.signal(signal.SIGTERM, end)
try:
    data = os.read(fd, 1)
except OSError:
    data = b""
if not data:
    end()
"""


TAG_ENV = "SCALERL_PROCESS_TAG"
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux ``PR_SET_CHILD_SUBREAPER``): a
    child that double-forks or calls ``setsid`` and whose parent exits is re-parented to us, not
    to init, so :meth:`ProcessGroup.end` still finds and ends it. Once per process; False where
    the kernel (or the platform) has no such thing, and then only the tag finds such children."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                _subreaper = False
            if not _subreaper:
                log.warning("cannot become a child subreaper: a command's setsid'd children are found only "
                            "by their %s environment variable", TAG_ENV)  # fmt: skip
    return _subreaper


def _proc_table() -> dict[int, tuple[int, int, bytes, int]]:
    """pid -> (parent pid, session id, environment, start time in clock ticks since boot) of every
    live process this user may read."""
    out: dict[int, tuple[int, int, bytes, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue  # exited; only its parent's wait is left
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    env = fh.read()
            except OSError:
                env = b""
        except (OSError, IndexError):
            continue
        out[int(name)] = (int(fields[1]), int(fields[3]), env, int(fields[19]))
    return out


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


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
        become_subreaper()
        # Every process the command starts inherits the tag, including one that leaves the group
        # with setsid: the watchdog (after a SIGKILL of this process) finds it by it.
        self.tag = f"{TAG_ENV}={uuid.uuid4().hex}"
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            list(argv),
            env={**env, TAG_ENV: self.tag.split("=", 1)[1]},
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pgid = self.proc.pid  # a session leader's pid is its group id
        # Only an orphan born after the command can be one of its own (a server this process
        # started earlier, daemonised and re-parented to it as subreaper, is not).
        self._born = _start_ticks(self.proc.pid)
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
                [sys.executable, "-S", "-c", _WATCHDOG, str(read_fd), str(self.pgid), str(grace_s), self.tag],
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

    def strays(self) -> list[int]:
        """The command's processes outside its group: those carrying its tag, every descendant of
        the command, and the orphans re-parented to this (subreaper) process from another session
        than ours, born after the command (whatever a child of the command started with
        ``setsid`` and left behind, even with its environment cleared; not a daemon this process
        started earlier, such as a database server)."""
        table = _proc_table()
        me, watchdog = os.getpid(), self._watchdog.pid if self._watchdog is not None else -1
        own_session = os.getsid(0)
        tag = self.tag.encode()
        born = self._born

        def orphan(ppid: int, sid: int, started: int) -> bool:
            return ppid == me and sid != own_session and born is not None and started >= born

        roots = {self.proc.pid} | {
            pid
            for pid, (ppid, sid, env, started) in table.items()
            if pid not in (me, watchdog) and (tag in env.split(b"\0") or orphan(ppid, sid, started))
        }
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_) in table.items():
            children.setdefault(ppid, []).append(pid)
        found: set[int] = set()
        todo = [p for p in roots if p in table]
        while todo:
            pid = todo.pop()
            if pid not in found and pid not in (me, watchdog):
                found.add(pid)
                todo.extend(children.get(pid, ()))
        if self.proc.poll() is not None:
            found.discard(self.proc.pid)  # reaped: its pid may be another process's by now
        return sorted(found)

    def _signal_all(self, sig: int, strays: list[int]) -> None:
        self.signal(sig)
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def end(self, grace_s: float) -> None:
        """End the group and every stray of it (:meth:`strays`): SIGTERM, up to ``grace_s`` for
        them to exit, then SIGKILL; reap the command (and the strays re-parented to us) and stand
        the watchdog down. Idempotent; safe on an already empty group."""
        if self._ended:
            return
        self._ended = True
        try:
            strays = self.strays()
            if self.alive() or strays:
                self._signal_all(signal.SIGTERM, strays)
                deadline = time.monotonic() + grace_s
                while (self.alive() or self.strays()) and time.monotonic() < deadline:
                    time.sleep(0.05)
                self._signal_all(signal.SIGKILL, self.strays())
            # An unkillable command (D state) is left to the kernel: nothing more to do here.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5.0)
            self._reap(strays)
        finally:
            self._stand_down()

    @staticmethod
    def _reap(pids: list[int]) -> None:
        """Collect the exit of the strays that were re-parented to this process (as their
        subreaper), so none is left a zombie for as long as we run."""
        deadline = time.monotonic() + 2.0
        left = set(pids)
        while left and time.monotonic() < deadline:
            for pid in list(left):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # not our child (its parent reaps it), or reaped
                    left.discard(pid)
                    continue
                if done:
                    left.discard(pid)
            if left:
                time.sleep(0.02)

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
