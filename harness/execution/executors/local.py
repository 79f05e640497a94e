"""The ``local`` executor: each run is a subprocess on this machine, a few at a time.

``submit`` queues the specs (see :mod:`.local_files`) and, if no scheduler is alive for the sweep,
spawns a detached one (:mod:`.local_scheduler`), then returns at once. The concurrency limit is
``max_parallel`` or ``max(1, cores // threads_per_run)``, machine-wide. ``poll`` reads pid files
and process liveness; ``cancel`` drops queued specs and sends SIGTERM to running jobs, which stop
at their next step boundary with a checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from scalerl.harness.execution.executors.base import Executor, JobHandle, JobState, register_executor
from scalerl.harness.execution.executors.local_files import LocalLayout, pid_alive, slot_dir, try_lock
from scalerl.harness.execution.spec import RunSpec

SCHEDULER_START_S = 60.0


def default_parallelism(threads_per_run: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, threads_per_run))


@register_executor("local")
class LocalExecutor(Executor):
    @property
    def layout(self) -> LocalLayout:
        return LocalLayout(self.ctx.state_dir)

    def submit(self, specs: Sequence[RunSpec]) -> list[JobHandle]:
        if not specs:
            return []
        slot_dir()  # a slot folder another user could tamper with is refused here, not in the scheduler
        layout = self.layout
        layout.make()
        threads = max(s.resources.cpus_per_task for s in specs)
        for spec in specs:
            # Name = submission order, so the scheduler runs the queue first-in first-out.
            spec.write(layout.queue / f"{time.time_ns()}-{spec.run_id}.json")
        parallel = self.ctx.max_parallel or default_parallelism(threads)
        probe = try_lock(layout.lock)
        if probe is not None:
            probe.close()
            with (layout.root / "scheduler.log").open("ab") as out:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "scalerl.harness.execution.executors.local_scheduler",
                        str(self.ctx.state_dir),
                        str(parallel),
                        str(threads),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # survives the terminal that ran `scalerl sweep`
                )
            scheduler = proc.pid
        else:
            scheduler = 0  # the live scheduler picks the new files up
        return [
            JobHandle(s.run_id, "local", f"queued-{scheduler}", {"state_dir": str(self.ctx.state_dir)})
            for s in specs
        ]

    def _state(self, layout: LocalLayout, run_id: str, queued: set[str], scheduler_alive: bool) -> JobState:
        if run_id in queued:
            if scheduler_alive:
                return JobState.PENDING
            # A scheduler spawned a moment ago may not hold its lock yet.
            young = any(
                time.time() - p.stat().st_mtime < SCHEDULER_START_S
                for p in layout.queue.glob(f"*-{run_id}.json")
            )
            return JobState.PENDING if young else JobState.LOST
        pid_file = layout.pid_file(run_id)
        if layout.exit_file(run_id).exists():
            return JobState.FINISHED
        if pid_file.exists():
            try:
                pid = int(pid_file.read_text().strip())
            except ValueError:
                return JobState.UNKNOWN
            return JobState.RUNNING if pid_alive(pid) else JobState.LOST
        return JobState.UNKNOWN

    def poll(self, handles: Sequence[JobHandle]) -> dict[str, JobState]:
        out: dict[str, JobState] = {}
        for h in handles:
            layout = LocalLayout(type(self.ctx.state_dir)(h.detail.get("state_dir", self.ctx.state_dir)))
            probe = try_lock(layout.lock)
            alive = probe is None
            if probe is not None:
                probe.close()
            out[h.run_id] = self._state(layout, h.run_id, layout.queued_run_ids(), alive)
        return out

    def cancel(self, handles: Sequence[JobHandle]) -> None:
        for h in handles:
            layout = LocalLayout(type(self.ctx.state_dir)(h.detail.get("state_dir", self.ctx.state_dir)))
            for queued in layout.queued():
                if queued.stem.split("-", 1)[1] == h.run_id:
                    queued.unlink(missing_ok=True)
            pid_file = layout.pid_file(h.run_id)
            if pid_file.exists() and not layout.exit_file(h.run_id).exists():
                try:
                    pid = int(pid_file.read_text().strip())
                except ValueError:
                    continue
                if pid_alive(pid):
                    os.kill(pid, signal.SIGTERM)
