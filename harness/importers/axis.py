"""A compute axis the run logs as a metric: ``--axis-column perf/gpu_hours`` (optionally
``--axis-cumulative`` for a per-step count such as verl's ``perf/total_num_tokens``).

ScaleRL fits against compute, and a lab's trainer logs its compute as just another metric
(MLflow, W&B, TensorBoard, verl's JSON lines). The importers read such a source on its steps;
:func:`on_logged_axis` then places every other metric of a run on the axis metric of the same run,
joined by step, and the axis leaves the metrics (its values are the x now; ``scalerl import``
stores them in the compute column they name, :func:`scalerl.harness.importers.ingest.infer_unit`).

- As logged: a point's x is the axis's value logged at the same step. A compute axis only grows,
  so an axis that falls is refused with the fix: it is a per-step count, pass ``--axis-cumulative``.
- Running total (``cumulative``): a point's x is the sum of the axis's values at the steps up to
  and including its own (0 before the first: verl's validation before training sits at step 0,
  at no compute). A negative per-step count is refused; a NaN one leaves every later total
  unknown.

A point with no axis value at its step (as logged), or after a non-finite count (running total),
is dropped and counted as ``bad-axis``, as is every point of a run that never logs the axis: the
import refuses them unless ``--allow-partial``, like every other loss (a run the import leaves
out, failed or unmapped, takes its losses with it). A curve that lost every point stays, empty,
so that its run can still be selected or left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import (
    _MAX_EXAMPLES,
    ImportedCurve,
    ImportLosses,
    ImportResult,
    LossLog,
)

Lookup = Callable[[NDArray[np.int64]], NDArray[np.float64]]


def on_logged_axis(
    results: Sequence[ImportResult], axis: str, *, cumulative: bool = False
) -> list[ImportResult]:
    """``results`` (read on the step axis, the ``axis`` metric kept whatever the metric filter)
    with every curve placed on ``axis``; see the module docstring. Raises ImportFormatError when
    no run logs ``axis``, or when it falls (as logged) or has a negative count (running total)."""
    logged = sorted({c.metric for r in results for c in r.curves})
    if axis not in logged:
        others = [m for m in logged if m != axis]
        shown = ", ".join(others[:12]) + (" ..." if len(others) > 12 else "")
        where = results[0].source if len(results) == 1 else f"{len(results)} runs"
        raise ImportFormatError(
            f"{where}: no run logs the axis {axis!r} (fix: pass as --axis-column a metric the runs "
            f"log, one of: {shown or 'none'})"
        )
    return [_place(r, axis, cumulative) for r in results]


def _place(result: ImportResult, axis: str, cumulative: bool) -> ImportResult:
    log = LossLog()
    runs: dict[tuple[str, str | None], list[ImportedCurve]] = {}
    for c in result.curves:
        runs.setdefault((c.run, c.run_key or c.origin), []).append(c)
    placed: list[ImportedCurve] = []
    for (run, _), group in runs.items():
        ax = next((c for c in group if c.metric == axis and len(c)), None)
        at = None if ax is None else _lookup(result.source, run, ax, cumulative)
        for c in group:
            if c.metric == axis:
                continue
            if at is None:
                if len(c):
                    log.add(
                        "bad-axis",
                        f"run {run!r} metric {c.metric!r}: the run logs no {axis!r}",
                        metric=c.metric,
                        run=run,
                        n=len(c),
                    )
                x = np.full(c.steps.size, np.nan)
            else:
                x = at(c.steps)
            ok = np.isfinite(x) & (x >= 0)
            if at is not None:
                for s in c.steps[~ok].tolist():
                    log.add(
                        "bad-axis",
                        f"run {run!r} metric {c.metric!r} step {s}: no {axis!r} there",
                        metric=c.metric,
                        run=run,
                    )
            # A curve that lost every point stays, empty: its run's name, state and params still
            # reach the selection and the mapping, which may leave the run out, and its losses
            # with it (base.losses_kept); ``scalerl import`` writes no empty curve.
            placed.append(
                replace(
                    c,
                    x_name=axis,
                    steps=c.steps[ok],
                    x=x[ok],
                    values=c.values[ok],
                    x_cumulative=cumulative,
                )
            )
    return replace(result, curves=tuple(placed), losses=merge_losses(result.losses, log.freeze()))


def _lookup(source: str, run: str, ax: ImportedCurve, cumulative: bool) -> Lookup:
    """step -> x on the axis curve ``ax`` (steps sorted and unique, as make_curve leaves them)."""
    steps, vals = ax.steps, ax.values
    if cumulative:
        neg = np.flatnonzero(vals < 0)
        if neg.size:
            i = int(neg[0])
            raise ImportFormatError(
                f"{source}: run {run!r}: {ax.metric!r} is {float(vals[i]):g} at step {int(steps[i])}; "
                "a per-step count is never negative, so its running total is no compute axis "
                "(fix: pass as --axis-column a count of what each step spent: tokens, samples, "
                "FLOPs, GPU-hours)"
            )
        totals = np.cumsum(vals)  # a NaN count leaves every later total unknown (NaN)

        def total(s: NDArray[np.int64]) -> NDArray[np.float64]:
            idx = np.searchsorted(steps, s, side="right")
            return np.where(idx > 0, totals[np.maximum(idx - 1, 0)], 0.0)

        return total
    finite = np.isfinite(vals)
    fs, fv = steps[finite], vals[finite]
    falls = np.flatnonzero(np.diff(fv) < 0)
    if falls.size:
        i = int(falls[0])
        raise ImportFormatError(
            f"{source}: run {run!r}: {ax.metric!r} falls from {float(fv[i]):g} at step {int(fs[i])} "
            f"to {float(fv[i + 1]):g} at step {int(fs[i + 1])}, and compute spent only grows "
            f"(fix: pass --axis-cumulative if {ax.metric!r} counts what each step spent, as verl's "
            "perf/total_num_tokens does; or pick a running total)"
        )
    last = steps.size - 1

    def exact(s: NDArray[np.int64]) -> NDArray[np.float64]:
        idx = np.minimum(np.searchsorted(steps, s), last)
        return np.where(steps[idx] == s, vals[idx], np.nan)

    return exact


def merge_losses(a: ImportLosses, b: ImportLosses) -> ImportLosses:
    """Both records' counts added, their examples joined (the first few of each reason)."""
    if not b:
        return a
    counts = {r: a.counts.get(r, 0) + b.counts.get(r, 0) for r in {*a.counts, *b.counts}}
    examples = {
        r: tuple(dict.fromkeys((*a.examples.get(r, ()), *b.examples.get(r, ()))))[:_MAX_EXAMPLES]
        for r in {*a.examples, *b.examples}
    }
    return ImportLosses(counts, examples, (*a.entries, *b.entries))


