"""Write imported curves into the results store: one run per source run, points by step.

Identity: a run's id is the first 16 hex chars of SHA-256 of ``"<sweep>\\0<run name>"`` plus
``-s0``, so importing the same run again (or from another file that holds it too, as W&B exports
often do) upserts the same points instead of duplicating them. Without ``roles`` each imported
run is its own variant (named after the run, no knob, seed 0); with ``roles`` (from a
:class:`scalerl.harness.importers.mapping.RunMapping`) each run lands on its variant, knob, alternative and
seed (run id suffix ``-s<seed>``), so the sweep has a ``baseline`` and ``scalerl fit`` gives
verdicts. A run's membership keeps the names of its first import (the store's rule): to map the same
runs differently, import them into another sweep. Every run is marked ``completed``.

Compute columns: the point's ``step`` is always the source step. The x axis the user picked
fills one compute unit, named by ``axis_unit`` or inferred from the axis name:

- a step axis (``Step``, ``step``, ``_step``, ...): no compute column; fit with ``--axis step``;
- a time axis (a name containing ``time``, ``runtime`` or ``wall``, in seconds): ``wall_s`` = x and
  ``gpu_hours`` = x / 3600 (one device assumed; the file does not say how many were used);
- ``gpu_hours``, ``flops``, ``tokens``, ``samples`` or ``wall_s``: that column.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scalerl.db.limits import NAME_MAX, STEP_MAX, name_problem
from scalerl.db.spool import note_finish
from scalerl.harness.errors import ImportFormatError, StoreError
from scalerl.harness.importers.base import ImportedCurve, check_run_names, is_step_name
from scalerl.harness.importers.mapping import BASELINE, RunRole

AXIS_UNITS = ("step", "wall_s", "gpu_hours", "flops", "tokens", "samples")


def infer_unit(x_name: str) -> str:
    """The compute unit an axis name stands for; raises naming the fix when it cannot tell."""
    low = x_name.strip().lower()
    if is_step_name(low):
        return "step"
    if low in AXIS_UNITS:
        return low
    if any(k in low for k in ("time", "runtime", "wall")):
        return "wall_s"
    raise ImportFormatError(
        f"cannot tell which compute unit the axis {x_name!r} is "
        f"(fix: pass --axis-unit, one of {', '.join(AXIS_UNITS)})"
    )


def compute_for(unit: str, x: float) -> dict[str, float]:
    if unit == "step":
        return {}
    if unit == "wall_s":
        return {"wall_s": x, "gpu_hours": x / 3600.0}
    return {unit: x}


def run_id_for(sweep: str, run: str, seed: int = 0) -> str:
    return hashlib.sha256(f"{sweep}\0{run}".encode()).hexdigest()[:16] + f"-s{seed}"


def run_params(curves: Sequence[ImportedCurve]) -> dict[str, dict[str, str]]:
    """Run name -> its params (merged over the run's curves), the input of ``RunMapping.assign``."""
    out: dict[str, dict[str, str]] = {}
    for c in curves:
        out.setdefault(c.run, {}).update(c.params)
    return out


def _check_fits(what: str, value: str, where: str) -> None:
    """A name the store's columns cannot hold fails the import before anything is written."""
    problem = name_problem(value)
    if problem is not None:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise ImportFormatError(
            f"{where}: {what} {shown!r} {problem} (fix: rename it to at most {NAME_MAX} "
            "characters; a --map file can name variants)"
        )


def _fail(store: Any, run_id: str, attempt: int, error: str) -> None:
    # The store itself may be gone: the error the caller raises next says what matters.
    with contextlib.suppress(StoreError):
        store.finish_run(run_id, attempt, "failed", error=error)


@dataclass(frozen=True)
class ImportSummary:
    sweep: str
    runs: int
    new_runs: int
    curves: int
    points: int
    metrics: tuple[str, ...]


def import_curves(
    store: Any,
    curves: Sequence[ImportedCurve],
    sweep: str,
    *,
    axis_unit: str | None = None,
    roles: Mapping[str, RunRole] | None = None,
) -> ImportSummary:
    """Register one run per distinct run name and write its points through the store's writer.
    ``roles`` (run name -> role) places each run in the sweep; it must name every run."""
    from scalerl.db import RunRecord

    if axis_unit is not None and axis_unit not in AXIS_UNITS:
        raise ImportFormatError(f"--axis-unit {axis_unit!r} is unknown (fix: use one of {AXIS_UNITS})")
    check_run_names(curves)  # two runs of one name would merge into one
    by_run: dict[str, list[ImportedCurve]] = defaultdict(list)
    for c in curves:
        by_run[c.run].append(c)
    # Validate everything before the first write: a bad input never leaves a half-written store.
    if not any(len(c) for c in curves):
        raise ImportFormatError(
            "nothing to import: the sources hold no points (fix: check that the files hold logged "
            "values, not just a header, and that --metric names a logged metric)"
        )
    _check_fits("sweep name", sweep, "--sweep")
    units = {run: axis_unit or infer_unit(group[0].x_name) for run, group in by_run.items()}
    for c in curves:
        if c.steps.size and (int(c.steps.min()) < 0 or int(c.steps.max()) > STEP_MAX):
            bad = int(c.steps.min()) if int(c.steps.min()) < 0 else int(c.steps.max())
            raise ImportFormatError(
                f"{c.source}: run {c.run!r} metric {c.metric!r} has step {bad} "
                f"(fix: steps must be whole numbers in [0, {STEP_MAX}])"
            )
        _check_fits("metric name", c.metric, c.source)
    if roles is not None:
        missing = sorted(set(by_run) - set(roles))
        if missing:
            raise ImportFormatError(f"runs {missing} have no role in the mapping (fix: map every run)")
    for run, group in by_run.items():
        role = roles[run] if roles is not None else RunRole(run, None, None, 0)
        for what, value in (
            ("variant", role.variant),
            ("knob", role.knob),
            ("alternative", role.alternative),
        ):
            if value is not None:
                _check_fits(f"run {run!r}: {what}", value, group[0].source)
    spec: dict[str, Any] = {"source": "import"}
    if roles is not None:
        spec["loo"] = {"baseline_name": BASELINE}
    store.ensure_sweep(sweep, spec)
    new_runs = points = 0
    for run, group in by_run.items():
        unit = units[run]
        # step -> (metrics, compute): every metric logged at a step shares that step's compute.
        steps: dict[int, tuple[dict[str, float], dict[str, float]]] = {}
        for c in group:
            for st, xv, val in zip(c.steps.tolist(), c.x.tolist(), c.values.tolist(), strict=True):
                metrics, compute = steps.setdefault(int(st), ({}, compute_for(unit, float(xv))))
                metrics[c.metric] = float(val)
        role = roles[run] if roles is not None else RunRole(run, None, None, 0)
        # A source's own run id (W&B, MLflow) identifies the run; else its name does.
        run_id = run_id_for(sweep, group[0].run_key or run, role.seed)
        sources = sorted({c.source for c in group})
        config: dict[str, Any] = {
            "imported_from": sources,
            "run": run,
            "axis": group[0].x_name,
            "axis_unit": unit,
        }
        params = {k: v for c in group for k, v in c.params.items()}
        if params:
            config["params"] = params
        new_runs += bool(
            store.register_run(
                RunRecord(
                    run_id=run_id,
                    sweep=sweep,
                    variant=role.variant,
                    seed=role.seed,
                    config=config,
                    config_hash=run_id.split("-", 1)[0],
                    knob=role.knob,
                    alternative=role.alternative,
                )
            )
        )
        attempt = store.start_attempt(run_id, executor="import", job_id=None, host=socket.gethostname())
        writer = store.writer(run_id, attempt)
        try:
            for st in sorted(steps):
                metrics, compute = steps[st]
                writer.add(st, metrics, compute)
        finally:
            writer.close()
        left = writer.left_in_spool
        if left is not None:
            # The store refused or lost a batch: the points sit in the spool, not in the store.
            # Success would be a lie (the run "completed" with none of those points).
            # When the store is gone (the run cannot be marked failed now), `scalerl db replay`
            # stores the points and then completes the run: nothing else ever would.
            note_finish(left[0], run_id, attempt, "completed")
            _fail(store, run_id, attempt, f"{left[1]} point(s) did not reach the store")
            raise StoreError(
                f"run {run!r}: {left[1]} point(s) did not reach the store {store.url} and wait in "
                f"the spool {left[0]} (fix: see the warning above for the store's error, then "
                f"`scalerl db replay --spool {left[0].parent} URL` or import again)"
            )
        points += writer.points_written
        store.finish_run(run_id, attempt, "completed")
    return ImportSummary(
        sweep, len(by_run), new_runs, len(curves), points, tuple(sorted({c.metric for c in curves}))
    )
