"""Loading a sweep for the report: the store's frames, plus fits computed on the fly if needed.

The report reads; it never writes. When the store holds no fits for the chosen metric and axis
(``scalerl fit`` has not been run), the fits and verdicts are computed here with the analysis
package and the page says they are not stored. If even that is impossible (no point on the axis,
too few points), :func:`missing_fits` says what is missing: ``scalerl report`` and
``Sweep.report`` stop with it; the data (raw curves only) is still there for a notebook. A sweep
with no point yet gets a page that says ``scalerl fit`` has not been run.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from scalerl.harness.axes import FIT_AXES
from scalerl.harness.errors import AnalysisError, ConfigError
from scalerl.harness.report.document import FitsSource, ReportData

log = logging.getLogger(__name__)

DEFAULT_METRIC = "val/pass_rate"  # as scalerl.harness.analysis.verdicts.service's (which imports scipy)
DEFAULT_AXIS = "flops"


def stored_axis(fits: pd.DataFrame, metric: str) -> str | None:
    """The axis the stored fits of ``metric`` use (the most common one), if any."""
    if fits.empty:
        return None
    stored = fits.loc[fits["metric"] == metric, "axis"]
    return None if stored.empty else str(stored.mode().iloc[0])


def _for(frame: pd.DataFrame, metric: str, axis: str) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[(frame["metric"] == metric) & (frame["axis"] == axis)].reset_index(drop=True)


def compute_fits(
    curves: pd.DataFrame,
    *,
    sweep: str,
    spec: dict[str, Any] | None,
    metric: str,
    axis: str | None,
    n_boot: int = 200,
) -> tuple[str, pd.DataFrame, pd.DataFrame, list[str]]:
    """(axis, fits, verdicts, notes) for ``curves`` exactly as ``scalerl fit`` would store them,
    computed with :mod:`scalerl.harness.analysis.verdicts.service` and written nowhere."""
    from scalerl.db.models import FIT_COLUMNS, VERDICT_COLUMNS
    from scalerl.harness.analysis.verdicts.service import FitRequest, analyze_frame, resolve_request

    metric, axis, options, margin = resolve_request(FitRequest(metric=metric, axis=axis), spec)
    result = analyze_frame(
        curves, sweep=sweep, metric=metric, axis=axis, options=options, margin=margin, spec=spec,
        n_boot=n_boot,
    )  # fmt: skip
    fits = pd.DataFrame(result.fit_rows, columns=list(FIT_COLUMNS))
    verdicts = pd.DataFrame(result.verdict_rows, columns=list(VERDICT_COLUMNS))
    return axis, fits, verdicts, list(result.notes)


def load_diagnostics(store: Any, sweep: str) -> pd.DataFrame:
    """The points of every diagnostic the report draws
    (:data:`scalerl.harness.report.diagnostics.DIAGNOSTIC_PANELS`), ``scalerl.db.queries.curves`` columns; an
    empty frame when the sweep logged none."""
    from scalerl.db import queries
    from scalerl.harness.report.diagnostics import DIAGNOSTIC_PANELS

    # One query per diagnostic: reading every metric of a lab-scale sweep would be far larger.
    parts = [queries.curves(store, sweep, metric=m) for m in DIAGNOSTIC_PANELS]
    parts = [d for d in parts if not d.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def load_report_data(
    store: Any,
    sweep: str,
    *,
    metric: str | None = None,
    axis: str | None = None,
    store_kind: str = "",
    max_points_per_run: int = 400,
) -> ReportData:
    """Read one sweep from ``store`` (a ``db`` store) into a :class:`ReportData`.

    ``metric`` None means the sweep spec's ``fit.metric`` (a recipe's, or what its import stored),
    else ``val/pass_rate``. ``axis`` None means: the axis of the stored fits, else the sweep spec's
    ``fit.axis``, else FLOPs. ``fits_source`` is ``missing`` when fits are neither stored nor
    computable (``notes`` says why); ``scalerl report`` then stops (:func:`missing_fits`).
    """
    from scalerl.db import queries

    if axis is not None and axis not in FIT_AXES:
        raise ConfigError("unknown compute axis", field="--axis", value=axis,
                          fix=f"use one of {', '.join(FIT_AXES)}")  # fmt: skip
    known = queries.sweeps(store)
    match = known[known["name"] == sweep]
    if match.empty:  # an analysis of nothing: exit 6, as `scalerl fit` and `forecast` do
        have = ", ".join(map(str, known["name"])) or "none"
        raise AnalysisError(f"SWEEP={sweep!r}: no such sweep in the store (fix: pick one of: {have})")
    spec = match.iloc[0]["spec"] or {}
    fit_spec = dict(spec.get("fit") or {})
    metric = metric or str(fit_spec.get("metric") or DEFAULT_METRIC)
    runs = queries.runs(store, sweep)
    curves = queries.curves(store, sweep, metric=metric)
    if curves.empty and not runs.empty and (runs["n_points"] > 0).any():
        # Points exist, just not for this metric: name the ones its runs log.
        logged = ", ".join(queries.logged_metrics(store, sweep))
        raise AnalysisError(f"--metric={metric!r}: sweep {sweep!r} has no points for this metric "
                            f"(fix: use one that its runs log: {logged})")  # fmt: skip
    diagnostics = load_diagnostics(store, sweep)
    stored_fits = queries.fits(store, sweep)
    stored_verdicts = queries.verdicts(store, sweep)
    chosen = axis or stored_axis(stored_fits, metric) or fit_spec.get("axis")
    notes: list[str] = []
    source: FitsSource = "store"
    fits = _for(stored_fits, metric, chosen) if chosen else stored_fits.iloc[0:0]
    verdicts = _for(stored_verdicts, metric, chosen) if chosen else stored_verdicts.iloc[0:0]
    if fits.empty:
        source = "missing"
        if not curves.empty:
            try:
                chosen, fits, verdicts, notes = compute_fits(
                    curves, sweep=sweep, spec=spec, metric=metric, axis=chosen
                )
                source = "computed"
            except AnalysisError as err:
                notes.append(f"fits could not be computed: {err}")
    return ReportData(
        sweep=sweep, metric=metric, axis=str(chosen or DEFAULT_AXIS), runs=runs, curves=curves, fits=fits,
        verdicts=verdicts, fits_source=source, store_kind=store_kind,
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), notes=tuple(notes),
        max_points_per_run=max_points_per_run, diagnostics=diagnostics,
    )  # fmt: skip


def missing_fits(data: ReportData) -> str | None:
    """Why ``data`` has points of its metric but no fits (neither stored nor computable), as the
    message ``scalerl report`` stops with; None when it has fits, or no points yet (a sweep that
    has just started: its page says so)."""
    if data.fits_source != "missing" or data.curves.empty:
        return None
    why = "; ".join(data.notes) or "nothing could be fitted"
    filled = [a for a in FIT_AXES if a in data.curves and data.curves[a].notna().any()]
    return (
        f"sweep {data.sweep!r}: no fits for metric {data.metric!r} on axis {data.axis!r}: {why} "
        f"(fix: run `scalerl fit {data.sweep} --metric {data.metric} --axis AXIS`, AXIS one its "
        f"points carry: {', '.join(filled) or 'step'}; then `scalerl report` draws those fits)"
    )
