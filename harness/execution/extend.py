"""``scalerl sweep SWEEP.yaml --extend BUDGET``: take finished or stopped runs further.

Identity: an extended run is the same run, continued. It keeps its run id (which hashes the
budget it was planned with) and its workdir; the store records an ``extended`` event
``{from, to, unit, status, resume_step}`` and the job spec carries the new budget. The latest
``extended`` event is the run's budget from then on: every later submission of the run (a retry
after a failure, a plain ``scalerl sweep``) trains to it (:func:`apply_extensions`).

Which runs: those of the sweep that are ``completed`` with a budget below ``BUDGET``, or
``stopped-decided`` / ``pruned`` with a budget at most ``BUDGET`` (extending one of these to its
own budget finishes it), and that have a checkpoint. Others are reported and left alone: running
ones, failed or never-run ones (run ``scalerl sweep`` first), ones already at the budget. With
``fit.stop_when: decided``, ``--extend --wait`` stops again the runs of variants that are still
decided; add the override ``fit.stop_when=never`` to take every run to ``BUDGET``.

Exactness: the job resumes from the checkpoint the run left (the reference trainer saves one when
it completes and when it is stopped), ``start_attempt(resume_step=...)`` deletes any point past
it, and the trainer emits only points after it, so the curve has no gap and no duplicate. The
reference trainer's schedule does not depend on the budget (linear warmup, then a constant LR;
evaluation RNG seeded by step), so an extended run's points equal those of a run trained to the
larger budget from the start, bit for bit, when the old budget is a multiple of
``eval.every_steps``; otherwise the extended curve keeps the extra point the trainer emits at
the old budget, and the train metrics of the next point average over fewer steps.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.executors.base import Executor, JobHandle
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.execution.status import sync

EXTENDABLE = ("completed", "stopped-decided", "pruned")

Action = Literal["extend", "skip-at-budget", "skip-status", "skip-no-checkpoint"]


@dataclass(frozen=True)
class ExtendDecision:
    spec: RunSpec
    action: Action
    reason: str
    status: str = ""


@dataclass(frozen=True)
class ExtendReport:
    sweep: str
    executor: str
    budget: float
    unit: str
    decisions: tuple[ExtendDecision, ...]
    handles: tuple[JobHandle, ...]

    def count(self, *actions: Action) -> int:
        return sum(d.action in actions for d in self.decisions)


def budget_of(spec: RunSpec) -> tuple[float, str]:
    b = spec.recipe.get("budget") or {}
    return float(b["value"]), str(b["unit"])


def with_budget(spec: RunSpec, value: float) -> RunSpec:
    """``spec`` training to ``value`` (same run id, same workdir)."""
    budget = dict(spec.recipe.get("budget") or {}) | {"value": value}
    return dataclasses.replace(spec, recipe=dict(spec.recipe) | {"budget": budget})


def extensions(store: Any, sweep: str) -> dict[str, float]:
    """run_id -> the budget of its latest ``extended`` event."""
    from scalerl.db import queries

    frame = queries.events(store, sweep)
    out: dict[str, float] = {}
    for row in frame.itertuples(index=False):
        if row.kind == "extended" and row.run_id and isinstance(row.detail, dict) and "to" in row.detail:
            out[str(row.run_id)] = float(row.detail["to"])
    return out


def apply_extensions(store: Any, specs: Sequence[RunSpec]) -> list[RunSpec]:
    """``specs`` with each extended run's budget raised to its latest extension."""
    if not specs:
        return []
    ext = extensions(store, specs[0].sweep)
    return [with_budget(s, ext[s.run_id]) if s.run_id in ext else s for s in specs]


def _checkpoint(spec: RunSpec) -> tuple[bool, int | None]:
    """(whether the run left a checkpoint, the step it resumes after or None when the runner
    cannot tell: a command's own checkpoint, whose script re-logs what it re-trains)."""
    from scalerl.harness.execution.runners.base import get_runner

    runner = get_runner(spec.typed_recipe().runner.type)
    workdir = Path(spec.workdir)
    return runner.has_checkpoint(workdir), runner.resume_step(workdir)


