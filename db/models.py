"""The tables, as SQLAlchemy 2.0 typed declarative models.

These classes describe the schema for Alembic and for typed ORM use inside :mod:`scalerl.db`; they
never leave the package (callers get frozen dataclasses or DataFrames). The schema itself is
created only by the migrations in ``db/migrations/versions`` (the first one mirrors these models).

Points are keyed by ``(run_id, metric, step)`` (the primary key, so also the unique constraint
and the clustered order every curve query reads in). A non-finite value is stored as NULL with
``nonfinite`` set to ``'nan'``, ``'+inf'`` or ``'-inf'`` so a diverged run stays visible.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, datetime: DateTime(timezone=True)}


class Sweep(Base):
    __tablename__ = "sweep"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The database role that created it (PostgreSQL's current_user, set by the database; 0007).
    # On PostgreSQL a sweep made before 0007 belongs to the role that ran the migration (the store's
    # administrator); NULL on SQLite. Who may change it: README, "Sharing a store".
    owner: Mapped[str | None] = mapped_column(String(200))


class SweepGrant(Base):
    """A role, besides the owner, that may change a sweep (``scalerl db grant``; 0007)."""

    __tablename__ = "sweep_grant"
    __table_args__ = (PrimaryKeyConstraint("sweep", "grantee", name="pk_sweep_grant"),)

    sweep: Mapped[str] = mapped_column(ForeignKey("sweep.name", ondelete="CASCADE"))
    grantee: Mapped[str] = mapped_column(String(200))
    granted_by: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime | None]


class Meta(Base):
    """Facts about the store itself: ``store_id``, a UUID made once by migration 0007."""

    __tablename__ = "scalerl_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Run(Base):
    """A run: a content hash of config + seed, so one run can belong to several sweeps.

    Which sweeps it belongs to is ``sweep_run`` (the ``v_runs`` view joins the two), never a
    column here: ``first_sweep`` (and ``variant``/``knob``/``alternative``) are those of the sweep
    that registered it first (0005 renamed ``sweep``, whose ``WHERE sweep =`` dropped shared runs).
    """

    __tablename__ = "run"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    first_sweep: Mapped[str] = mapped_column(ForeignKey("sweep.name", ondelete="CASCADE"), index=True)
    variant: Mapped[str] = mapped_column(String(200))
    knob: Mapped[str | None] = mapped_column(String(200))
    alternative: Mapped[str | None] = mapped_column(String(200))
    seed: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32), default="pending")
    # The current attempt number; 0 until the first start_attempt. Writers are fenced on it.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    executor: Mapped[str | None] = mapped_column(String(64))
    job_id: Mapped[str | None] = mapped_column(String(128))
    host: Mapped[str | None] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    # The code the latest attempt ran (git commit, dirty-diff hash, package versions; 0006), set by
    # start_attempt. NULL = unknown: runs stored before 0006, imported runs.
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The latest attempt's process (0007): its pid on ``host``, its start time as the kernel counts
    # it (``<boot id>:<ticks>``: a reused pid is another process), and the last time its point
    # writer said it lives. NULL for runs started before 0007 (never judged) and imported runs.
    pid: Mapped[int | None] = mapped_column(Integer)
    pid_start: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None]


class SweepRun(Base):
    """Membership: a run (a content hash of config + seed) can belong to several sweeps.

    ``variant``/``knob``/``alternative`` are the names *this* sweep gives the run; ``Run.first_sweep``
    and ``Run.variant`` stay those of the sweep that first registered it.
    """

    __tablename__ = "sweep_run"
    __table_args__ = (
        PrimaryKeyConstraint("sweep", "run_id", name="pk_sweep_run"),
        Index("ix_sweep_run_run", "run_id"),
    )

    sweep: Mapped[str] = mapped_column(ForeignKey("sweep.name", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(ForeignKey("run.run_id", ondelete="CASCADE"))
    variant: Mapped[str] = mapped_column(String(200))
    knob: Mapped[str | None] = mapped_column(String(200))
    alternative: Mapped[str | None] = mapped_column(String(200))


class Point(Base):
    __tablename__ = "point"
    __table_args__ = (
        PrimaryKeyConstraint("run_id", "metric", "step", name="pk_point"),
        {"sqlite_with_rowid": False},
    )

    # No foreign key on purpose: every write checks (and locks) the run in the same transaction
    # (the fencing check), and a per-row FK trigger more than halved PostgreSQL's ingest rate.
    run_id: Mapped[str] = mapped_column(String(64))
    step: Mapped[int] = mapped_column(Integer)
    metric: Mapped[str] = mapped_column(String(200))
    value: Mapped[float | None] = mapped_column(Float)
    nonfinite: Mapped[str | None] = mapped_column(String(4))
    gpu_hours: Mapped[float | None] = mapped_column(Float)
    flops: Mapped[float | None] = mapped_column(Float)
    tokens: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[float | None] = mapped_column(Float)
    wall_s: Mapped[float | None] = mapped_column(Float)
    # Bernoulli samples behind a pass-rate point (its binomial noise); NULL when unknown (0004).
    # After the compute columns: the writer's row tuple and scalerl.db.bulk's column order end with it.
    n: Mapped[int | None] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)


class Fit(Base):
    """Fits of one (sweep, metric, axis) are replaced together (``Store.replace_fits``, 0005)."""

    __tablename__ = "fit"
    __table_args__ = (Index("ix_fit_key", "sweep", "metric", "axis"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sweep: Mapped[str] = mapped_column(ForeignKey("sweep.name", ondelete="CASCADE"))
    run_id: Mapped[str | None] = mapped_column(String(64))  # NULL for a pooled variant fit
    variant: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(200))
    axis: Mapped[str] = mapped_column(String(32))
    window_start: Mapped[float | None] = mapped_column(Float)
    r0: Mapped[float | None] = mapped_column(Float)
    a: Mapped[float | None] = mapped_column(Float)
    a_lo: Mapped[float | None] = mapped_column(Float)
    a_hi: Mapped[float | None] = mapped_column(Float)
    b: Mapped[float | None] = mapped_column(Float)
    b_lo: Mapped[float | None] = mapped_column(Float)
    b_hi: Mapped[float | None] = mapped_column(Float)
    c_mid: Mapped[float | None] = mapped_column(Float)
    c_mid_lo: Mapped[float | None] = mapped_column(Float)
    c_mid_hi: Mapped[float | None] = mapped_column(Float)
    rmse: Mapped[float | None] = mapped_column(Float)
    n_points: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    method: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Verdict(Base):
    """Verdicts of one (sweep, metric, axis) are replaced together (``Store.replace_verdicts``)."""

    __tablename__ = "verdict"
    __table_args__ = (Index("ix_verdict_key", "sweep", "metric", "axis"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sweep: Mapped[str] = mapped_column(ForeignKey("sweep.name", ondelete="CASCADE"))
    knob: Mapped[str | None] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(200))
    alternative: Mapped[str | None] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(200))
    axis: Mapped[str] = mapped_column(String(32))
    verdict: Mapped[str] = mapped_column(String(32))
    a_base: Mapped[float | None] = mapped_column(Float)
    a_variant: Mapped[float | None] = mapped_column(Float)
    d_a: Mapped[float | None] = mapped_column(Float)
    d_a_lo: Mapped[float | None] = mapped_column(Float)
    d_a_hi: Mapped[float | None] = mapped_column(Float)
    b_base: Mapped[float | None] = mapped_column(Float)
    b_variant: Mapped[float | None] = mapped_column(Float)
    d_b: Mapped[float | None] = mapped_column(Float)
    d_b_lo: Mapped[float | None] = mapped_column(Float)
    d_b_hi: Mapped[float | None] = mapped_column(Float)
    margin: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)
    # Minimum detectable |dA| / |dB| at the sweep's seeds and noise, 80% power (0004).
    mde_a: Mapped[float | None] = mapped_column(Float)
    mde_b: Mapped[float | None] = mapped_column(Float)
    # Efficiency's second parameter and how sure the rule is of each claim (0007, issue 36).
    d_log_c_mid: Mapped[float | None] = mapped_column(Float)
    d_log_c_mid_lo: Mapped[float | None] = mapped_column(Float)
    d_log_c_mid_hi: Mapped[float | None] = mapped_column(Float)
    p_ceiling: Mapped[float | None] = mapped_column(Float)
    p_efficiency: Mapped[float | None] = mapped_column(Float)
    p_no_effect: Mapped[float | None] = mapped_column(Float)
    efficiency: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    """Append-only log: submitted, started, requeued, failed, fenced, completed, cancelled, ..."""

    __tablename__ = "event"
    __table_args__ = (Index("ix_event_sweep_time", "sweep", "time"), Index("ix_event_run", "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[datetime] = mapped_column(default=utcnow)
    sweep: Mapped[str | None] = mapped_column(String(200))
    run_id: Mapped[str | None] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(32))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


FIT_COLUMNS: tuple[str, ...] = (
    "run_id", "variant", "metric", "axis", "window_start", "r0", "a", "a_lo", "a_hi", "b", "b_lo",
    "b_hi", "c_mid", "c_mid_lo", "c_mid_hi", "rmse", "n_points", "status", "reason", "method",
)  # fmt: skip
VERDICT_COLUMNS: tuple[str, ...] = (
    "knob", "variant", "alternative", "metric", "axis", "verdict", "a_base", "a_variant", "d_a",
    "d_a_lo", "d_a_hi", "b_base", "b_variant", "d_b", "d_b_lo", "d_b_hi", "margin", "reason", "mde_a",
    "mde_b", "d_log_c_mid", "d_log_c_mid_lo", "d_log_c_mid_hi", "p_ceiling", "p_efficiency",
    "p_no_effect", "efficiency",
)  # fmt: skip
