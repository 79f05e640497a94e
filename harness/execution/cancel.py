"""``scalerl cancel``: stop a sweep's unfinished jobs and mark their runs cancelled.

A cancelled run is not retried by ``max_retries`` bookkeeping; a later ``scalerl sweep`` submits
it again (the user asked for it), resuming from its checkpoint. :func:`stop_runs` is the same path
with another end status: stop-when-decided (:mod:`scalerl.harness.execution.decide`) marks its runs
``stopped-decided``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from scalerl.harness.errors import ConfigError, StoreError
from scalerl.harness.execution.executors.base import JobHandle, get_executor
from scalerl.harness.execution.status import TERMINAL, _default_context, _records, latest_handles


def cancel(store: Any, sweep: str, *, run_id: str | None = None, db_url: str | None = None) -> dict[str, str]:
    """Cancel every unfinished run of ``sweep`` (or only ``run_id``); returns run_id -> outcome.

    A search (``design: optuna``) is cancelled through its study: its workers start no further
    trial and stop their running ones (:mod:`scalerl.harness.search.control`); the outcome then
    also has a ``search`` entry. ``db_url`` is the store's URL, where the study lives."""
    from scalerl.db.sharing import require_write
    from scalerl.harness.search.control import cancel_search, search_study_name

    # On a shared store, a sweep another role owns is refused here, before a job is stopped.
    require_write(store, sweep, "cancelling its runs")
    spec = _stored_spec(store, sweep)
    study = search_study_name(sweep, spec)
    if study is not None:
        if run_id is not None:
            raise ConfigError(
                f"sweep {sweep!r} is a search: its trials' runs are cancelled with the search",
                field="--run",
                value=run_id,
                fix=f"scalerl cancel {sweep} (every worker stops; scalerl sweep starts it again)",
            )
        return cancel_search(store, spec, study, db_url)
    recs = {str(r.run_id): r for r in _records(store, sweep)}
    if run_id is not None and run_id not in recs:
        raise ConfigError(
            f"sweep {sweep!r} has no such run", field="--run", value=run_id, fix=f"use one of {sorted(recs)}"
        )
    targets = [rid for rid in recs if run_id is None or rid == run_id]
    return stop_runs(store, sweep, targets, status="cancelled", error="cancelled by user", records=recs)


def stop_runs(
    store: Any,
    sweep: str,
    run_ids: Sequence[str],
    *,
    status: str,
    error: str | None = None,
    details: Mapping[str, Mapping[str, Any]] | None = None,
    records: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Stop the jobs of ``run_ids`` through their executor and mark the runs ``status``.

    The executor's cancel stops a running job at its next step boundary with a checkpoint (local:
    SIGTERM; Slurm: scancel) and drops a queued one. The run is marked first-come: fenced on the
    attempt read here, so a run a newer attempt owns is left alone. The status event carries the
    job handle plus ``details[run_id]``. Returns run_id -> outcome (``status`` when marked).
    """
    recs = dict(records) if records is not None else {str(r.run_id): r for r in _records(store, sweep)}
    handles = latest_handles(store, sweep)
    out: dict[str, str] = {}
    groups: dict[str, list[JobHandle]] = defaultdict(list)
    for rid in run_ids:
        if recs[rid].status in TERMINAL:
            out[rid] = f"already {recs[rid].status}"
        elif rid in handles:
            groups[handles[rid].executor].append(handles[rid])
        elif getattr(recs[rid], "executor", None) == "attach":
            # client.init registered it from the lab's own launcher: no job of ours to stop, but
            # its process is known (liveness) and the run ends here in the store.
            out[rid] = _cancel_attached(store, recs[rid], status=status, error=error)
        elif getattr(recs[rid], "executor", None) == "import":
            out[rid] = "imported (its source still says running): no job to stop"
        else:
            out[rid] = "never submitted"
    for name, group in groups.items():
        get_executor(name, _default_context(name, group[0])).cancel(group)
        for h in group:
            try:
                marked = store.finish_run(h.run_id, int(recs[h.run_id].attempts), status, error=error)
            except StoreError as err:
                out[h.run_id] = f"job stopped; store not updated: {err}"
                continue
            if not marked:
                out[h.run_id] = "job stopped; a newer attempt owns the run (store not updated)"
                continue
            store.log_event(h.run_id, status, h.as_event() | dict((details or {}).get(h.run_id) or {}))
            out[h.run_id] = status
    return out


def _cancel_attached(store: Any, rec: Any, *, status: str, error: str | None) -> str:
    """End an attached run (``client.init``) as ``status``, fenced on its attempt. Its process,
    when it lives on this machine (the same process the attempt recorded, not a reused pid), gets
    SIGTERM, as a local job does: the client ends the attempt on it (it finds the run ended and
    leaves it so). Elsewhere the process is the lab's launcher's to stop; its points still land
    (the attempt is not superseded), and its finish finds the run ended and leaves it so."""
    import contextlib
    import os
    import signal

    from scalerl.harness.execution import liveness

    marked = store.finish_run(str(rec.run_id), int(rec.attempts), status, error=error)
    if not marked:
        return "a newer attempt owns the run (store not updated)"
    store.log_event(str(rec.run_id), status, {"executor": "attach", "attempt": int(rec.attempts)})
    pid, start = getattr(rec, "pid", None), getattr(rec, "pid_start", None)
    mine = pid is not None and pid == pid and int(pid) == os.getpid()  # the Python API, in-process
    if pid is not None and pid == pid and not mine and start and liveness.identity(int(pid)) == start:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGTERM)
    return status


def _stored_spec(store: Any, sweep: str) -> dict[str, Any]:
    """The spec the store recorded for ``sweep`` ({} for an unknown one)."""
    import json

    from scalerl.db import queries

    frame = queries.sweeps(store)
    rows = frame[frame["name"] == sweep] if not frame.empty else frame
    if rows.empty:
        return {}
    spec = rows["spec"].iloc[0]
    spec = json.loads(spec) if isinstance(spec, str) else spec
    return dict(spec) if isinstance(spec, dict) else {}
