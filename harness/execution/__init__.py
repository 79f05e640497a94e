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

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

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

__getattr__ = lazy_getattr(
    "scalerl.harness.execution",
    {
        **dict.fromkeys(
            ("EXECUTORS", "Executor", "ExecutorContext", "JobHandle", "JobState"),
            "scalerl.harness.execution.executors.base",
        ),
        **dict.fromkeys(
            ("RUNNERS", "Outcome", "RunContext", "Runner"), "scalerl.harness.execution.runners.base"
        ),
        **dict.fromkeys(("Resources", "RunSpec"), "scalerl.harness.execution.spec"),
    },
)
