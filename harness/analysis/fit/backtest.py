"""Forecasts from a fit (value at a compute, compute to reach a fraction of A) and backtests.

Intervals come from the bootstrap replicates of :func:`scalerl.harness.analysis.fit.bootstrap.bootstrap_fits`:
the forecast is evaluated under every replicate and the percentile interval taken. They describe
the *fitted curve's* parameter uncertainty only: on real RL curves a 90% interval contained 26% of
later observations (issue 12). To forecast future observations, use
:func:`scalerl.harness.analysis.forecast.ensemble.forecast_curve`, whose intervals are calibrated for that.
A fit that is not ``ok`` (pre-inflection included) forecasts NaN with its reason: no confident
number from a curve that has not pinned its ceiling.

A backtest fits on the points with compute <= ``fraction`` x the run's largest compute and scores
the prediction on the rest: mean and max absolute error over the held-out points, and the
*final* error, prediction minus observation averaged over the last 5% of held-out points (at
least 3), because a single evaluation point carries the benchmark's sampling noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.harness.analysis.fit.bootstrap import BootstrapResult
from scalerl.harness.analysis.fit.curve import (
    FitOptions,
    FloatArray,
    SigmoidFit,
    compute_to_reach,
    sigmoid_curve,
)
from scalerl.harness.analysis.fit.fitters import Curve, Fitter, fit_sigmoid_many
from scalerl.harness.analysis.fit.powerlaw import PowerLawFit, fit_power_law

_NAN = math.nan


@dataclass(frozen=True)
class Forecast:
    """A forecast quantity (a metric value or a compute) with its percentile interval."""

    at: float
    value: float
    lo: float
    hi: float
    reason: str = ""


def _interval(vals: FloatArray, level: float) -> tuple[float, float]:
    vals = vals[np.isfinite(vals)]
    if vals.size < 2:
        return _NAN, _NAN
    q = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(vals, [q, 100.0 - q])
    return float(lo), float(hi)


def forecast_value(boot: BootstrapResult, compute: float, level: float = 0.95) -> Forecast:
    """R(compute) with its interval over the bootstrap replicates."""
    fit = boot.fit
    if not fit.ok:
        return Forecast(compute, _NAN, _NAN, _NAN, f"no forecast: fit is {fit.status} ({fit.reason})")
    s = boot.samples
    reps = np.array([sigmoid_curve(compute, *row).item() if np.isfinite(row).all() else np.nan for row in s])
    lo, hi = _interval(reps, level)
    return Forecast(compute, float(fit.predict(compute)), lo, hi)


def forecast_compute_to_reach(boot: BootstrapResult, fraction: float, level: float = 0.95) -> Forecast:
    """Compute at which R(C) = fraction x A, with its interval; ``at`` holds the fraction."""
    fit = boot.fit
    if not fit.ok:
        return Forecast(fraction, _NAN, _NAN, _NAN, f"no forecast: fit is {fit.status} ({fit.reason})")
    reps = np.array(
        [
            compute_to_reach(r[0], r[1], r[2], r[3], fraction) if np.isfinite(r).all() else np.nan
            for r in boot.samples
        ]
    )
    lo, hi = _interval(reps, level)
    return Forecast(fraction, fit.compute_to_reach(fraction), lo, hi)


@dataclass(frozen=True)
class Backtest:
    fraction: float
    fit: SigmoidFit
    n_train: int
    n_test: int
    mae: float
    max_abs_error: float
    final_error: float  # prediction minus observation at the end of the run (signed)

    @property
    def ok(self) -> bool:
        return self.fit.ok and self.n_test > 0


def _split(curve: Curve, fraction: float) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    c = np.asarray(curve[0], dtype=np.float64).ravel()
    v = np.asarray(curve[1], dtype=np.float64).ravel()
    good = np.isfinite(c) & np.isfinite(v)
    c, v = c[good], v[good]
    order = np.argsort(c, kind="stable")
    c, v = c[order], v[order]
    cut = fraction * (float(c[-1]) if c.size else 0.0)
    train = c <= cut
    return c[train], v[train], c[~train], v[~train]


def score(pred: FloatArray, actual: FloatArray) -> tuple[float, float, float]:
    """(mean abs error, max abs error, final error) of a prediction over held-out points."""
    if actual.size == 0 or not np.isfinite(pred).all():
        return _NAN, _NAN, _NAN
    err = pred - actual
    k = max(3, round(0.05 * actual.size))
    return float(np.mean(np.abs(err))), float(np.max(np.abs(err))), float(np.mean(err[-k:]))


def backtest_many(
    curves: Sequence[Curve],
    fraction: float = 0.5,
    *,
    options: FitOptions | None = None,
    method: str | Fitter = "fast",
) -> list[Backtest]:
    """Backtest every curve at once: fit on compute <= fraction x its max, score the rest."""
    splits = [_split(c, fraction) for c in curves]
    fits = fit_sigmoid_many([(s[0], s[1]) for s in splits], options=options, method=method)
    out = []
    for fit, (_, _, c_test, v_test) in zip(fits, splits, strict=True):
        mae, mx, final = score(fit.predict(c_test), v_test)
        out.append(Backtest(fraction, fit, fit.n_points, int(c_test.size), mae, mx, final))
    return out


def backtest_power_law(
    curve: Curve, fraction: float = 0.5, *, options: FitOptions | None = None
) -> tuple[PowerLawFit, float, float, float]:
    """The same backtest for the power law: (fit, mae, max abs error, final error)."""
    c_tr, v_tr, c_te, v_te = _split(curve, fraction)
    fit = fit_power_law(c_tr, v_tr, options)
    return (fit, *score(fit.predict(c_te), v_te))
