"""A compute axis the run logs as a metric: ``--axis-column perf/gpu_hours`` (optionally
``--axis-cumulative`` for a per-step count such as verl's ``perf/total_num_tokens``).

ScaleRL fits against compute, and a lab's trainer logs its compute as just another metric
(MLflow, W&B, TensorBoard, verl's JSON lines). The importers read such a source on its steps;
:func:`on_logged_axis` then places every other metric of a run on the axis metric of the same run,
joined by step, and the axis leaves the metrics (its values are the x now; ``scalerl import``
stores them in the compute column they name, :func:`scalerl.harness.importers.ingest.infer_unit`).

- As logged: a point's x is the axis's value logged at the same step. A compute axis only grows,
  so a run whose axis falls loses every point, counted as ``bad-axis-column`` with the fix (it is
  a per-step count, pass ``--axis-cumulative``): against that run only, so an import that leaves
  the run out (``--exclude``, a failed run) goes on.
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

from collections.abc import Callable, Sequence
from dataclasses import replace

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
    no run logs ``axis``; a run whose axis falls (as logged) or has a negative count (running
    total) loses its points as ``bad-axis-column``."""
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
        refused = None
        try:
            at = None if ax is None else _lookup(result.source, run, ax, cumulative)
        except ImportFormatError as err:
            # This run's axis is no compute axis: its points cannot be placed. Counted against the
            # run, not raised: a run the import leaves out (--exclude, failed) takes it with it.
            at, refused = None, str(err)
        for c in group:
            if c.metric == axis:
                continue
            if refused is not None:
                if len(c):
                    log.add("bad-axis-column", refused, metric=c.metric, run=run, n=len(c))
                x = np.full(c.steps.size, np.nan)
            elif at is None:
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
