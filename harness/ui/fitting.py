"""Fits for the live view, in a worker process so the server stays responsive.

A lab-scale sweep (1,000 runs) takes minutes to fit and to forecast; in the server's process
that would hold the interpreter while pages poll. :class:`FitWorker` keeps one worker process
(``spawn``: the server has threads, which ``fork`` would copy half-held) and runs
:func:`fit_from_store` there: it reads every point of the sweep's metric from the store itself
(:func:`scalerl.db.queries.curves`, the store's bulk path; the server holds only what it draws,
and a million points never cross a pipe), then :func:`fit_payload`: the fits and verdicts
``scalerl fit`` would store, from every point (:func:`scalerl.harness.report.build.compute_fits`),
the knob map, and the fitted curves with their forecast bands (the report's
:func:`scalerl.harness.report.figures.curves_figure`; only its fit, extrapolation and interval
traces are kept: the page draws the points itself).
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# The curves figure's traces that are not points (scalerl.harness.report.curves.fit_traces names them).
BAND_PREFIXES = ("fit ", "extrapolation ", "interval ")


def fit_payload(
    frame: pd.DataFrame, *, sweep: str, spec: dict[str, Any], metric: str, axis: str, n_boot: int
) -> dict[str, Any]:
    """What the page shows of a fit, JSON-ready: ``axis``, ``fits``, ``verdicts`` (rows with the
    store's columns, plus any the verdict result carries), ``notes``, ``knob_map`` and ``bands``
    (Plotly traces). Raises AnalysisError when nothing can be fitted yet."""
    import plotly.io as pio

    from scalerl.harness.report.build import compute_fits
    from scalerl.harness.report.figures import curves_figure
    from scalerl.harness.ui.live import knob_map, records

    axis, fits, verdicts, notes = compute_fits(
        frame, sweep=sweep, spec=spec, metric=metric, axis=axis, n_boot=n_boot
    )
    fig = curves_figure(frame, fits, metric=metric, axis=axis, max_points_per_run=10, log_x=True)
    data = json.loads(pio.to_json(fig, validate=False, engine="json"))["data"]
    bands = [t for t in data if str(t.get("name", "")).startswith(BAND_PREFIXES)]
    return {
        "axis": axis,
        "fits": records(fits),
        "verdicts": records(verdicts),
        "notes": list(notes),
        "knob_map": knob_map(verdicts) if not verdicts.empty else None,
        "bands": bands,
    }


def fit_from_store(
    url: str, *, sweep: str, spec: dict[str, Any], metric: str, axis: str, n_boot: int
) -> dict[str, Any]:
    """:func:`fit_payload` of every point of ``metric`` in ``sweep`` as the store at ``url``
    holds it now (opened read-only, closed after the read), plus ``points``: how many."""
    from scalerl import db
    from scalerl.db import queries

    store = db.open_store(url, create=False, readonly=True)
    try:
        frame = queries.curves(store, sweep, metric=metric)
    finally:
        store.close()
    payload = fit_payload(frame, sweep=sweep, spec=spec, metric=metric, axis=axis, n_boot=n_boot)
    payload["points"] = len(frame)
    return payload


def _warm() -> bool:
    """Imported in the worker at start, so the first fit does not pay for the imports."""
    import scalerl.db.queries
    import scalerl.harness.report.build
    import scalerl.harness.report.figures  # noqa: F401

    return True


class FitWorker:
    """One worker process for the fits of the store at ``url``; :meth:`submit` returns a Future
    of :func:`fit_from_store`."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self._pool.submit(_warm)

    def submit(self, **kwargs: Any) -> Future[Any]:
        return self._pool.submit(fit_from_store, self._url, **kwargs)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
