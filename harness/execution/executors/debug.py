"""The ``debug`` executor: runs each job in this process, one after another, before returning.

For tests and for stepping through a runner in a debugger. A failing run is recorded as failed
in the store (by the job body) and does not stop the others.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from scalerl.harness.execution.executors.base import Executor, JobHandle, JobState, register_executor
from scalerl.harness.execution.job import SweepJob
from scalerl.harness.execution.spec import RunSpec

log = logging.getLogger(__name__)


@register_executor("debug")
class DebugExecutor(Executor):
    def submit(self, specs: Sequence[RunSpec]) -> list[JobHandle]:
        handles = []
        for spec in specs:
            handles.append(JobHandle(spec.run_id, "debug", str(os.getpid())))
            try:
                SweepJob(spec, "debug")()
            except Exception as exc:  # recorded on the run by the job body
                log.warning("run %s failed: %s", spec.run_id, exc)
        return handles

    def poll(self, handles: Sequence[JobHandle]) -> dict[str, JobState]:
        return {h.run_id: JobState.FINISHED for h in handles}

    def cancel(self, handles: Sequence[JobHandle]) -> None:
        return None
