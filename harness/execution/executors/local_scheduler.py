"""The local executor's detached scheduler: runs a sweep's queue with a concurrency limit.

``python -m scalerl.harness.execution.executors.local_scheduler STATE_DIR MAX_PARALLEL`` is spawned by
``scalerl sweep`` in its own session so the command can return while runs go on. It holds
``scheduler.lock`` while alive (one scheduler per sweep), starts queued specs as
``python -m scalerl.harness.execution.job SPEC local`` when a machine-wide slot is free, records each
job's pid and exit status, and exits when the queue is empty and nothing runs.

Hand-over without a lost submission: a submitter writes its queue files first and only then
checks the lock; a scheduler about to exit releases the lock first and only then looks at the
queue once more (taking the lock back if it finds work and nobody else took it).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from scalerl.harness.execution.executors.local_files import LocalLayout, acquire_slot, try_lock

log = logging.getLogger("scalerl.harness.execution.local_scheduler")

TICK_S = 0.5


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    slot: IO[str]
    run_id: str


def _start(layout: LocalLayout, spec_path: Path, slot: IO[str], threads: int) -> _Running:
    run_id = spec_path.stem.split("-", 1)[1]
    target = layout.root / "specs" / f"{run_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Forget a previous attempt's pid and exit status first, so nobody reads them as this one's.
    layout.exit_file(run_id).unlink(missing_ok=True)
    layout.pid_file(run_id).unlink(missing_ok=True)
    os.replace(spec_path, target)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with (layout.logs / f"{run_id}.log").open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scalerl.harness.execution.job", str(target), "local"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    layout.pid_file(run_id).write_text(str(proc.pid))
    log.info("started run %s as pid %d", run_id, proc.pid)
    return _Running(proc, slot, run_id)


def run_queue(layout: LocalLayout, max_parallel: int, threads: int) -> int:
    lock = try_lock(layout.lock)
    if lock is None:
        log.info("another scheduler owns %s; leaving the queue to it", layout.root)
        return 0
    running: list[_Running] = []
    try:
        while True:
            for job in list(running):
                rc = job.proc.poll()
                if rc is not None:
                    layout.exit_file(job.run_id).write_text(str(rc))
                    job.slot.close()
                    running.remove(job)
                    log.info("run %s exited with %d", job.run_id, rc)
            for spec_path in layout.queued():
                slot = acquire_slot(max_parallel)
                if slot is None:
                    break
                try:
                    running.append(_start(layout, spec_path, slot, threads))
                except OSError:
                    slot.close()
                    log.exception("could not start %s", spec_path)
            if not running and not layout.queued():
                lock.close()
                if not layout.queued():
                    return 0
                relock = try_lock(layout.lock)
                if relock is None:
                    return 0
                lock = relock
            time.sleep(TICK_S)
    finally:
        lock.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from scalerl.db.redaction import scrub_logs

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    scrub_logs()  # no URL secret reaches a log line, whatever logs it
    layout = LocalLayout(Path(args[0]))
    layout.make()
    return run_queue(layout, max_parallel=int(args[1]), threads=int(args[2]) if len(args) > 2 else 1)


if __name__ == "__main__":
    sys.exit(main())
