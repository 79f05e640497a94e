"""The job body: one attempt of one run, wherever an executor starts it.

``SweepJob(spec)`` is a submitit ``Checkpointable`` callable (pickled by submitit for Slurm) and
also what ``python -m scalerl.harness.execution.job SPEC.json`` runs for the local executor and what the
debug executor calls in-process. One call:

1. skips a run the store already has as completed, pruned or stopped-decided (a duplicate or
   late requeue does nothing);
2. ``attempt = store.start_attempt(...)``, which bumps the run's attempt, fences every older
   attempt's writer and records the code the submission captured (``spec.provenance``); a run
   resubmitted with ``on_code_change: rerun`` starts over here (``spec.restart_after``: its old
   points and checkpoint go);
3. runs the runner with ``store.writer(run_id, attempt)`` in a worker thread, so the main thread
   stays free to take submitit's USR2 handler;
4. ``finish_run(completed)``, or ``finish_run(failed, error=...)`` with the error text, and
   re-raises so submitit and Slurm also see the failure.

SIGTERM (``scancel``, a preemption with ``PreemptMode=REQUEUE``, the time limit itself) also
sets ``stop``: the run checkpoints and is left unfinished for ``scalerl cancel`` / the requeued job.

Preemption / time limit (why a thread): Slurm sends USR2; submitit's handler runs on the main
thread and calls :meth:`SweepJob.checkpoint`. That sets the ``stop`` event, waits up to
``checkpoint_grace_s`` for the trainer to reach a step boundary, write its checkpoint and flush
its points, logs a ``requeued`` event, and returns a fresh ``SweepJob`` for submitit to requeue.
The next attempt resumes from ``workdir/checkpoint``. If the grace runs out, the periodic
checkpoint (``checkpoint_every_steps``) is the fallback, and attempt fencing rejects anything the
superseded process still writes, so the curve has neither gaps nor duplicates. The superseded
attempt itself ends as soon as it sees the fence (:class:`Fence`): its runner stops without a
checkpoint, since its successor resumes from and checkpoints into the same folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from submitit.helpers import Checkpointable, DelayedSubmission

from scalerl.harness.errors import ExecutionError
from scalerl.harness.execution.rank import process_rank
from scalerl.harness.execution.runners.base import NullSink, Outcome, RunContext, get_runner
from scalerl.harness.execution.spec import RunSpec

log = logging.getLogger(__name__)

ERROR_TAIL_CHARS = 4000
# How often a running attempt reads whether a newer one took its run over (Fence).
FENCE_CHECK_S = 30.0
T = TypeVar("T")


def current_job_id(executor: str) -> str:
    """The scheduler's id for this process: Slurm array task id, else the pid."""
    if executor == "slurm":
        array = os.environ.get("SLURM_ARRAY_JOB_ID")
        task = os.environ.get("SLURM_ARRAY_TASK_ID")
        if array and task:
            return f"{array}_{task}"
        return os.environ.get("SLURM_JOB_ID", str(os.getpid()))
    return str(os.getpid())


def error_text(exc: BaseException) -> str:
    """What the store records for a failed run: the message first, then the traceback's tail."""
    tb = "".join(traceback.format_exception(exc))
    head = f"{type(exc).__name__}: {exc}"
    return (head + "\n" + tb[-(ERROR_TAIL_CHARS - len(head)) :]) if len(head) < ERROR_TAIL_CHARS else head


class _Tapped:
    """A sink that writes through to the store's writer, then shows each point to ``tap`` (a
    search reports it to its Optuna trial there, and may set ``stop`` to prune)."""

    def __init__(self, inner: Any, tap: Tap) -> None:
        self.inner = inner
        self.tap = tap

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        self.inner.add(step, metrics, compute, n)
        self.tap(step, metrics, compute)

    def flush(self) -> None:
        self.inner.flush()


Tap = Callable[[int, Mapping[str, float], Mapping[str, float]], None]