def check_budget(budget: Any, specs: Sequence[RunSpec]) -> float:
    """``--extend BUDGET`` as a float, refused before any run is touched unless it is a finite
    number at least the sweep's planned budget (a NaN compares false with everything, so it would
    pass every "already there" test and be recorded as the runs' new budget). The planned budget
    itself is allowed: it finishes the stopped-decided and pruned runs."""
    fix = "pass a budget at least the sweep's, in its unit, e.g. --extend 600"
    if isinstance(budget, bool) or not isinstance(budget, int | float | str):
        raise ConfigError("the budget must be a number", field="--extend", value=budget, fix=fix)
    try:
        value = float(budget)
    except ValueError:
        raise ConfigError("the budget must be a number", field="--extend", value=budget, fix=fix) from None
    if not math.isfinite(value):
        raise ConfigError("the budget must be a finite number", field="--extend", value=budget, fix=fix)
    if value <= 0:
        raise ConfigError("a budget must be positive", field="--extend", value=budget, fix=fix)
    planned = min(budget_of(s)[0] for s in specs)
    if value < planned:
        unit = budget_of(specs[0])[1]
        raise ConfigError(
            f"the budget is below the sweep's planned budget ({planned:g} {unit}): no run can be "
            "taken back to less than it was planned for",
            field="--extend",
            value=budget,
            fix=f"pass a budget of at least {planned:g} {unit}",
        )
    return value


def plan_extension(
    store: Any, specs: Sequence[RunSpec], budget: float
) -> tuple[list[ExtendDecision], dict[str, int | None]]:
    """What ``--extend budget`` does with each run, and the checkpoint step of those it extends."""
    from scalerl.db import queries

    if not specs:
        return [], {}
    sweep = specs[0].sweep
    stored = {str(r["run_id"]): str(r["status"]) for r in queries.runs(store, sweep).to_dict("records")}
    specs = apply_extensions(store, specs)
    out: list[ExtendDecision] = []
    steps: dict[str, int | None] = {}
    for spec in specs:
        status = stored.get(spec.run_id, "pending")
        now, unit = budget_of(spec)
        if status not in EXTENDABLE:
            why = "running" if status in ("running", "submitted") else f"{status}; run `scalerl sweep` first"
            out.append(ExtendDecision(spec, "skip-status", why, status))
        elif budget < now or (budget == now and status == "completed"):
            out.append(ExtendDecision(spec, "skip-at-budget", f"{status} with budget {now:g} {unit}", status))
        else:
            found, step = _checkpoint(spec)
            if not found:
                why = f"{status}, but no checkpoint under {spec.workdir}"
                out.append(ExtendDecision(spec, "skip-no-checkpoint", why, status))
                continue
            steps[spec.run_id] = step
            at = "from its checkpoint" if step is None else f"at step {step}"
            why = f"{status} {at}: {now:g} -> {budget:g} {unit}"
            out.append(ExtendDecision(spec, "extend", why, status))
    return out, steps


def extend_sweep(store: Any, executor: Executor, specs: Sequence[RunSpec], budget: float) -> ExtendReport:
    """Sync job states, pick the runs to extend, record ``extended`` events, submit them."""
    if not specs:
        raise ConfigError("the sweep plans no runs", field="--extend", value=budget, fix="check its file")
    budget = check_budget(budget, specs)
    sweep = specs[0].sweep
    sync(store, sweep)
    decisions, steps = plan_extension(store, specs, budget)
    todo = [d for d in decisions if d.action == "extend"]
    unit = budget_of(specs[0])[1]
    store.log_events(
        sweep,
        "extended",
        {
            d.spec.run_id: {
                "from": budget_of(d.spec)[0],
                "to": budget,
                "unit": budget_of(d.spec)[1],
                # None: the runner resumes from a checkpoint whose step it cannot tell (a command's).
                "resume_step": steps[d.spec.run_id],
                "status": d.status,
            }
            for d in todo
        },
    )
    new = [with_budget(d.spec, budget) for d in todo]
    store.mark_runs([s.run_id for s in new], "submitted")
    handles = executor.submit(new) if new else []
    store.log_events(sweep, "submitted", {h.run_id: h.as_event() for h in handles})
    return ExtendReport(sweep, executor.name, budget, unit, tuple(decisions), tuple(handles))
