"""Optuna integration: forecast pruners any Optuna study can use on its own.

Not imported by :mod:`scalerl.harness` itself (it loads optuna):
``from scalerl.harness.optuna import BoundPruner, BeatPruner``. Both subclass
:class:`ForecastPrunerBase` (an ``optuna.pruners.BasePruner``: the shared warm-up and curve reading)
and take their forecaster (:class:`Forecaster`, default :class:`EnsembleForecaster`) and interval
calibrations as arguments. :data:`RULES` maps a recipe's ``rule:`` to the class;
:func:`ForecastPruner` builds one by rule name.
"""

from scalerl.harness.optuna._base import ForecastPrunerBase
from scalerl.harness.optuna._beat import (
    BeatForecast,
    BeatPruner,
    beat_probability,
    central_level,
    late_noise,
    sweep_noise,
)
from scalerl.harness.optuna._bound import BoundPruner, TrialForecast
from scalerl.harness.optuna._forecaster import DEFAULT_FORECASTER, EnsembleForecaster, Forecaster
from scalerl.harness.optuna._rules import RULES, ForecastPruner, other_rules_options, rule_class, warn_ignored

__all__ = [
    "DEFAULT_FORECASTER",
    "RULES",
    "BeatForecast",
    "BeatPruner",
    "BoundPruner",
    "EnsembleForecaster",
    "ForecastPruner",
    "ForecastPrunerBase",
    "Forecaster",
    "TrialForecast",
    "beat_probability",
    "central_level",
    "late_noise",
    "other_rules_options",
    "rule_class",
    "sweep_noise",
    "warn_ignored",
]
