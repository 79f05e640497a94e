"""Who holds the local executor's machine-wide slots, so a run that waits for one says what for.

A slot is a flock'ed file (``local_files.slot_dir()/slotN.lock``, N < the scheduler's
max_parallel); the lock is what counts, and a killed holder releases it. Beside the lock, the
scheduler that starts a run in a slot writes who holds it into the same file: sweep, run id,
the job's pid, its state dir. A holder is believed only while that pid is a live harness job
(a released slot may still hold its last holder's text; a reused pid runs something else).

A scheduler with queued runs and no free slot, some of them held by another state dir's runs
(another scheduler: another sweep folder or user), writes ``<state>/local/waiting.json``: the
holders of the slots it may use and how many runs wait. ``scalerl status`` and the progress of
``scalerl sweep --wait`` read it (:func:`waiting`); it is removed once the queue moves.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from scalerl.harness.errors import ExecutionError
from scalerl.harness.execution.executors.local_files import LocalLayout, pid_alive, slot_dir

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scalerl.harness.execution.executors.base import JobHandle

log = logging.getLogger(__name__)

WAITING = "waiting.json"
_SCHEDULER_MARKER = b"local_scheduler"


@dataclass(frozen=True)
class Holder:
    """One held slot: which sweep's run, which process."""

    slot: int
    sweep: str
    run_id: str
    pid: int
    state_dir: str
    since: float  # epoch seconds when the run took the slot

    def describe(self) -> str:
        return f"sweep {self.sweep} run {self.run_id} (pid {self.pid})"


@dataclass(frozen=True)
class Waiting:
    """A scheduler's queue stalled on slots: ``queued`` runs wait for one of ``max_parallel``."""

    queued: int
    max_parallel: int
    holders: tuple[Holder, ...]
    since: float

    def describe(self) -> str:
        held = "; ".join(h.describe() for h in self.holders) or "nobody it can see (slots just freed)"
        return (
            f"{self.queued} run(s) waiting for a machine-wide local slot "
            f"({len(self.holders)} of {self.max_parallel} held): {held}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "holders": [asdict(h) for h in self.holders]}


def _slot_index(fh: IO[str]) -> int:
    return int(os.path.basename(fh.name).removeprefix("slot").removesuffix(".lock"))


def claim(fh: IO[str], *, spec: Path, run_id: str, pid: int, state_dir: str) -> None:
    """Write who holds the slot whose flock ``fh`` holds (the lock is taken already): the run of
    the spec file ``spec``. Never raises: a run that started is not stopped by its label."""
    try:
        sweep = str(json.loads(spec.read_text()).get("sweep", "?"))
        holder = Holder(_slot_index(fh), sweep, run_id, pid, state_dir, time.time())
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(asdict(holder)))
        fh.flush()
    except (OSError, ValueError, AttributeError):
        log.warning("could not record the holder of slot %s", fh.name, exc_info=True)


def release(fh: IO[str]) -> None:
    """Forget the holder before the lock goes (readers also check the pid, so this is tidiness)."""
    try:
        fh.truncate(0)
        fh.flush()
    except OSError:
        pass


def holder(slot: int) -> Holder | None:
    """The live holder of slot ``slot``, or None when free (or its holder is gone)."""
    try:
        fd = os.open(slot_dir() / f"slot{slot}.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd) as fh:
            data = json.loads(fh.read(65536) or "null")
        found = Holder(**data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError, ExecutionError):
        return None
    return found if found is not None and pid_alive(found.pid) else None


def holders(max_parallel: int) -> list[Holder]:
    return [h for i in range(max_parallel) if (h := holder(i)) is not None]


def note_waiting(layout: LocalLayout, max_parallel: int) -> None:
    """Record (and log, when it changes) that this scheduler's queue waits for a slot."""
    queued = len(layout.queued())
    now = holders(max_parallel)
    if all(h.state_dir == str(layout.state_dir) for h in now):
        # Held by this scheduler's own runs: an ordinary queue (status shows it as queued), not a
        # wait on someone else's machine-wide slots; saying so on every sweep was noise.
        clear_waiting(layout)
        return
    path = layout.root / WAITING
    before = waiting(layout, check_scheduler=False)
    same = before is not None and before.queued == queued and before.holders == tuple(now)
    if same:
        return
    state = Waiting(queued, max_parallel, tuple(now), before.since if before else time.time())
    if before is None or before.holders != state.holders:
        log.info("%s", state.describe())
    tmp = path.with_name(f".{WAITING}.{os.getpid()}")
    tmp.write_text(json.dumps({**state.as_dict(), "scheduler_pid": os.getpid()}))
    tmp.replace(path)  # a reader never sees half a file


def clear_waiting(layout: LocalLayout) -> None:
    (layout.root / WAITING).unlink(missing_ok=True)


def waiting(layout: LocalLayout, *, check_scheduler: bool = True) -> Waiting | None:
    """What the sweep's local queue waits for, or None (not waiting, or its scheduler is gone)."""
    try:
        data = json.loads((layout.root / WAITING).read_text())
        if check_scheduler and not pid_alive(int(data["scheduler_pid"]), marker=_SCHEDULER_MARKER):
            return None
        return Waiting(
            queued=int(data["queued"]),
            max_parallel=int(data["max_parallel"]),
            holders=tuple(Holder(**h) for h in data["holders"]),
            since=float(data["since"]),
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None


def sweep_waiting(handles: Iterable[JobHandle]) -> list[Waiting]:
    """What the local queues of these jobs (a sweep's latest handles) wait for: one entry per
    state dir whose scheduler is stalled on slots."""
    dirs = sorted(
        {str(h.detail["state_dir"]) for h in handles if h.executor == "local" and "state_dir" in h.detail}
    )
    return [w for d in dirs if (w := waiting(LocalLayout(Path(d)))) is not None]
