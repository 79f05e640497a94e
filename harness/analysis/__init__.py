"""Sigmoid fits (single and batched), bootstrap CIs, seed noise, forecasts and backtests, the power
law, and knob verdicts. :func:`forecast_curve` is the one call for a forecast of a curve's future
observations with calibrated intervals. See DESIGN.md §4-§5; the store-facing entry point is
:func:`harness.analysis.sweep.fit_sweep`.

Importing this package loads numpy only; scipy is imported by the fitters that use it.
"""

from harness.analysis.curve import FitOptions, SigmoidFit, sigmoid_curve
from harness.analysis.fitters import FITTERS, Fitter, fit_sigmoid, fit_sigmoid_many, get_fitter
from harness.analysis.forecast import (
    Backtest,
    Forecast,
    backtest_many,
    backtest_power_law,
    forecast_compute_to_reach,
    forecast_value,
)
from harness.analysis.forecaster import CurveForecast, Reach, forecast_curve, forecast_curves, forecast_reach
from harness.analysis.noise import binomial_se, point_se, residual_se
from harness.analysis.power import mde, seeds_for
from harness.analysis.powerlaw import PowerLawFit, fit_power_law
from harness.analysis.uncertainty import BootstrapResult, bootstrap_fits, pool, seed_noise
from harness.analysis.verdicts import VariantCurves, Verdict, VerdictOptions, classify

__all__ = [
    "FITTERS",
    "Backtest",
    "BootstrapResult",
    "CurveForecast",
    "FitOptions",
    "Fitter",
    "Forecast",
    "PowerLawFit",
    "Reach",
    "SigmoidFit",
    "VariantCurves",
    "Verdict",
    "VerdictOptions",
    "backtest_many",
    "backtest_power_law",
    "binomial_se",
    "bootstrap_fits",
    "classify",
    "fit_power_law",
    "fit_sigmoid",
    "fit_sigmoid_many",
    "forecast_compute_to_reach",
    "forecast_curve",
    "forecast_curves",
    "forecast_reach",
    "forecast_value",
    "get_fitter",
    "mde",
    "point_se",
    "pool",
    "residual_se",
    "seed_noise",
    "seeds_for",
    "sigmoid_curve",
]
