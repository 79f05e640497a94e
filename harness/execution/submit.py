"""Submit a planned sweep: record it in the store and submit only what is missing.

For every planned run, in plan order:

- ``completed``                       -> skipped;
- ``pruned`` / ``stopped-decided``     -> skipped (stopped on purpose; ``--extend`` resumes them);
- ``running`` / ``submitted`` / ``pending`` with a live job -> left alone;
- ``failed``                           -> retried while its retries (submissions after the first)
  are fewer than ``max_retries``; else reported as exhausted;
- never submitted, ``cancelled``, or ``pending`` / ``submitted`` / ``running`` whose job is gone
  -> submitted;
- made by other code than this submission's, under ``on_code_change: rerun``, and not running
  -> ``rerun`` from scratch (:mod:`scalerl.harness.execution.codechange`; ``refuse`` stopped the
  submission before this point, ``reuse`` keeps the rules above and says so in the reason).

A submitted run's status is ``submitted`` until its job calls ``start_attempt`` (``running``).

Before deciding, job states are synced into the store (:func:`scalerl.harness.execution.status.sync`), so
a run whose process was killed is seen as failed, not running. Submissions are recorded as
``submitted`` events carrying the job handle. Resubmitting a finished sweep submits nothing.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scalerl.harness.execution import codechange, provenance
from scalerl.harness.execution.codechange import CodeCheck
from scalerl.harness.execution.executors.base import Executor, JobHandle, JobState
from scalerl.harness.execution.spec import Resources, RunSpec
from scalerl.harness.execution.status import latest_handles, submissions, sync

Action = Literal["submit", "retry", "rerun", "skip-completed", "skip-stopped", "skip-running", "exhausted"]


@dataclass(frozen=True)
class Decision:
    spec: RunSpec
    action: Action
    reason: str

    @property
    def submits(self) -> bool:
        return self.action in ("submit", "retry", "rerun")


@dataclass(frozen=True)
class SubmitReport:
    sweep: str
    executor: str
    decisions: tuple[Decision, ...]
    handles: tuple[JobHandle, ...]
    code: CodeCheck | None = None  # runs other code made (None: not checked)

    def count(self, *actions: Action) -> int:
        return sum(d.action in actions for d in self.decisions)


def default_state_dir(sweep: str) -> Path:
    """Where a sweep keeps run workdirs (checkpoints) and job files: ``$SCALERL_STATE_DIR`` or
    ``./.scalerl``, then the sweep name. Must be visible to the jobs (shared FS on a cluster)."""
    return (Path(os.environ.get("SCALERL_STATE_DIR", ".scalerl")) / sweep).resolve()


def run_specs(
    sweep_name: str,
    planned: Sequence[Any],
    *,
    resources: Resources,
    state_dir: Path,
    db_url: str | None,
    checkpoint_grace_s: float = 60.0,
) -> list[RunSpec]:
    """One :class:`RunSpec` per planned run (``scalerl.harness.recipe.planner.PlannedRun``)."""
    return [
        RunSpec(
            sweep=sweep_name,
            variant=p.variant,
            knob=p.knob,
            alternative=p.alternative,
            seed=int(p.seed),
            run_id=p.run_id,
            recipe=p.recipe.model_dump(mode="json"),
            workdir=str(state_dir / "runs" / p.run_id),
            db_url=db_url,
            resources=resources,
            checkpoint_grace_s=checkpoint_grace_s,
        )
        for p in planned
    ]


def register(store: Any, sweep_name: str, sweep_spec: dict[str, Any], planned: Sequence[Any]) -> int:
    """Record the sweep and its runs (idempotent); returns how many runs were new."""
    from scalerl.db import RunRecord

    store.ensure_sweep(sweep_name, sweep_spec)
    records = [
        RunRecord(
            run_id=p.run_id,
            sweep=sweep_name,
            variant=p.variant,
            knob=p.knob,
            alternative=p.alternative,
            seed=int(p.seed),
            config=p.recipe.resolved(),
            config_hash=p.config_hash,
        )
        for p in planned
    ]
    n: int = store.register_runs(records)
    return n


def decide(
    store: Any,
    specs: Sequence[RunSpec],
    max_retries: int,
    states: dict[str, JobState],
    code: CodeCheck | None = None,
) -> list[Decision]:
    """What to do with each run; see the module docstring for the rules."""
    out = _decide(store, specs, max_retries, states)
    changed = code.by_run() if code is not None else {}
    if not changed:
        return out
    assert code is not None
    for i, d in enumerate(out):
        c = changed.get(d.spec.run_id)
        if c is None:
            continue
        what = f"made by other code: {provenance.describe(c.diffs)}"
        if code.policy == "rerun" and d.action != "skip-running":
            out[i] = Decision(d.spec, "rerun", f"{d.reason}; {what}; rerun from scratch")
        else:
            out[i] = Decision(d.spec, d.action, f"{d.reason}; {what}")
    return out


def _decide(
    store: Any, specs: Sequence[RunSpec], max_retries: int, states: dict[str, JobState]
) -> list[Decision]:
    sweep = specs[0].sweep if specs else ""
    handles = latest_handles(store, sweep) if specs else {}
    counts = submissions(store, sweep) if specs else {}
    from scalerl.db import queries

    stored = {str(r["run_id"]): str(r["status"]) for r in queries.runs(store, sweep).to_dict("records")}
    out = []
    for spec in specs:
        status = stored.get(spec.run_id, "pending")
        state = states.get(spec.run_id)
        submitted = spec.run_id in handles
        if status == "completed":
            out.append(Decision(spec, "skip-completed", "completed"))
        elif status in ("pruned", "stopped-decided"):
            # Stopped on purpose with a checkpoint; only `scalerl sweep --extend` takes it further.
            out.append(Decision(spec, "skip-stopped", status))
        elif (
            status in ("running", "pending", "submitted") and submitted and state is not None and state.alive
        ):
            out.append(
                Decision(spec, "skip-running", f"{status}, job {handles[spec.run_id].job_id} {state.value}")
            )
        elif status == "failed":
            retries = max(0, counts.get(spec.run_id, 1) - 1)
            if retries < max_retries:
                out.append(Decision(spec, "retry", f"failed; retry {retries + 1} of {max_retries}"))
            else:
                out.append(
                    Decision(spec, "exhausted", f"failed after {retries} retries (max_retries={max_retries})")
                )
        elif not submitted:
            out.append(Decision(spec, "submit", "new"))
        else:
            shown = state.value if state is not None else "unknown"
            out.append(Decision(spec, "submit", f"{status} but its job is {shown}"))
    return out


def submit_sweep(
    store: Any,
    executor: Executor,
    specs: Sequence[RunSpec],
    *,
    max_retries: int,
    code: CodeCheck | None = None,
) -> SubmitReport:
    """Sync, decide, submit (one call to the executor), record ``submitted`` events.

    ``code``: what :func:`scalerl.harness.execution.codechange.check` found for ``specs`` (whose
    ``provenance`` the jobs record); its changed runs get a ``code-changed`` event and, under
    ``rerun``, start from scratch."""
    sweep = specs[0].sweep if specs else ""
    states = sync(store, sweep) if specs else {}
    decisions = decide(store, specs, max_retries, states, code)
    changed = code.by_run() if code is not None else {}
    todo = [
        dataclasses.replace(d.spec, restart_after=changed[d.spec.run_id].attempts)
        if d.action == "rerun"
        else d.spec
        for d in decisions
        if d.submits
    ]
    if code is not None and code.changed:
        codechange.log(store, sweep, code)
    # Marked before the executor sees them: a job may start (or, with the debug executor, finish)
    # before submit() returns, and its own status must not be overwritten.
    store.mark_runs([spec.run_id for spec in todo], "submitted")
    handles = executor.submit(todo) if todo else []
    store.log_events(sweep, "submitted", {h.run_id: h.as_event() for h in handles})
    return SubmitReport(sweep, executor.name, tuple(decisions), tuple(handles), code)
