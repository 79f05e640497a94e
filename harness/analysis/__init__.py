"""Fits, forecasts and verdicts of RL training curves (DESIGN.md §4-§5), one subpackage per
concept:

- :mod:`.fit`: the sigmoid ``R(C) = R0 + (A - R0) / (1 + (C_mid/C)^B)``, its fitters, bootstrap
  intervals, the power law and backtests;
- :mod:`.noise`: the standard error of every point of a curve;
- :mod:`.forecast`: a curve's future with calibrated intervals (one curve, or borrowing from its
  sweep), and the sweep-forecast service ``scalerl forecast``, ``Sweep.forecast`` and the
  report share;
- :mod:`.verdicts`: the knob verdicts (one rule for the table, stop-when-decided and the advice)
  and the sweep-fit service ``scalerl fit`` uses;
- :mod:`.sim`: simulated sweeps whose truth is known, and the noise model fitted to real curves.

:mod:`.groups` holds a sweep's curves grouped by variant, the input of all of them. Each
subpackage's docstring maps its modules; how one knob is decided is :mod:`.verdicts.rule`.
Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.fit.curve import FitOptions, SigmoidFit, sigmoid_curve
    from scalerl.harness.analysis.fit.fitters import fit_sigmoid, fit_sigmoid_many
    from scalerl.harness.analysis.forecast.ensemble import forecast_curve, forecast_curves
    from scalerl.harness.analysis.forecast.reach import forecast_reach
    from scalerl.harness.analysis.forecast.sweep_prior import forecast_sweep, forecast_with_siblings
    from scalerl.harness.analysis.groups import VariantCurves
    from scalerl.harness.analysis.verdicts.pipeline import classify
    from scalerl.harness.analysis.verdicts.types import Verdict, VerdictOptions

__all__ = [
    "FitOptions",
    "SigmoidFit",
    "VariantCurves",
    "Verdict",
    "VerdictOptions",
    "classify",
    "fit_sigmoid",
    "fit_sigmoid_many",
    "forecast_curve",
    "forecast_curves",
    "forecast_reach",
    "forecast_sweep",
    "forecast_with_siblings",
    "sigmoid_curve",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis",
    {
        "FitOptions": "scalerl.harness.analysis.fit.curve",
        "SigmoidFit": "scalerl.harness.analysis.fit.curve",
        "VariantCurves": "scalerl.harness.analysis.groups",
        "Verdict": "scalerl.harness.analysis.verdicts.types",
        "VerdictOptions": "scalerl.harness.analysis.verdicts.types",
        "classify": "scalerl.harness.analysis.verdicts.pipeline",
        "fit_sigmoid": "scalerl.harness.analysis.fit.fitters",
        "fit_sigmoid_many": "scalerl.harness.analysis.fit.fitters",
        "forecast_curve": "scalerl.harness.analysis.forecast.ensemble",
        "forecast_curves": "scalerl.harness.analysis.forecast.ensemble",
        "forecast_reach": "scalerl.harness.analysis.forecast.reach",
        "forecast_sweep": "scalerl.harness.analysis.forecast.sweep_prior",
        "forecast_with_siblings": "scalerl.harness.analysis.forecast.sweep_prior",
        "sigmoid_curve": "scalerl.harness.analysis.fit.curve",
    },
)
