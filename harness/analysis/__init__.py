"""Sigmoid fits (single and batched), bootstrap CIs, seed noise, forecasts and backtests, the power
law, and knob verdicts. See DESIGN.md §4-§5; the store-facing entry point is
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
from harness.analysis.powerlaw import PowerLawFit, fit_power_law
from harness.analysis.uncertainty import BootstrapResult, bootstrap_fits, pool, seed_noise
from harness.analysis.verdicts import VariantCurves, Verdict, VerdictOptions, classify

__all__ = [
    "FITTERS",
    "Backtest",
    "BootstrapResult",
    "FitOptions",
    "Fitter",
    "Forecast",
    "PowerLawFit",
    "SigmoidFit",
    "VariantCurves",
    "Verdict",
    "VerdictOptions",
    "backtest_many",
    "backtest_power_law",
    "bootstrap_fits",
    "classify",
    "fit_power_law",
    "fit_sigmoid",
    "fit_sigmoid_many",
    "forecast_compute_to_reach",
    "forecast_value",
    "get_fitter",
    "pool",
    "seed_noise",
    "sigmoid_curve",
]
