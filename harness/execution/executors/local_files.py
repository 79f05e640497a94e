"""The files the local executor and its scheduler share under a sweep's state directory.

    <state>/local/queue/<ns>-<run_id>.json   spec waiting for a free slot (FIFO by <ns>)
    <state>/local/pids/<run_id>.pid          pid of the job process once started
    <state>/local/pids/<run_id>.exit         its exit status once it ended
    <state>/local/logs/<run_id>.log          its stdout + stderr
    <state>/local/scheduler.lock             flock held by the live scheduler
    <state>/local/scheduler.log              the scheduler's own log

Concurrency is limited machine-wide (across sweeps) by flock'ed slot files in a per-user temp
directory: a killed process releases its slot automatically.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO


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


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive non-blocking flock on ``path``; the open file holds it until closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = path.open("a")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def slot_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"scalerl-local-slots-{os.getuid()}"


def acquire_slot(max_parallel: int) -> IO[str] | None:
    """One of ``max_parallel`` machine-wide slots, or None when all are taken."""
    for i in range(max_parallel):
        fh = try_lock(slot_dir() / f"slot{i}.lock")
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
