"""Sync job states into the store, and the per-run view ``scalerl status`` prints.

Where the jobs are is read back from the store's ``submitted`` events (one per submission, with
the executor, job id and where its files are), so status works from any process or machine that
can reach the store. A run the store has as ``running`` whose job ended without finishing it
(killed, cancelled, node failure), or ``submitted`` whose job ended before it started the run
(a crash at start-up), is marked ``failed`` here, fenced on its current attempt, so a later
``scalerl sweep`` retries it and ``--wait`` does not wait forever. A ``running`` run with no job
of ours (attached through ``client.init``, a search trial's run) is judged by its own process
(:mod:`scalerl.harness.execution.liveness`): gone from this machine, or silent elsewhere, it is
marked ``failed`` the same way, its error saying it was lost.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.db.redaction import scrub
from scalerl.harness.execution import liveness, provenance
from scalerl.harness.execution.executors.base import ExecutorContext, JobHandle, JobState, get_executor

log = logging.getLogger(__name__)

SUBMITTED = "submitted"
TERMINAL = ("completed", "failed", "cancelled", "pruned", "stopped-decided")


@dataclass(frozen=True)
class RunView:
    run_id: str
    variant: str
    seed: int
    status: str
    attempts: int
    job: str
    job_state: str
    error: str | None
    # The code the run's latest attempt ran: ``1a2b3c4+dirty``, ``no-git`` or ``unknown``
    # (scalerl.harness.execution.provenance.short), and the full record (None: unknown).
    code: str = "unknown"
    provenance: dict[str, Any] | None = None


def _records(store: Any, sweep: str) -> list[Any]:
    """The store's runs of ``sweep`` as rows with attribute access (a DataFrame's itertuples)."""
    from scalerl.db import queries

    frame = queries.runs(store, sweep)
    return list(frame.itertuples(index=False))


def latest_handles(store: Any, sweep: str) -> dict[str, JobHandle]:
    """run_id -> the handle of its latest submission."""
    from scalerl.db import queries

    frame = queries.events(store, sweep)
    out: dict[str, JobHandle] = {}
    if frame.empty:
        return out
    for row in frame.itertuples(index=False):
        if (
            row.kind == SUBMITTED
            and row.run_id
            and isinstance(row.detail, Mapping)
            and "job_id" in row.detail
        ):
            out[str(row.run_id)] = JobHandle.from_event(str(row.run_id), dict(row.detail))
    return out


def submissions(store: Any, sweep: str) -> dict[str, int]:
    """run_id -> how many times it was submitted (the first plus retries)."""
    from scalerl.db import queries

    frame = queries.events(store, sweep)
    counts: dict[str, int] = defaultdict(int)
    for row in frame.itertuples(index=False):
        if row.kind == SUBMITTED and row.run_id:
            counts[str(row.run_id)] += 1
    return dict(counts)


ContextFor = Callable[[str, JobHandle], ExecutorContext]


def _default_context(executor: str, handle: JobHandle) -> ExecutorContext:
    folder = handle.detail.get("state_dir") or handle.detail.get("folder") or "."
    return ExecutorContext(state_dir=Path(str(folder)))


def poll_jobs(
    handles: Mapping[str, JobHandle], context_for: ContextFor = _default_context
) -> dict[str, JobState]:
    """Ask each executor once about its jobs."""
    by_executor: dict[str, list[JobHandle]] = defaultdict(list)
    for h in handles.values():
        by_executor[h.executor].append(h)
    states: dict[str, JobState] = {}
    for name, group in by_executor.items():
        executor = get_executor(name, context_for(name, group[0]))
        states.update(executor.poll(group))
    return states


def sync(store: Any, sweep: str) -> dict[str, JobState]:
    """Poll every job of ``sweep`` and mark runs whose job died as failed; returns the job states."""
    # The runs are read before the jobs are polled: a job state is then never older than the
    # status it is judged against. Read after, a resubmission landing between the two (another
    # terminal's `scalerl sweep`) would pair the new `submitted` status with the old job's end,
    # and the fence (the attempt, still the old one's) would let that mark it failed.
    records = _records(store, sweep)
    handles = latest_handles(store, sweep)
    states = poll_jobs(handles)
    for rec in records:
        if rec.status == "running" and rec.run_id not in handles:
            # No job of ours to ask (attached from the lab's launcher, a search trial's run):
            # its process answers for it (liveness: gone from this machine, or no heartbeat).
            liveness.mark_lost(store, rec)
            continue
        state = states.get(rec.run_id)
        if rec.status not in ("running", "submitted") or state not in (JobState.FINISHED, JobState.LOST):
            continue
        handle = handles[rec.run_id]
        where = handle.detail.get("state_dir") or handle.detail.get("folder") or "its job folder"
        if rec.status == "running":
            reason = (
                f"job {handle.job_id} ({handle.executor}) ended without finishing the run "
                f"(scheduler state: {state.value}); it was killed, cancelled or its node died"
            )
        else:
            reason = (
                f"job {handle.job_id} ({handle.executor}) ended before the run started "
                f"(scheduler state: {state.value}); see the job's log under {where}"
            )
        # Fenced on the current attempt: if a newer attempt started meanwhile, it owns the run;
        # and only while it is as read, so a run that just ended keeps how it ended.
        if store.finish_run(rec.run_id, int(rec.attempts), "failed", error=reason, expect=str(rec.status)):
            log.info("run %s: %s", rec.run_id, reason)
    _reap_search(store, sweep)
    return states


def _reap_search(store: Any, sweep: str) -> None:
    """A search's trials whose worker died (its run lost) are failed in its study too."""
    from scalerl.harness.execution.cancel import _stored_spec
    from scalerl.harness.search.control import reap_trials, search_study_name

    if store.readonly:
        return
    study = search_study_name(sweep, _stored_spec(store, sweep))
    if study is None:
        return
    try:
        reap_trials(store, study)
    except Exception as err:  # the study's tables may be another role's to write, or unreachable
        log.warning("search %s: could not fail the trials of lost workers: %s", sweep, scrub(str(err)))


def views(store: Any, sweep: str, states: Mapping[str, JobState]) -> list[RunView]:
    handles = latest_handles(store, sweep)
    out = []
    for rec in _records(store, sweep):
        handle = handles.get(rec.run_id)
        state = states.get(rec.run_id)
        prov = rec.provenance if isinstance(getattr(rec, "provenance", None), dict) else None
        out.append(
            RunView(
                run_id=rec.run_id,
                variant=rec.variant,
                seed=int(rec.seed),
                status=rec.status,
                attempts=int(rec.attempts),
                job=f"{handle.executor}:{handle.job_id}" if handle else "-",
                job_state=state.value if state else "-",
                error=getattr(rec, "error", None),
                code=provenance.short(prov),
                provenance=prov,
            )
        )
    return out
