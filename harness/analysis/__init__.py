"""Sigmoid fits (single and batched), bootstrap CIs, seed noise, forecasts and backtests, the power
law, knob verdicts, and simulated sweeps whose truth is known (:func:`simulate_sweep`, with a
noise model fitted to real curves by :func:`estimate_noise`). :func:`forecast_curve` is the one
call for a forecast of a curve's future observations with calibrated intervals;
:func:`forecast_sweep` forecasts every run of a sweep, each borrowing strength from the others. See DESIGN.md
§4-§5; the store-facing entry point is :func:`scalerl.harness.analysis.sweep.fit_sweep`.

Importing this package loads numpy only; scipy is imported by the fitters that use it.
"""

from scalerl.harness.analysis.curve import FitOptions, SigmoidFit, sigmoid_curve
from scalerl.harness.analysis.fitters import FITTERS, Fitter, fit_sigmoid, fit_sigmoid_many, get_fitter
from scalerl.harness.analysis.forecast import (
    Backtest,
    Forecast,
    backtest_many,
    backtest_power_law,
    forecast_compute_to_reach,
    forecast_value,
)
from scalerl.harness.analysis.forecaster import (
    CurveForecast,
    Reach,
    forecast_curve,
    forecast_curves,
    forecast_reach,
)
from scalerl.harness.analysis.hierarchical import SweepForecast, forecast_sweep, forecast_with_siblings
from scalerl.harness.analysis.noise import binomial_se, point_se, residual_se
from scalerl.harness.analysis.noise_fit import NoiseEstimate, estimate_noise
from scalerl.harness.analysis.power import mde, seeds_for
from scalerl.harness.analysis.powerlaw import PowerLawFit, fit_power_law
from scalerl.harness.analysis.simulate import (
    CurveTruth,
    NoiseModel,
    SimulatedSweep,
    SweepDesign,
    VariantTruth,
    simulate_sweep,
    write_sweep,
)
from scalerl.harness.analysis.uncertainty import BootstrapResult, bootstrap_fits, pool, seed_noise
from scalerl.harness.analysis.verdicts import VariantCurves, Verdict, VerdictOptions, classify

__all__ = [
    "FITTERS",
    "Backtest",
    "BootstrapResult",
    "CurveForecast",
    "CurveTruth",
    "FitOptions",
    "Fitter",
    "Forecast",
    "NoiseEstimate",
    "NoiseModel",
    "PowerLawFit",
    "Reach",
    "SigmoidFit",
    "SimulatedSweep",
    "SweepDesign",
    "SweepForecast",
    "VariantCurves",
    "VariantTruth",
    "Verdict",
    "VerdictOptions",
    "backtest_many",
    "backtest_power_law",
    "binomial_se",
    "bootstrap_fits",
    "classify",
    "estimate_noise",
    "fit_power_law",
    "fit_sigmoid",
    "fit_sigmoid_many",
    "forecast_compute_to_reach",
    "forecast_curve",
    "forecast_curves",
    "forecast_reach",
    "forecast_sweep",
    "forecast_value",
    "forecast_with_siblings",
    "get_fitter",
    "mde",
    "point_se",
    "pool",
    "residual_se",
    "seed_noise",
    "seeds_for",
    "sigmoid_curve",
    "simulate_sweep",
    "write_sweep",
]
