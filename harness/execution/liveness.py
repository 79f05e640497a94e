"""Whether the process of a ``running`` run still lives, for runs no scheduler answers for.

A run the harness submitted has a job that an executor polls (:mod:`.status`). A run attached from
a lab's own launcher (``client.init``) or trained inside a search worker has none: killed by
SIGKILL, the OOM killer or a node failure, it would stay ``running`` forever. So every attempt
records its process (``Store.start_attempt(pid=, pid_start=)``: the pid, and the process's start
time as the kernel counts it, with the boot and the pid namespace it belongs to) and its point
writer bumps ``run.heartbeat_at`` while it lives (``scalerl.db.writer``). :func:`lost` judges:

- the process is on this machine (same boot, same pid namespace): gone, or its pid now another
  process's (another start time), is lost at once;
- elsewhere: a heartbeat older than :func:`stale_after_s` is lost;
- a run started before schema 0007 (no pid, no heartbeat) is never judged.

A lost run is marked ``failed`` with the reason, fenced on its attempt (:func:`mark_lost`), so a
requeue that started meanwhile is left alone and a later ``scalerl sweep`` retries it.
"""

from __future__ import annotations

import functools
import logging
import os
from datetime import UTC, datetime
from typing import Any

from scalerl.db.writer import heartbeat_s

log = logging.getLogger(__name__)

STALE_BEATS = 10  # a process elsewhere is lost after this many missed heartbeats


def stale_after_s() -> float:
    return STALE_BEATS * heartbeat_s()


@functools.cache
def _machine() -> str:
    """This boot of this machine, and this pid namespace: where a pid means one process."""
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()  # noqa: SIM115
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}/{ns}"


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):  # exited; its parent has not reaped it yet
        return None
    return fields[19].decode()  # starttime: field 22 of stat, the 20th after "(comm)"


def identity(pid: int) -> str | None:
    """``<boot id>/<pid namespace>/<start ticks>`` of process ``pid``, or None when there is no
    such live process (or no /proc to ask)."""
    machine = _machine()
    ticks = _start_ticks(pid)
    return None if not machine or ticks is None else f"{machine}/{ticks}"


def this_process() -> tuple[int, str | None]:
    """(pid, identity) of the calling process, for ``Store.start_attempt``."""
    return os.getpid(), identity(os.getpid())


def lost(run: Any, *, now: datetime | None = None) -> str | None:
    """Why ``run`` (a ``running`` run's row: ``pid``, ``pid_start``, ``heartbeat_at``, ``host``)
    has lost its process, or None while it may live (or cannot be judged)."""
    pid, start = getattr(run, "pid", None), getattr(run, "pid_start", None)
    beat = getattr(run, "heartbeat_at", None)
    if pid is None or pid != pid or not start:  # NaN from a DataFrame: unknown
        return None
    pid = int(pid)
    host = getattr(run, "host", None) or "?"
    machine = _machine()
    if machine and str(start).rsplit("/", 1)[0] == machine:
        if identity(pid) != start:
            return (
                f"lost: its process {pid} on {host} is gone (killed, or it exited without finishing the run)"
            )
        return None
    if beat is None or beat != beat:
        return None
    when = beat if isinstance(beat, datetime) else datetime.fromisoformat(str(beat))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    age = ((now or datetime.now(UTC)) - when).total_seconds()
    if age > stale_after_s():
        return (
            f"lost: no heartbeat from its process {pid} on {host} for {age:.0f} s (a live one beats "
            f"every {heartbeat_s():.0f} s; it was killed, or its machine or network failed)"
        )
    return None


def mark_lost(store: Any, run: Any) -> str | None:
    """Fail ``run`` if :func:`lost` says so, fenced on its attempt; returns the reason if marked."""
    reason = lost(run)
    if reason is None:
        return None
    if store.finish_run(str(run.run_id), int(run.attempts), "failed", error=reason, expect="running"):
        log.info("run %s: %s", run.run_id, reason)
        return reason
    return None
