"""The files the local executor and its scheduler share under a sweep's state directory.

    <state>/local/queue/<ns>-<run_id>.json   spec waiting for a free slot (FIFO by <ns>)
    <state>/local/pids/<run_id>.pid          pid of the job process once started
    <state>/local/pids/<run_id>.exit         its exit status once it ended
    <state>/local/logs/<run_id>.log          its stdout + stderr
    <state>/local/scheduler.lock             flock held by the live scheduler
    <state>/local/scheduler.log              the scheduler's own log

Concurrency is limited machine-wide (across sweeps) by flock'ed slot files in a folder private to
the user on this machine (:func:`slot_dir`): a killed process releases its slot automatically.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from scalerl.harness.errors import ExecutionError


@dataclass(frozen=True)
class LocalLayout:
    state_dir: Path

    @property
    def root(self) -> Path:
        return self.state_dir / "local"

    @property
    def queue(self) -> Path:
        return self.root / "queue"

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def lock(self) -> Path:
        return self.root / "scheduler.lock"

    def make(self) -> None:
        for d in (self.queue, self.pids, self.logs):
            d.mkdir(parents=True, exist_ok=True)

    def queued(self) -> list[Path]:
        return sorted(self.queue.glob("*.json")) if self.queue.exists() else []

    def queued_run_ids(self) -> set[str]:
        return {p.stem.split("-", 1)[1] for p in self.queued()}

    def pid_file(self, run_id: str) -> Path:
        return self.pids / f"{run_id}.pid"

    def exit_file(self, run_id: str) -> Path:
        return self.pids / f"{run_id}.exit"


def open_lock_file(path: Path) -> int:
    """A file descriptor of the lock file ``path``, opened for reading and writing: created
    (0600) when missing, never truncated, never through a symlink (``O_NOFOLLOW``), and only a
    regular file this user owns; anything else raises :class:`ExecutionError` naming it. A lock
    file's content (a slot's holder) is rewritten by its holder under the lock, never on open."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ExecutionError(
                f"lock file {path} is a symlink; it is never followed (fix: remove it; whoever "
                "planted it could make the next run overwrite the file it points to)"
            ) from None
        raise ExecutionError(f"cannot open lock file {path}: {err.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else f"owned by uid {st.st_uid}"
        raise ExecutionError(f"lock file {path} is {what}; it is not used (fix: remove it)")
    os.set_blocking(fd, True)
    return fd


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive non-blocking flock on ``path`` (opened by :func:`open_lock_file`); the open
    file holds it until closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Through open()'s opener, so the file object keeps its name (the slot's holder reads it).
    fh = open(path, "r+", opener=lambda name, _flags: open_lock_file(Path(name)))  # noqa: SIM115
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


ENV_SLOT_DIR = "SCALERL_SLOT_DIR"


def slot_dir() -> Path:
    """The machine-wide slots' folder: private to this user on this machine, checked every time
    (:func:`private_dir`). ``$SCALERL_SLOT_DIR``, else ``$XDG_RUNTIME_DIR/scalerl-local-slots``
    (the user's own runtime folder, per machine), else ``~/.cache/scalerl/local-slots-<host>`` (a
    home shared over NFS by several machines keeps one folder per machine). Never a fixed name
    under a world-writable /tmp, where another user could create the folder first, or plant a
    symlink in it that the next local run would follow and overwrite."""
    explicit = os.environ.get(ENV_SLOT_DIR)
    if explicit:
        return private_dir(Path(explicit))
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _owned_private(Path(runtime)):
        return private_dir(Path(runtime) / "scalerl-local-slots")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return private_dir(cache / "scalerl" / f"local-slots-{socket.gethostname()}")


def _owned_private(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can enter: created 0700 when missing; an existing one
    must be a real folder (not a symlink), owned by this user, with no access for group or others.
    Anything else raises :class:`ExecutionError` naming the folder and the fix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    try:
        st = os.lstat(path)
    except OSError as err:
        raise ExecutionError(f"local slot folder {path}: {err.strerror}") from None
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symlink"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif st.st_uid != os.getuid():
        problem = f"is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    elif st.st_mode & 0o077:
        problem = f"has mode {stat.S_IMODE(st.st_mode):04o}: group or others may enter it"
    if problem is not None:
        raise ExecutionError(
            f"local slot folder {path} {problem}; its lock files are not trusted (fix: remove it, or "
            f"point ${ENV_SLOT_DIR} at a folder of your own with mode 0700)"
        )
    return path


def acquire_slot(max_parallel: int) -> IO[str] | None:
    """One of ``max_parallel`` machine-wide slots, or None when all are taken."""
    folder = slot_dir()
    for i in range(max_parallel):
        fh = try_lock(folder / f"slot{i}.lock")
        if fh is not None:
            return fh
    return None


# Linux's kernel threads are children of kthreadd (pid 2), itself a child of pid 0.
_KERNEL_PARENTS = (0, 2)


def pid_alive(pid: int, marker: bytes = b"scalerl.harness.execution") -> bool:
    """True when ``pid`` is a live harness process whose command line holds ``marker`` (a job's,
    by default; guards against pid reuse). Read through psutil, so it answers the same on Linux
    and macOS (a laptop's local sweeps): a zombie has exited (its parent reaps it), a process we
    may not inspect is not ours."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        cmdline = proc.cmdline()
        if not cmdline:
            # A user process reads an empty command line only inside execve (the scheduler's
            # child becoming the job): it is alive. A kernel thread (a reused pid) has none for good.
            return proc.ppid() not in _KERNEL_PARENTS
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False
    return marker in b"\0".join(arg.encode("utf-8", "surrogateescape") for arg in cmdline)
