"""The executor plug-in interface and its name registry.

An executor ships :class:`RunSpec` s to wherever they run and reports on them later. Contract:

- ``submit(specs)`` returns one :class:`JobHandle` per spec, in order, without waiting for the runs
  (the debug executor is the exception: it runs them in-process before returning). Handles are
  plain data; the caller records them as ``submitted`` events so ``scalerl status`` and
  ``scalerl cancel`` can find the jobs from another process later.
- ``poll(handles)`` maps each handle's ``run_id`` to a :class:`JobState`; it never raises for a
  job the scheduler has forgotten (that is ``UNKNOWN``).
- ``cancel(handles)`` stops the jobs; a stopped job does not finish its run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.profile import SlurmProfile
from scalerl.harness.execution.spec import RunSpec


class JobState(StrEnum):
    PENDING = "pending"  # queued, not started
    RUNNING = "running"
    FINISHED = "finished"  # the job process ended (the store says how the run ended)
    LOST = "lost"  # the job ended without finishing its run (killed, cancelled, node died)
    UNKNOWN = "unknown"  # the scheduler does not know the job (purged from accounting)

    @property
    def alive(self) -> bool:
        return self in (JobState.PENDING, JobState.RUNNING)


@dataclass(frozen=True)
class JobHandle:
    run_id: str
    executor: str
    job_id: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_event(self) -> dict[str, Any]:
        return {"executor": self.executor, "job_id": self.job_id, **self.detail}

    @classmethod
    def from_event(cls, run_id: str, detail: dict[str, Any]) -> JobHandle:
        rest = {k: v for k, v in detail.items() if k not in ("executor", "job_id")}
        return cls(run_id=run_id, executor=str(detail["executor"]), job_id=str(detail["job_id"]), detail=rest)


@dataclass(frozen=True)
class ExecutorContext:
    """What every executor may need: where the sweep keeps its job files, and its settings."""

    state_dir: Path
    profile: SlurmProfile = field(default_factory=SlurmProfile)
    max_parallel: int | None = None


class Executor(ABC):
    name: ClassVar[str]

    def __init__(self, ctx: ExecutorContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def submit(self, specs: Sequence[RunSpec]) -> list[JobHandle]: ...

    @abstractmethod
    def poll(self, handles: Sequence[JobHandle]) -> dict[str, JobState]: ...

    @abstractmethod
    def cancel(self, handles: Sequence[JobHandle]) -> None: ...


EXECUTORS: dict[str, type[Executor]] = {}


def register_executor(name: str) -> Callable[[type[Executor]], type[Executor]]:
    def deco(cls: type[Executor]) -> type[Executor]:
        cls.name = name
        EXECUTORS[name] = cls
        return cls

    return deco


def get_executor(name: str, ctx: ExecutorContext) -> Executor:
    from scalerl.harness.execution.executors import debug, local, slurm  # noqa: F401  (they register)

    try:
        return EXECUTORS[name](ctx)
    except KeyError:
        raise ConfigError(
            "unknown executor", field="--executor", value=name, fix=f"use one of {sorted(EXECUTORS)}"
        ) from None
