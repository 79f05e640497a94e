"""The local executor's detached scheduler: runs a sweep's queue with a concurrency limit.

``python -m scalerl.harness.execution.executors.local_scheduler STATE_DIR MAX_PARALLEL`` is spawned by
``scalerl sweep`` in its own session so the command can return while runs go on. It holds
``scheduler.lock`` while alive (one scheduler per sweep), starts queued specs as
``python -m scalerl.harness.execution.job SPEC local`` when a machine-wide slot is free, records each
job's pid and exit status, and exits when the queue is empty and nothing runs. A run that asks
for GPUs (``resources.gpus``) also waits for that many free GPUs and gets them as its
``CUDA_VISIBLE_DEVICES`` (:mod:`.local_gpus`).

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

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.executors.local_files import LocalLayout, acquire_slot, try_lock
from scalerl.harness.execution.executors.local_gpus import GpuPool, GpuSet, spec_gpus
from scalerl.harness.execution.executors.local_slots import claim, clear_waiting, note_waiting, release

log = logging.getLogger("scalerl.harness.execution.local_scheduler")

TICK_S = 0.5


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    slot: IO[str]
    run_id: str
    gpus: GpuSet | None = None


def _start(
    layout: LocalLayout, spec_path: Path, slot: IO[str], threads: int, gpus: GpuSet | None = None
) -> _Running:
    run_id = spec_path.stem.split("-", 1)[1]
    target = layout.root / "specs" / f"{run_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Forget a previous attempt's pid and exit status first, so nobody reads them as this one's.
    layout.exit_file(run_id).unlink(missing_ok=True)
    layout.pid_file(run_id).unlink(missing_ok=True)
    os.replace(spec_path, target)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if gpus is not None:
        env.update(gpus.env())  # this run's own GPUs, nobody else's
    with (layout.logs / f"{run_id}.log").open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scalerl.harness.execution.job", str(target), "local"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    layout.pid_file(run_id).write_text(str(proc.pid))
    # Say who holds the slot, so a run of another sweep waiting for it can name this one.
    claim(slot, spec=target, run_id=run_id, pid=proc.pid, state_dir=str(layout.state_dir))
    on = f" on GPU(s) {','.join(gpus.ids)}" if gpus is not None else ""
    log.info("started run %s as pid %d%s", run_id, proc.pid, on)
    return _Running(proc, slot, run_id, gpus)


def _reap(layout: LocalLayout, job: _Running) -> bool:
    """If ``job`` exited: record its exit status, free its slot and GPUs; returns whether it did.

    The exit file is keyed by run, so it is written only while the pid file still names this
    process: when a killed attempt is reaped after a resubmission of its run already started the
    next one, an exit file would make that live attempt read as finished, and ``sync`` would mark
    the run failed before it started."""
    rc = job.proc.poll()
    if rc is None:
        return False
    try:
        current = int(layout.pid_file(job.run_id).read_text().strip())
    except (OSError, ValueError):
        current = None
    if current == job.proc.pid:
        layout.exit_file(job.run_id).write_text(str(rc))
    else:
        log.info("run %s: an earlier attempt's process %d exited; a newer one runs", job.run_id, job.proc.pid)
    release(job.slot)
    job.slot.close()
    if job.gpus is not None:
        job.gpus.release()
    log.info("run %s exited with %d", job.run_id, rc)
    return True


def _refuse(layout: LocalLayout, spec_path: Path, reason: str) -> None:
    """End a queued run that can never start: its log says why, its exit status is 2."""
    run_id = spec_path.stem.split("-", 1)[1]
    target = layout.root / "specs" / f"{run_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(spec_path, target)
    with (layout.logs / f"{run_id}.log").open("a") as out:
        out.write(f"scalerl local scheduler: run {run_id} cannot start: {reason}\n")
    layout.exit_file(run_id).write_text("2")
    log.error("run %s cannot start: %s", run_id, reason)


def run_queue(layout: LocalLayout, max_parallel: int, threads: int) -> int:
    lock = try_lock(layout.lock)
    if lock is None:
        log.info("another scheduler owns %s; leaving the queue to it", layout.root)
        return 0
    running: list[_Running] = []
    pool = GpuPool()  # the machine's GPUs, looked up when a run first asks for some
    gpu_wait = ""
    try:
        while True:
            for job in list(running):
                if _reap(layout, job):
                    running.remove(job)
            stalled = False
            for spec_path in layout.queued():
                slot = acquire_slot(max_parallel)
                if slot is None:
                    stalled = True
                    break
                gpus: GpuSet | None = None
                if (wanted := spec_gpus(spec_path)) > 0:
                    try:
                        gpus = pool.take(wanted)
                    except ConfigError as err:
                        slot.close()
                        _refuse(layout, spec_path, str(err))
                        continue
                    if gpus is None:  # too few free GPUs: wait, first in first out, as for a slot
                        slot.close()
                        why = f"{spec_path.name} waits for {wanted} free GPU(s) of {len(pool.ids)}"
                        if why != gpu_wait:
                            log.info("%s", why)
                        gpu_wait = why
                        break
                gpu_wait = ""
                try:
                    running.append(_start(layout, spec_path, slot, threads, gpus))
                except OSError:
                    slot.close()
                    if gpus is not None:
                        gpus.release()
                    log.exception("could not start %s", spec_path)
            # Runs that wait for a slot say whose runs hold them (`scalerl status`, --wait).
            if stalled:
                note_waiting(layout, max_parallel)
            else:
                clear_waiting(layout)
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