def execute(
    spec: RunSpec,
    *,
    executor: str,
    stop: threading.Event,
    attempt_box: list[int] | None = None,
    tap: Tap | None = None,
) -> str:
    """Run one attempt; returns ``completed``, ``stopped``, ``skipped`` or ``superseded``.

    ``tap`` (optional) sees every point after the store's writer took it."""
    from scalerl import db  # the store; imported here so pickling a SweepJob needs no DB driver

    rank = process_rank() if executor == "slurm" else 0
    if rank != 0:
        return _follow(spec, rank, stop)
    store = db.open_store(spec.db_url)
    existing = store.get_run(spec.run_id)
    if existing is not None and existing.status in ("completed", "pruned", "stopped-decided"):
        return "skipped"  # `scalerl sweep --extend` marks a run submitted before resuming it
    workdir = Path(spec.workdir)
    # A rerun under new code (`on_code_change: rerun`) starts over once: the first attempt after
    # the resubmission that asked for it; a requeue of that attempt resumes as usual.
    restart = (
        existing is not None and spec.restart_after is not None and existing.attempts == spec.restart_after
    )
    if existing is not None and (existing.attempts == 0 or restart) and workdir.exists():
        # A first attempt starts from scratch: a workdir left by another store (a deleted
        # scalerl.db, a different --db) holds a checkpoint whose points this store never saw.
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    job_id, host = current_job_id(executor), socket.gethostname()
    code = spec.provenance
    try:
        runner = get_runner(spec.typed_recipe().runner.type)
        resume_step = -1 if restart else runner.resume_step(workdir)  # -1: every old point goes
    except Exception as exc:  # e.g. an unreadable checkpoint: record it on the run, not only in a log
        failed = store.start_attempt(
            spec.run_id, executor=executor, job_id=job_id, host=host, provenance=code
        )
        store.finish_run(spec.run_id, failed, "failed", error=error_text(exc))
        raise
    from scalerl.harness.execution import liveness

    pid, pid_start = liveness.this_process()  # a run no scheduler answers for (a search trial)
    attempt = store.start_attempt(
        spec.run_id, executor=executor, job_id=job_id, host=host, resume_step=resume_step, provenance=code,
        pid=pid, pid_start=pid_start,
    )  # fmt: skip
    if attempt_box is not None:
        attempt_box.append(attempt)
    _note_scheduler_requeue(store, spec, executor, existing)
    writer = store.writer(spec.run_id, attempt)
    fence = Fence(store, spec.run_id, attempt, writer)
    sink = writer if tap is None else _Tapped(writer, tap)
    ctx = RunContext(
        spec=spec,
        attempt=attempt,
        sink=sink,
        workdir=workdir,
        stop=stop,
        db_url=spec.db_url,
        note=lambda kind, detail: _note(store, spec.run_id, kind, detail),
        superseded=fence,
    )
    try:
        outcome = runner.run(ctx)
        writer.close()
    except BaseException as exc:
        try:
            writer.close()
        except Exception:  # the original failure is the one to report
            log.exception("flushing points of failed run %s", spec.run_id)
        if fence.seen:
            return "superseded"
        store.finish_run(spec.run_id, attempt, "failed", error=error_text(exc))
        raise
    if fence.seen:
        # A newer attempt owns the run now (the store rejected our points); go quietly.
        log.warning("run %s attempt %d was superseded; not finishing it", spec.run_id, attempt)
        return "superseded"
    fail_if_points_left(
        store, writer, spec.run_id, attempt, wished="completed" if outcome is Outcome.COMPLETED else None
    )
    if outcome is Outcome.STOPPED:
        return "stopped"
    now = store.get_run(spec.run_id)
    if now is not None and now.status == "cancelled":
        return "cancelled"  # `scalerl cancel` won the race with the last step: it stays cancelled
    fail_if_no_points(store, spec, attempt)
    return "completed" if store.finish_run(spec.run_id, attempt, "completed") else "superseded"


