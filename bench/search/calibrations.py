"""Interval calibrations fitted leave-one-source-out, for the experiments that score held-out sources.

For each held-out source (and None: all four), the single-curve, sweep and finished-sweep
calibrations are fitted on the other sources' curves exactly as ``bench/forecast_sweep.py`` fits
the library's (backtests cut at 1/30, 10, 25, 50, 75% of each curve; the sweep forecast with
same-stage and finished siblings), so no pruner is scored on a source its calibration saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from bench.conformal import fit_calibration
from bench.data import SOURCES, load_real
from bench.forecast_sweep import CAL_CUTS, SHIPPED_KAPPA, SWEEP_GRID, cases, forecasts, loso_fit, sweeps_of
from bench.search.settings import Calibrations
from scalerl.harness.analysis.forecast.ensemble import PointForecast
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.analysis.forecast.sweep_prior import SWEEP_MEMBERS


def _forecasts(job: tuple[str, Sequence[object]]) -> list[PointForecast]:
    mode, cs = job
    return forecasts(cs, mode, SHIPPED_KAPPA)  # type: ignore[arg-type]


def loso_calibrations(n_jobs: int) -> dict[str | None, Calibrations]:
    """Per held-out source (None: none held out), the single-curve and sweep calibrations fitted
    on the other sources' curves exactly as ``bench/forecast_sweep.py`` fits them (backtests cut at
    1/30, 10, 25, 50, 75% of each curve; the sweep forecast with same-stage and finished siblings)."""
    curves = load_real()
    cs = cases(curves, sweeps_of(curves), CAL_CUTS)
    modes = ("single", "same", "finished")
    with ProcessPoolExecutor(max(1, n_jobs)) as ex:
        made = dict(zip(modes, ex.map(_forecasts, [(m, cs) for m in modes]), strict=True))
    src = [curves[c.i].source for c in cs]
    single = [(pf, c.y_test, g) for pf, c, g in zip(made["single"], cs, src, strict=True)]
    sweep = [
        (pf, c.y_test, g)
        for m in ("same", "finished")
        for pf, c, g in zip(made[m], cs, src, strict=True)
        if pf.names == SWEEP_MEMBERS
    ]
    # The finished-sweep calibration as the library's is fitted (bench/forecast_sweep.py): the
    # sweep forecasts siblings_finished calls finished, either sibling setting, nested objective.
    far = [
        (pf, c)
        for m in ("same", "finished")
        for pf, c in zip(made[m], cs, strict=True)
        if pf.names == SWEEP_MEMBERS and c.ran_on(m)
    ]
    out: dict[str | None, Calibrations] = {}
    for held in (*SOURCES, None):
        one = [t for t in single if t[2] != held]
        two = [t for t in sweep if t[2] != held]
        out[held] = Calibrations(
            fit_calibration([t[0] for t in one], [t[1] for t in one], groups=[t[2] for t in one]),
            fit_calibration(
                [t[0] for t in two],
                [t[1] for t in two],
                groups=[t[2] for t in two],
                horizon_slopes=SWEEP_GRID["horizon_slopes"],
                trend_weights=SWEEP_GRID["trend_weights"],
                sibling_weights=SWEEP_GRID["sibling_weights"],
            ),
            loso_fit([p for p, _ in far], [c for _, c in far], curves, str(held), True, **SWEEP_GRID)[0],
        )
    return out


def label(c: IntervalCalibration) -> str:
    return (
        f"h={c.horizon_slope:g} g={c.log_horizon_slope:g} m={c.move_weight:g} t={c.trend_weight:g} "
        f"v={c.sibling_weight:g} q50={c.quantile(0.5):.2f} q90={c.quantile(0.9):.2f}"
    )
