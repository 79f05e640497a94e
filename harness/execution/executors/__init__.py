"""Executors registry: ``local`` (subprocesses, default), ``slurm`` (submitit arrays), ``debug``.

The built-in executors register themselves when :func:`get_executor` first imports them, so
importing this package (as every job process does) loads none of them.
"""

from scalerl.harness.execution.executors.base import (
    EXECUTORS,
    Executor,
    ExecutorContext,
    JobHandle,
    JobState,
    get_executor,
)

__all__ = ["EXECUTORS", "Executor", "ExecutorContext", "JobHandle", "JobState", "get_executor"]
