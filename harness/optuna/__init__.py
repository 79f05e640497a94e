"""Optuna integration: :class:`ForecastPruner`, a pruner any Optuna study can use on its own.

Not imported by :mod:`harness` itself (it loads optuna): ``from harness.optuna import ForecastPruner``.
"""

from harness.optuna.pruner import ForecastPruner, TrialForecast

__all__ = ["ForecastPruner", "TrialForecast"]
