"""Frozen value objects the store hands out and takes in (never ORM rows)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

# Statuses a run may be in. ``running`` is set by start_attempt; the rest by the execution layer.
RUN_STATUSES: frozenset[str] = frozenset(
    {"pending", "submitted", "queued", "running", "requeued", "completed", "failed", "cancelled",
     "timeout", "preempted", "unknown", "pruned", "stopped-decided"}
)  # fmt: skip
# Statuses after which no job works on the run any more. ``pruned`` (an Optuna pruner stopped the
# trial) and ``stopped-decided`` (the sweep's verdict no longer needed it) keep their checkpoint,
# so ``scalerl sweep --extend`` can take them further.
ENDED_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "pruned", "stopped-decided"})
# Event kinds the harness emits; log_event accepts any short identifier, these are the known ones.
EVENT_KINDS: frozenset[str] = frozenset(
    {"submitted", "started", "requeued", "failed", "fenced", "completed", "cancelled", "timeout",
     "preempted", "status", "replayed", "spooled", "pruned", "stopped-decided", "extended",
     "losses", "code-changed"}
)  # fmt: skip

# "denied": the run exists, and the store refuses this role's writes to it (a shared PostgreSQL
# store's row-level security: a sweep this role does not own and was not granted).
WriteOutcome = Literal["ok", "fenced", "unknown_run", "denied"]


@dataclass(frozen=True)
class RunRecord:
    """What the planner knows about a run before it starts (input to ``Store.register_run``)."""

    run_id: str
    sweep: str
    variant: str
    seed: int
    config: Mapping[str, Any]
    config_hash: str
    knob: str | None = None
    alternative: str | None = None


@dataclass(frozen=True)
class RunInfo:
    """A run as stored (output of ``Store.get_run``); ``attempts`` is the current attempt number.

    ``sweep``, ``variant``, ``knob`` and ``alternative`` are those of the sweep that first
    registered the run (``run.first_sweep``); a run can belong to more sweeps (``sweep_run``,
    the ``v_runs`` view, ``scalerl.db.queries.runs``).
    """

    run_id: str
    sweep: str
    variant: str
    knob: str | None
    alternative: str | None
    seed: int
    config: Mapping[str, Any]
    config_hash: str
    status: str
    attempts: int
    executor: str | None
    job_id: str | None
    host: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    error: str | None
    # The code the latest attempt ran (schema 0006; scalerl.harness.execution.provenance); None:
    # unknown (stored before 0006, imported, or never started).
    provenance: Mapping[str, Any] | None = None
    # The latest attempt's process and its last heartbeat (schema 0007); None when unknown.
    pid: int | None = None
    pid_start: str | None = None
    heartbeat_at: datetime | None = None


@dataclass(frozen=True)
class ReplayReport:
    """What ``scalerl.db.spool.replay`` did: files replayed and removed, points written or fenced."""

    files: int = 0
    points: int = 0
    fenced_points: int = 0
    skipped_in_use: tuple[str, ...] = field(default_factory=tuple)
    kept_unknown_run: tuple[str, ...] = field(default_factory=tuple)
    # Points (and unreadable lines) the store cannot hold, set aside so the rest drains: each
    # quarantine file keeps them with the reason, next to the spool (``quarantine/<spool file>``).
    quarantined_points: int = 0
    quarantined: tuple[str, ...] = field(default_factory=tuple)
    # Spool files whose points belong to another store: (file, its store id, its store's URL).
    # Kept, never written here: a run id is a config hash, the same in every store.
    kept_other_store: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)