class Fence:
    """``ctx.superseded``: whether a newer attempt took the run over. The writer's fence shows it
    at this attempt's next batch of points; a trainer that reports through the client (its own
    writer) or rarely logs shows the writer nothing, so the store's attempt counter is also read,
    at most every ``every_s`` seconds (one indexed read per job and interval)."""

    def __init__(self, store: Any, run_id: str, attempt: int, writer: Any, every_s: float | None = None):
        self.store, self.run_id, self.attempt, self.writer = store, run_id, attempt, writer
        self.every_s = FENCE_CHECK_S if every_s is None else every_s  # (read now: tests shorten it)
        self._next = time.monotonic() + self.every_s
        self._newer = False

    @property
    def seen(self) -> bool:
        """Whether the fence has shown already (no store read)."""
        return self._newer or bool(self.writer.fenced)

    def __call__(self) -> bool:
        if self.seen:
            return True
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.every_s
            try:
                run = self.store.get_run(self.run_id)
            except Exception:  # the store is unreachable (the writer spools meanwhile): ask later
                log.debug("run %s: reading its attempt failed; asking again later", self.run_id)
                return False
            self._newer = run is not None and run.attempts > self.attempt
        return self._newer


def _note(store: Any, run_id: str, kind: str, detail: Mapping[str, Any]) -> None:
    """A runner's event on its run; losing it to a store error must not fail the run."""
    try:
        store.log_event(run_id, kind, detail)
    except Exception:
        log.exception("logging a %r event of run %s", kind, run_id)


def fail_if_no_points(store: Any, spec: RunSpec, attempt: int) -> None:
    """A runner that says "completed" for a run with no point in the store (a command that exits 0
    without ever writing its metrics) has produced nothing to fit: the run fails, saying where
    points are expected, instead of looking finished."""
    from scalerl.db import queries

    if queries.point_count(store, spec.run_id):
        return
    runner = spec.typed_recipe().runner.type
    where = (
        "append JSON lines to $SCALERL_METRICS_FILE, name a runner.tensorboard_dir it logs to, or "
        "call scalerl.harness.client.log"
        if runner == "command"
        else f"check the {runner} runner's inputs"
    )
    reason = (
        f"run {spec.run_id} (attempt {attempt}) ended with status completed but logged no points; "
        f"fix: {where}"
    )
    store.finish_run(spec.run_id, attempt, "failed", error=reason)
    raise ExecutionError(reason)


def _follow(spec: RunSpec, rank: int, stop: threading.Event) -> str:
    """Rank > 0 of a multi-task job (:mod:`scalerl.harness.execution.rank`): run the same work in its own
    folder, start no attempt and write nothing, so rank 0's attempt is the run's only one."""
    # A sibling of rank 0's folder, not inside it: rank 0 may wipe its own on a first attempt.
    base = Path(spec.workdir)
    workdir = base.with_name(f"{base.name}.rank-{rank}")
    workdir.mkdir(parents=True, exist_ok=True)
    runner = get_runner(spec.typed_recipe().runner.type)
    ctx = RunContext(spec=spec, attempt=0, sink=NullSink(), workdir=workdir, stop=stop, db_url=spec.db_url)
    outcome = runner.run(ctx)
    return f"follower-{outcome.value}"


def fail_if_points_left(
    store: Any, writer: Any, run_id: str, attempt: int, *, wished: str | None = None
) -> None:
    """After ``writer.close()``: when the store did not take every point (unreachable, corrupted,
    full), the run is not finished whatever its trainer says. Mark it failed, if the store still
    can, and raise ExecutionError saying where the points are kept. ``wished``: how the attempt
    ended otherwise; ``scalerl db replay`` ends the run so once it has stored every point
    (:func:`scalerl.db.spool.defer_finish`)."""
    from scalerl.db.spool import defer_finish

    reason = defer_finish(store, writer, run_id, attempt, wished, None)
    if reason is not None:
        raise ExecutionError(reason)


def _note_scheduler_requeue(store: Any, spec: RunSpec, executor: str, before: Any) -> None:
    """Log a ``requeued`` event when Slurm itself restarted this job (a preemption with
    PreemptMode=REQUEUE, a node failure), which no checkpoint hook saw. A USR2 requeue was
    already logged by the superseded process in :meth:`SweepJob.checkpoint`."""
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) if executor == "slurm" else 0
    if not restarts or before is None or before.status != "running":
        return
    from scalerl.db import queries

    events = queries.events(store, run_id=spec.run_id)
    logged = events[(events.kind == "requeued")]
    if any(d.get("attempt") == before.attempts for d in logged["detail"]):
        return
    store.log_event(
        spec.run_id,
        "requeued",
        {"attempt": before.attempts, "by": "slurm", "restart_count": restarts, "checkpointed": None},
    )


