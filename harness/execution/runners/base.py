"""The runner plug-in interface: turn a :class:`RunSpec` into points in a sink.

A runner is looked up by the recipe's ``runner.type`` in :data:`RUNNERS`. Contract:

- ``run`` writes every point through ``ctx.sink`` (a ``scalerl.db.PointWriter`` in real jobs) and returns
  :attr:`Outcome.COMPLETED` when the run reached its budget, or :attr:`Outcome.STOPPED` when
  ``ctx.stop`` was set (preemption / time limit) and the run checkpointed so a later attempt can
  resume from ``ctx.workdir``.
- ``ctx.superseded()`` turns True once a newer attempt of the run took over (the store fenced this
  attempt's writes, seen at its next batch of points). The runner then ends at once, returning
  :attr:`Outcome.STOPPED` *without* a checkpoint: the successor resumes from, and checkpoints
  into, the same ``workdir``, and nothing this attempt still does can reach the store. Otherwise a
  superseded process trains on to its budget (hours on a cluster) beside its successor.
- A failure raises; the job body records the error text on the run.
- It must be safe to call again on the same ``workdir`` after a stop or a crash (resume).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.spec import RunSpec


class Sink(Protocol):
    """Structurally the trainer's ``PointSink`` (``scalerl.db.PointWriter`` satisfies it)."""

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        """``n``: metric -> Bernoulli samples behind its value (binomial noise); None: unknown."""

    def flush(self) -> None: ...


class NullSink:
    """A sink that keeps nothing: for a dry render of a run's templates, and for the ranks > 0 of
    a multi-task job, whose points are rank 0's to write."""

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        return None

    def flush(self) -> None:
        return None


class Outcome(StrEnum):
    COMPLETED = "completed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class RunContext:
    spec: RunSpec
    attempt: int
    sink: Sink
    workdir: Path
    stop: threading.Event
    db_url: str | None
    # note(kind, detail): log an event on the run (the job wires it to the store); None: no store.
    note: Callable[[str, Mapping[str, Any]], None] | None = None
    # superseded(): a newer attempt took the run over (the job wires it to its writer's fence).
    superseded: Callable[[], bool] = field(default=lambda: False)


class Runner(ABC):
    """Runs one attempt of one run. See the module docstring for the contract."""

    @abstractmethod
    def run(self, ctx: RunContext) -> Outcome: ...

    def resume_step(self, workdir: Path) -> int | None:
        """The step the next attempt resumes after (its checkpoint's), or None when unknown.

        The store drops the run's points beyond it when the attempt starts, so what a superseded
        attempt wrote past its checkpoint is replaced by the resumed attempt's own points."""
        return None

    def has_checkpoint(self, workdir: Path) -> bool:
        """Whether an attempt left a checkpoint in ``workdir`` to resume from (``--extend`` takes
        only such runs further). By default: the runner knows its checkpoint's step."""
        return self.resume_step(workdir) is not None


RUNNERS: dict[str, Callable[[], Runner]] = {}


def register_runner(name: str) -> Callable[[type[Runner]], type[Runner]]:
    def deco(cls: type[Runner]) -> type[Runner]:
        RUNNERS[name] = cls
        return cls

    return deco


def get_runner(name: str) -> Runner:
    # Importing the package registers the built-in runners.
    import scalerl.harness.execution.runners  # noqa: F401

    try:
        return RUNNERS[name]()
    except KeyError:
        raise ConfigError(
            "unknown runner type",
            field="runner.type",
            value=name,
            fix=f"use one of {sorted(RUNNERS)}",
        ) from None