# The compute units an axis is picked by (the paper's GPU-hours first); a time axis is not one of
# them: wall time on a shared machine measures the queue as much as the work.
PICK_UNITS = ("gpu_hours", "flops", "tokens", "samples")


@dataclass(frozen=True)
class AxisChoice:
    """What :func:`pick_axis` found: the metric to place the curves on (None: the step) and the
    one line that says why (``scalerl import`` prints it)."""

    metric: str | None
    unit: str
    line: str
    # Metrics named for compute that fall somewhere: per-step counts (``--axis-cumulative``).
    counts: tuple[str, ...] = ()


def pick_axis(results: Sequence[ImportResult]) -> AxisChoice:
    """The compute axis of runs read on their step, from their logged metrics: a metric named for
    GPU-hours, FLOPs, tokens or samples (:func:`scalerl.harness.importers.ingest.infer_unit`; a
    rate such as ``perf/throughput`` never) that every run logs and that never falls in any of
    them. Of several, the unit first in :data:`PICK_UNITS`; two of the first unit make it
    ambiguous (none picked: the line names them and ``--axis-column``)."""
    from scalerl.harness.importers.base import SYSTEM_NAMES, is_step_name
    from scalerl.harness.importers.ingest import infer_unit

    runs: dict[tuple[str, str | None], dict[str, ImportedCurve]] = {}
    for r in results:
        for c in r.curves:
            runs.setdefault((c.run, c.run_key or c.origin), {})[c.metric] = c
    units: dict[str, str] = {}
    for name in sorted({m for got in runs.values() for m in got}):
        if is_step_name(name) or name in SYSTEM_NAMES:
            continue
        try:
            unit = infer_unit(name)
        except ImportFormatError:
            continue
        if unit in PICK_UNITS:
            units[name] = unit
    logged = {m: [got[m] for got in runs.values() if m in got and len(got[m])] for m in units}
    everywhere = {m: u for m, u in units.items() if runs and len(logged[m]) == len(runs)}
    # A running total grows: it never falls, and rises at most of its steps (a constant per-step
    # count never falls either, and is no total).
    falls = {m: sum(not _grows(c) for c in logged[m]) for m in everywhere}
    counts = tuple(m for m in everywhere if falls[m])
    # Placed on the axis, a point needs the axis logged at its step: a candidate that would drop
    # points is said, not picked (named, it imports with those points counted as lost).
    missing = {m: _unplaced(runs.values(), m) for m in everywhere if not falls[m]}
    grows = {m: everywhere[m] for m, n in missing.items() if n == 0}
    keep_step = "--axis-column C picks one, --axis-column step keeps the step"
    if not grows:
        if counts:
            m = counts[0]
            return AxisChoice(
                None,
                "step",
                f"axis: the step ({m!r} is named for {units[m]} but is no running total in "
                f"{falls[m]} of {len(runs)} run(s), as a per-step count is not: --axis-column {m} "
                "--axis-cumulative sums it; --axis-column C picks another)",
                counts,
            )
        gaps = sorted(missing)
        partial = sorted(m for m in units if m not in everywhere)
        if gaps:
            m = gaps[0]
            why = (
                f"{m!r} grows but is not logged at the step of {missing[m]} other point(s): "
                f"--axis-column {m} imports on it, those points counted as lost"
            )
        elif partial:
            why = f"{', '.join(partial[:3])} named for compute but not logged by every run"
        else:
            why = f"no logged metric is named for compute ({', '.join(PICK_UNITS)})"
        return AxisChoice(None, "step", f"axis: the step ({why}); {keep_step}", counts)
    best = next(u for u in PICK_UNITS if u in grows.values())
    top = sorted(m for m, u in grows.items() if u == best)
    if len(top) > 1:
        return AxisChoice(
            None,
            "step",
            f"axis: the step ({' and '.join(top)} are both named for {best} and never fall: "
            f"pass --axis-column with the one to fit on)",
            counts,
        )
    others = sorted(m for m in grows if m != top[0])
    more = f"; also logged: {', '.join(others)}" if others else ""
    return AxisChoice(
        top[0],
        best,
        f"axis: {top[0]} ({best}), picked from the logged metrics: named for {best}, logged by all "
        f"{len(runs)} run(s), never falls{more}; --axis-column C picks another, --axis-column step "
        "keeps the step",
        counts,
    )


def _grows(curve: ImportedCurve) -> bool:
    """Whether a metric read on the step is a running total: it never falls from one logged
    value to the next, and rises at least at half of its steps."""
    v = curve.values[np.isfinite(curve.values)]
    if v.size < 2:
        return True
    d = np.diff(v)
    return bool((d >= 0).all() and (d > 0).mean() >= 0.5)


def _unplaced(runs: Iterable[dict[str, ImportedCurve]], axis: str) -> int:
    """How many points of the other metrics have no finite ``axis`` value at their step."""
    n = 0
    for got in runs:
        ax = got[axis]
        at = set(ax.steps[np.isfinite(ax.values)].tolist())
        n += sum(int(np.isin(c.steps, list(at), invert=True).sum()) for m, c in got.items() if m != axis)
    return n
