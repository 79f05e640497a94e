"""Optuna integration: :class:`ForecastPruner`, a pruner any Optuna study can use on its own.

Not imported by :mod:`scalerl.harness` itself (it loads optuna):
``from scalerl.harness.optuna import ForecastPruner``.
"""

from scalerl.harness.optuna.pruner import ForecastPruner, TrialForecast

__all__ = ["ForecastPruner", "TrialForecast"]
