"""Sweep execution: executors (``local``, ``slurm``, ``debug``), runners (``reference``,
``command``), the checkpointable job body, submission and status sync.

``scalerl sweep`` = :func:`harness.execution.sweep.prepare` + :func:`harness.execution.sweep.launch`;
``scalerl status`` = :func:`harness.execution.status.sync`; ``scalerl cancel`` =
:func:`harness.execution.cancel.cancel`. Importing this package loads no heavy dependency.
"""

from harness.execution.executors.base import EXECUTORS, Executor, ExecutorContext, JobHandle, JobState
from harness.execution.runners.base import RUNNERS, Outcome, RunContext, Runner
from harness.execution.spec import Resources, RunSpec

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
