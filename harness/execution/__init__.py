"""Sweep execution: executors (``local``, ``slurm``, ``debug``), runners (``reference``,
``command``), the checkpointable job body, submission and status sync.

``scalerl sweep`` = :func:`scalerl.harness.execution.sweep.prepare` +
:func:`scalerl.harness.execution.sweep.launch`; ``scalerl status`` =
:func:`scalerl.harness.execution.status.sync`; ``scalerl cancel`` =
:func:`scalerl.harness.execution.cancel.cancel`.

Importing this package loads nothing: the names below come from their modules on first access, so
:mod:`scalerl.harness.execution.rank` (which :mod:`scalerl.harness.client` imports in a lab's
trainer) does not bring the executors, runners and importers with it.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scalerl.harness.execution.executors.base import (
        EXECUTORS,
        Executor,
        ExecutorContext,
        JobHandle,
        JobState,
    )
    from scalerl.harness.execution.runners.base import RUNNERS, Outcome, RunContext, Runner
    from scalerl.harness.execution.spec import Resources, RunSpec

_WHERE = {
    **dict.fromkeys(("EXECUTORS", "Executor", "ExecutorContext", "JobHandle", "JobState"), "executors.base"),
    **dict.fromkeys(("RUNNERS", "Outcome", "RunContext", "Runner"), "runners.base"),
    **dict.fromkeys(("Resources", "RunSpec"), "spec"),
}

__all__ = [
    "EXECUTORS",
    "RUNNERS",
    "Executor",
    "ExecutorContext",
    "JobHandle",
    "JobState",
    "Outcome",
    "Resources",
    "RunContext",
    "RunSpec",
    "Runner",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"scalerl.harness.execution.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'scalerl.harness.execution' has no attribute {name!r}")