def call_beside_signals(fn: Callable[[], T], name: str, started: Callable[[threading.Thread], None]) -> T:
    """Run ``fn`` in a daemon thread (handed to ``started`` first) and wait for it in 0.2 s
    slices, so signal handlers (submitit's USR2, SIGTERM) still run on this, the main, thread.
    Returns ``fn``'s result or raises its exception."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, name=name, daemon=True)
    started(thread)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


class SweepJob(Checkpointable):
    """A checkpointable callable for one run; see the module docstring."""

    def __init__(self, spec: RunSpec, executor: str = "slurm") -> None:
        self.spec = spec
        self.executor = executor
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._attempts: list[int] = []

    # Only the spec travels in a pickle: events and threads are per process.
    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "executor": self.executor}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.spec = state["spec"]
        self.executor = state["executor"]
        self._init_runtime()

    @property
    def stop_event(self) -> threading.Event:
        return self._stop

    def _set_thread(self, thread: threading.Thread) -> None:
        self._thread = thread

    def __call__(self) -> str:
        if self.executor == "slurm" and threading.current_thread() is threading.main_thread():
            # Slurm sends SIGTERM to every process of the job on scancel and on preemption
            # (PreemptMode=REQUEUE); submitit ignores it. Stopping at the next step boundary
            # (with a checkpoint) keeps a script that exits 0 on SIGTERM from looking finished.
            signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
        try:
            result = call_beside_signals(
                lambda: execute(
                    self.spec, executor=self.executor, stop=self._stop, attempt_box=self._attempts
                ),
                f"run-{self.spec.run_id}",
                self._set_thread,
            )
        except (ExecutionError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:
            raise ExecutionError(f"run {self.spec.run_id} failed: {type(err).__name__}: {err}") from err
        return result or "stopped"

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Called by submitit on USR2: let the trainer checkpoint, then hand back a fresh job."""
        self.request_stop()
        if process_rank() != 0:  # rank 0 logs the requeue; the others only stop
            return DelayedSubmission(SweepJob(self.spec, self.executor))
        attempt = self._attempts[-1] if self._attempts else None
        clean = self._thread is None or not self._thread.is_alive()
        try:
            from scalerl import db

            db.open_store(self.spec.db_url).log_event(
                self.spec.run_id,
                "requeued",
                {"attempt": attempt, "job_id": current_job_id(self.executor), "checkpointed": clean},
            )
        except Exception:  # requeueing matters more than the event
            log.exception("logging the requeue of run %s", self.spec.run_id)
        return DelayedSubmission(SweepJob(self.spec, self.executor))

    def request_stop(self) -> bool:
        """Set ``stop`` and wait up to the grace period; True when the worker finished."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.spec.checkpoint_grace_s)
            return not self._thread.is_alive()
        return True


def main(argv: list[str] | None = None) -> int:
    """``python -m scalerl.harness.execution.job SPEC.json [EXECUTOR]``: the local executor's job process.

    SIGTERM / SIGUSR2 stop the run at its next step boundary (it checkpoints and exits 0 without
    finishing the run), so ``scalerl cancel`` and a machine shutdown both leave a resumable run.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m scalerl.harness.execution.job SPEC.json [EXECUTOR]", file=sys.stderr)
        return 2
    from scalerl.db.redaction import scrub, scrub_logs

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    scrub_logs()  # no URL secret reaches a log line, whatever logs it
    spec = RunSpec.read(Path(args[0]))
    job = SweepJob(spec, args[1] if len(args) > 1 else "local")
    for sig in (signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, lambda *_: job.stop_event.set())
    try:
        result = job()
    except Exception as exc:
        print(f"scalerl job: run {spec.run_id} failed: {scrub(str(exc))}", file=sys.stderr)
        return 1
    print(f"scalerl job: run {spec.run_id}: {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
