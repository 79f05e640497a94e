"""Write imported curves into the results store: one run per source run, points by step.

Identity: a run's id is the first 16 hex chars of SHA-256 of ``"<sweep>\\0<run name>"`` plus
``-s0``, so importing the same run again (or from another file that holds it too, as W&B exports
often do) upserts the same points instead of duplicating them. Without ``roles`` each imported
run is its own variant (named after the run, no knob, seed 0); with ``roles`` (from a
:class:`scalerl.harness.importers.mapping.RunMapping`) each run lands on its variant, knob, alternative and
seed (run id suffix ``-s<seed>``), so the sweep has a ``baseline`` and ``scalerl fit`` gives
verdicts. A run's membership keeps the names of its first import (the store's rule): to map the same
runs differently, import them into another sweep. Each run ends in its curves' ``status`` (the
source's state, mapped: ``completed``, ``failed``, ``cancelled``, ``preempted``, ``unknown``); a
``running`` run stays ``running``. Which runs are written at all is
:mod:`scalerl.harness.importers.selection`'s business (failed runs are left out by default).
Tags and the source's own state word go into the run's stored config (``tags``,
``source_status``): an imported run's id hashes the sweep and the run, never its config, so they
change no run's identity.

Compute columns: the point's ``step`` is always the source step. The x axis the user picked
fills one compute unit, named by ``axis_unit`` or inferred from the axis name:

- a step axis (``Step``, ``step``, ``_step``, ...): no compute column; fit with ``--axis step``;
- a time axis (a name containing ``time``, ``runtime`` or ``wall``, in seconds): ``wall_s`` = x and
  ``gpu_hours`` = x / 3600 (one device assumed; the file does not say how many were used);
- ``gpu_hours``, ``flops``, ``tokens``, ``samples`` or ``wall_s``: that column;
- a metric the run logs (:mod:`scalerl.harness.importers.axis`), by the words of its name:
  ``hours`` fills ``gpu_hours`` (``perf/gpu_hours``), ``tokens`` / ``flops`` / ``samples`` that
  column (``perf/total_num_tokens``); a rate (``throughput``, ``mfu``, ``tokens_per_second``) or a
  name with none of these (or more than one) is refused, naming ``--axis-unit``.

Defaults: the sweep's spec keeps ``fit: {metric, axis}`` (:func:`import_defaults`): the axis the
import filled and the metric it read, so ``scalerl fit``, ``report``, ``forecast``, the API and
the notebooks need no ``--axis`` / ``--metric`` (an explicit one still wins). A later import into
the same imported sweep replaces them; a recipe's sweep keeps its own ``fit`` section.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import re
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scalerl.db.limits import NAME_MAX, STEP_MAX, name_problem
from scalerl.db.spool import defer_finish
from scalerl.harness.axes import COMPUTE_AXES
from scalerl.harness.errors import ConfigError, ImportFormatError, StoreError
from scalerl.harness.importers.base import ImportedCurve, check_run_names, is_step_name
from scalerl.harness.importers.mapping import BASELINE, RunRole

if TYPE_CHECKING:
    from scalerl.db import RunRecord

AXIS_UNITS = ("step", "wall_s", *COMPUTE_AXES)


# The words of an axis name that say which compute column it fills (``perf/gpu_hours``: "gpu",
# "hours"); a time axis is told by substrings, as before (``_runtime``, ``Relative Time``).
_UNIT_WORDS: dict[str, tuple[str, ...]] = {
    "gpu_hours": ("hours", "hour", "gpuh"),
    "tokens": ("tokens", "token", "toks"),
    "flops": ("flops", "flop"),
    "samples": ("samples", "sample"),
}
_TIME_PARTS = ("time", "runtime", "wall")
# A rate is no amount spent: its running total is meaningless and its value does not grow.
_RATE_WORDS = ("throughput", "rate", "mfu", "speed", "util", "utilization")
_PER_TIME = ("s", "sec", "secs", "second", "seconds", "min", "minute", "minutes", "hour", "hr", "h")


def infer_unit(x_name: str) -> str:
    """The compute unit an axis name stands for; raises naming the fix when it cannot tell."""
    low = x_name.strip().lower()
    if is_step_name(low):
        return "step"
    if low in AXIS_UNITS:
        return low
    words = [w for w in re.split(r"[^a-z0-9]+", low) if w]
    per_time = any(w == "per" and nxt in _PER_TIME for w, nxt in itertools.pairwise(words))
    if per_time or any(w in _RATE_WORDS for w in words):
        raise ImportFormatError(
            f"the axis {x_name!r} is a rate, not an amount of compute spent (fix: pick a count such as "
            "perf/total_num_tokens or perf/gpu_hours as --axis-column, or pass --axis-unit "
            f"({', '.join(AXIS_UNITS)}) if it is one)"
        )
    found = [u for u, ws in _UNIT_WORDS.items() if any(w in words for w in ws)]
    if any(k in low for k in _TIME_PARTS):
        found.append("wall_s")
    if len(found) == 1:
        return found[0]
    why = f"it could be {' or '.join(found)}" if found else "its name names no compute unit"
    raise ImportFormatError(
        f"cannot tell which compute unit the axis {x_name!r} is: {why} "
        f"(fix: pass --axis-unit, one of {', '.join(AXIS_UNITS)})"
    )


# The compute column a fit reads for each unit: a time axis fills gpu_hours too (compute_for).
_FIT_AXIS = {"step": "step", "wall_s": "gpu_hours"}
_VALIDATION = re.compile(r"(val|valid|validation|eval|test)([-_/.@]|$)")


def import_defaults(
    metrics: Sequence[str], units: Sequence[str], metric: str | None = None
) -> tuple[dict[str, str], str | None]:
    """The ``fit`` defaults an import leaves its sweep, and a note when it cannot pick one.

    Axis: the fit axis of the compute column every run filled (none when runs differ). Metric:
    ``metric`` when it names an imported metric exactly (``--metric``; a glob names none), else
    the only metric, else ``val/pass_rate`` (the reference trainer's), else the one validation
    metric (a name starting ``val``, ``eval``, ``test``; of several, the one verl files under
    ``val-core/``), else none: ``scalerl fit`` then needs ``--metric``."""
    from scalerl.harness.analysis.groups import DEFAULT_METRIC

    out: dict[str, str] = {}
    notes = []
    axes = sorted({_FIT_AXIS.get(u, u) for u in units})
    if len(axes) == 1:
        out["axis"] = axes[0]
    elif axes:
        notes.append(f"no default axis: the runs fill {', '.join(axes)} (pass --axis)")
    names = sorted(set(metrics))
    vals = [n for n in names if _VALIDATION.match(n.lower())]
    core = [n for n in vals if n.lower().startswith("val-core/")]
    if metric is not None and metric in names:
        out["metric"] = metric
    elif len(names) == 1:
        out["metric"] = names[0]
    elif DEFAULT_METRIC in names:
        out["metric"] = DEFAULT_METRIC
    elif len(vals) == 1 or len(core) == 1:
        out["metric"] = vals[0] if len(vals) == 1 else core[0]
    else:
        shown = ", ".join((vals or names)[:6]) + (" ..." if len(vals or names) > 6 else "")
        notes.append(
            f"no default metric among {len(names)} ({len(vals)} validation): pass --metric to "
            f"`scalerl fit`, or import again with --metric M to make M the default (e.g. {shown})"
        )
    return out, "; ".join(notes) or None


def compute_for(unit: str, x: float) -> dict[str, float]:
    if unit == "step":
        return {}
    if unit == "wall_s":
        return {"wall_s": x, "gpu_hours": x / 3600.0}
    return {unit: x}


def run_id_for(sweep: str, run: str, seed: int = 0) -> str:
    return hashlib.sha256(f"{sweep}\0{run}".encode()).hexdigest()[:16] + f"-s{seed}"


def run_params(curves: Sequence[ImportedCurve]) -> dict[str, dict[str, str]]:
    """Run name -> its params and its tags as ``tag:<key>`` (merged over the run's curves), the
    input of ``RunMapping.match``."""
    out: dict[str, dict[str, str]] = {}
    for c in curves:
        got = out.setdefault(c.run, {})
        got.update(c.params)
        got.update({f"tag:{k}": v for k, v in c.tags.items()})
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


def check_sweep_name(sweep: str) -> None:
    """The sweep to import into is the user's argument, not the files': a name the store cannot
    hold is a configuration error (exit 3), found before any source is read."""
    problem = name_problem(sweep)
    if problem is not None:
        raise ConfigError(
            f"sweep name {problem}",
            field="--sweep",
            value=sweep if isinstance(sweep, str) and len(sweep) <= 60 else str(sweep)[:57] + "...",
            fix=f"name the sweep to import into (1 to {NAME_MAX} characters of text), e.g. --sweep old-runs",
        )


def _fail(store: Any, run_id: str, attempt: int, error: str) -> None:
    # The store itself may be gone: the error the caller raises next says what matters.
    with contextlib.suppress(StoreError):
        store.finish_run(run_id, attempt, "failed", error=error)


@dataclass(frozen=True)
class LeftOutRun:
    """A run the import leaves out of the sweep's verdicts for its state (failed, killed): it is
    still stored, with that state, its params and its link to the source, and no points, so
    ``scalerl ls``, ``status`` and the report count it instead of showing every run completed.
    ``curve``: any curve of the run; ``status``: the store status; ``reason``: why it is out."""

    curve: ImportedCurve
    role: RunRole
    status: str
    reason: str


@dataclass(frozen=True)
class ImportSummary:
    sweep: str
    runs: int
    new_runs: int
    curves: int
    points: int
    metrics: tuple[str, ...]
    # The sweep's ``fit`` defaults after the import (``metric``, ``axis``), and why one is missing.
    defaults: Mapping[str, str] = field(default_factory=dict)
    defaults_note: str | None = None
    # Runs stored without points because their state left them out of the verdicts (LeftOutRun).
    left_out_stored: int = 0

    def defaults_line(self) -> str:
        """What `scalerl fit SWEEP` will now use without flags, in one line."""
        metric = self.defaults.get("metric")
        axis = self.defaults.get("axis")
        have = (
            f"metric {metric!r} on axis {axis!r}"
            if metric and axis
            else (f"metric {metric!r}" if metric else f"axis {axis!r}" if axis else "none")
        )
        note = f" ({self.defaults_note})" if self.defaults_note else ""
        return f"sweep {self.sweep!r} defaults for fit/report/forecast: {have}{note}"


def import_curves(
    store: Any,
    curves: Sequence[ImportedCurve],
    sweep: str,
    *,
    axis_unit: str | None = None,
    roles: Mapping[str, RunRole] | None = None,
    metric: str | None = None,
    left_out: Sequence[LeftOutRun] = (),
    progress: Any = None,
) -> ImportSummary:
    """Register one run per distinct run name and write its points through the store's writer.
    ``roles`` (run name -> role) places each run in the sweep; it must name every run. The sweep's
    spec keeps the import's defaults (:func:`import_defaults`; ``metric``: the one asked for).
    ``left_out`` runs are stored too, with their state and no points (:class:`LeftOutRun`), unless
    the store has them already. ``progress(done, total, run)`` is called after each run."""
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
    check_sweep_name(sweep)
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
    for out in left_out:
        _check_fits(f"run {out.curve.run!r}: variant", out.role.variant, out.curve.source)
    defaults, note = import_defaults([c.metric for c in curves], list(units.values()), metric)
    spec: dict[str, Any] = {"source": "import"}
    if roles is not None:
        spec["loo"] = {"baseline_name": BASELINE}
    before = _spec_of(store, sweep)
    store.ensure_sweep(sweep, {**spec, "fit": defaults} if defaults else spec)
    new_runs = points = 0
    for done, (run, group) in enumerate(by_run.items(), 1):
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
        if group[0].x_cumulative:  # the x is the running total of a per-step count
            config["axis_cumulative"] = True
        params = {k: v for c in group for k, v in c.params.items()}
        if params:
            config["params"] = params
        tags = {k: v for c in group for k, v in c.tags.items()}
        if tags:
            config["tags"] = tags
        status = group[-1].status  # selection made every curve of a run agree; else the last part
        record = _run_record(sweep, run_id, role, config, group[-1].source_status, group[0].link)
        new_runs += bool(store.register_run(record))
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
            defer_finish(store, writer, run_id, attempt, None if status == "running" else status, None)
            raise StoreError(
                f"run {run!r}: {left[1]} point(s) did not reach the store {store.url} and wait in "
                f"the spool {left[0]} (fix: see the warning above for the store's error, then "
                f"`scalerl db replay --spool {left[0].parent} URL` or import again)"
            )
        points += writer.points_written
        if status != "running":  # a run still going stays running, as start_attempt left it
            store.finish_run(run_id, attempt, status)
        if progress is not None:
            progress(done, len(by_run), run)
    stored_out = _store_left_out(store, sweep, left_out)
    # Only once every run is in: a failed import leaves the defaults as they were.
    fit = dict((before or {}).get("fit") or {})
    if before is not None and before.get("source") == "import" and {**fit, **defaults} != fit:
        store.update_sweep_spec(sweep, {"fit": {**fit, **defaults}})
    elif before is not None and before.get("source") != "import":
        # A recipe's sweep keeps its own fit section: the commands read that, not this import.
        defaults, note = fit, "kept: the sweep was not created by an import"
    elif before is not None:
        defaults = {**fit, **defaults}
    return ImportSummary(
        sweep,
        len(by_run),
        new_runs,
        len(curves),
        points,
        tuple(sorted({c.metric for c in curves})),
        defaults,
        note,
        stored_out,
    )


def _run_record(
    sweep: str,
    run_id: str,
    role: RunRole,
    config: dict[str, Any],
    source_status: str | None,
    link: Mapping[str, Any] | None,
) -> RunRecord:
    """The store's record of one imported run (imported or left out): the source's own state and
    where the run lives (runs_dataframe()'s source, `scalerl export`'s target) join its config."""
    from scalerl.db import RunRecord

    if source_status is not None:
        config["source_status"] = source_status
    if link:
        config["source"] = dict(link)
    return RunRecord(
        run_id=run_id,
        sweep=sweep,
        variant=role.variant,
        seed=role.seed,
        config=config,
        config_hash=run_id.split("-", 1)[0],
        knob=role.knob,
        alternative=role.alternative,
    )


def _store_left_out(store: Any, sweep: str, runs: Sequence[LeftOutRun]) -> int:
    """Register each left-out run (:class:`LeftOutRun`) that the store does not hold yet, ended in
    its state with the reason as its error; returns how many were stored."""
    stored = 0
    for out in runs:
        c, role = out.curve, out.role
        run_id = run_id_for(sweep, c.run_key or c.run, role.seed)
        config: dict[str, Any] = {"imported_from": [c.source], "run": c.run, "left_out": out.reason}
        if c.params:
            config["params"] = dict(c.params)
        if c.tags:
            config["tags"] = dict(c.tags)
        record = _run_record(sweep, run_id, role, config, c.source_status, c.link)
        if not store.register_run(record):
            continue  # imported before (with --include-failed, say): its points and state stay
        attempt = store.start_attempt(run_id, executor="import", job_id=None, host=socket.gethostname())
        store.finish_run(run_id, attempt, out.status, error=f"left out of the import: {out.reason}")
        stored += 1
    return stored


def _spec_of(store: Any, sweep: str) -> dict[str, Any] | None:
    """The stored spec of ``sweep``, or None when it does not exist yet."""
    from scalerl.db import queries

    known = queries.sweeps(store)
    match = known[known["name"] == sweep]
    return None if match.empty else dict(match.iloc[0]["spec"] or {})
