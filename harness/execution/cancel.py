"""``scalerl cancel``: stop a sweep's unfinished jobs and mark their runs cancelled.

A cancelled run is not retried by ``max_retries`` bookkeeping; a later ``scalerl sweep`` submits
it again (the user asked for it), resuming from its checkpoint.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from harness.errors import ConfigError, StoreError
from harness.execution.executors.base import JobHandle, get_executor
from harness.execution.status import TERMINAL, _default_context, _records, latest_handles


def cancel(store: Any, sweep: str, *, run_id: str | None = None) -> dict[str, str]:
    """Cancel every unfinished run of ``sweep`` (or only ``run_id``); returns run_id -> outcome."""
    recs = {str(r.run_id): r for r in _records(store, sweep)}
    if run_id is not None and run_id not in recs:
        raise ConfigError(
            f"sweep {sweep!r} has no such run", field="--run", value=run_id, fix=f"use one of {sorted(recs)}"
        )
    targets = [rid for rid in recs if run_id is None or rid == run_id]
    handles = latest_handles(store, sweep)
    out: dict[str, str] = {}
    groups: dict[str, list[JobHandle]] = defaultdict(list)
    for rid in targets:
        if recs[rid].status in TERMINAL:
            out[rid] = f"already {recs[rid].status}"
        elif rid in handles:
            groups[handles[rid].executor].append(handles[rid])
        else:
            out[rid] = "never submitted"
    for name, group in groups.items():
        get_executor(name, _default_context(name, group[0])).cancel(group)
        for h in group:
            try:
                store.finish_run(
                    h.run_id, int(recs[h.run_id].attempts), "cancelled", error="cancelled by user"
                )
            except StoreError as err:
                out[h.run_id] = f"job cancelled; store not updated: {err}"
                continue
            store.log_event(h.run_id, "cancelled", h.as_event())
            out[h.run_id] = "cancelled"
    return out
