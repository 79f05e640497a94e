"""Forecasting a training curve beyond its last point, with calibrated prediction intervals.

- :mod:`.service`: the forecast of a stored sweep that ``scalerl forecast``, ``scalerl fit``,
  ``Sweep.forecast`` and the report share (:func:`forecast_variants`, :func:`forecast_rows`);
- :mod:`.ensemble`: the single-curve forecast (:func:`forecast_curve`): sigmoid, flat and power
  law, weighted by rolling-origin validation;
- :mod:`.sweep_prior`: forecasts that borrow strength from the sweep (:func:`forecast_sweep`,
  :func:`forecast_with_siblings`): an empirical-Bayes prior over the sigmoid;
- :mod:`.intervals`: the interval model (the unit ``u``, :class:`IntervalCalibration`);
  :mod:`.calibrations`: the calibrations shipped; :mod:`.conformal`: fitting and checking them;
- :mod:`.bounds`: the range a metric can take, and clipping into it;
- :mod:`.reach`: the compute at which a curve reaches a fraction of its ceiling;
- :mod:`.peers`: a run's value at the target read from its finished peers (the search pruner).

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.forecast.bounds import Bounds, resolve_bounds
    from scalerl.harness.analysis.forecast.ensemble import CurveForecast, forecast_curve, forecast_curves
    from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
    from scalerl.harness.analysis.forecast.reach import Reach, forecast_reach
    from scalerl.harness.analysis.forecast.service import (
        VariantForecast,
        forecast_rows,
        forecast_variants,
        metric_bounds,
    )
    from scalerl.harness.analysis.forecast.sweep_prior import (
        SweepForecast,
        forecast_sweep,
        forecast_with_siblings,
    )

__all__ = [
    "Bounds",
    "CurveForecast",
    "IntervalCalibration",
    "Reach",
    "SweepForecast",
    "VariantForecast",
    "forecast_curve",
    "forecast_curves",
    "forecast_reach",
    "forecast_rows",
    "forecast_sweep",
    "forecast_variants",
    "forecast_with_siblings",
    "metric_bounds",
    "resolve_bounds",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.forecast",
    {
        "Bounds": "scalerl.harness.analysis.forecast.bounds",
        "CurveForecast": "scalerl.harness.analysis.forecast.ensemble",
        "IntervalCalibration": "scalerl.harness.analysis.forecast.intervals",
        "Reach": "scalerl.harness.analysis.forecast.reach",
        "SweepForecast": "scalerl.harness.analysis.forecast.sweep_prior",
        "VariantForecast": "scalerl.harness.analysis.forecast.service",
        "forecast_curve": "scalerl.harness.analysis.forecast.ensemble",
        "forecast_curves": "scalerl.harness.analysis.forecast.ensemble",
        "forecast_reach": "scalerl.harness.analysis.forecast.reach",
        "forecast_rows": "scalerl.harness.analysis.forecast.service",
        "forecast_sweep": "scalerl.harness.analysis.forecast.sweep_prior",
        "forecast_variants": "scalerl.harness.analysis.forecast.service",
        "forecast_with_siblings": "scalerl.harness.analysis.forecast.sweep_prior",
        "metric_bounds": "scalerl.harness.analysis.forecast.service",
        "resolve_bounds": "scalerl.harness.analysis.forecast.bounds",
    },
)
