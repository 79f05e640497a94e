"""What every forecast pruner shares: the warm-up, the curves it reads, the inflection check.

A trial reports ``trial.report(value, step)`` with ``step`` the compute spent so far in integer
units (steps, GPU-seconds, 1e9-FLOP units...). A forecast pruner reads the study only through
``study.get_trials(deepcopy=False)``, so it works with any storage (in-memory, RDB, journal).
"""

from __future__ import annotations

import abc
import math
import threading
from collections.abc import Sequence

import numpy as np
import optuna
from optuna.pruners import BasePruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from scalerl.harness.analysis.forecast.calibrations import LINEAR_CALIBRATION
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.errors import ConfigError
from scalerl.harness.optuna._forecaster import DEFAULT_FORECASTER, Curve, Forecaster

STATES = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.PRUNED)


def check_calibration(name: str, cal: object) -> None:
    """A calibration option must be an :class:`IntervalCalibration` (not e.g. a level)."""
    if not isinstance(cal, IntervalCalibration):
        raise ConfigError(
            "must be an IntervalCalibration",
            field=name,
            value=type(cal).__name__,
            fix="pass one fitted by bench/forecast_sweep.py, or the library's default",
        )


class ForecastPrunerBase(BasePruner, abc.ABC):
    """A pruner that decides on forecasts of each trial's curve at the ``target`` compute.

    Shared contract, each time ``trial.should_prune()`` is called (a subclass adds its rule in
    :meth:`decide`):

    1. Single-objective studies only (else :class:`~scalerl.harness.errors.ConfigError`). For
       ``minimize`` every curve is mirrored to ``1 - value`` before forecasting (a loss or error
       rate in [0, 1] becomes a score in [0, 1], where the sigmoid member of the ensemble applies;
       outside [0, 1] the flat and power-law members carry the forecast) and the rule applies
       unchanged.
    2. Warm-up: never prune a trial with fewer than ``min_points`` intermediate values, nor before
       ``min_completed`` other trials are COMPLETE; after that the trial is judged on every
       ``interval_steps``-th report and left alone on the others. A rule also waits (with
       ``require_inflection``) until the trial is past its inflection (:meth:`past_inflection`:
       ``inflection_margin`` x C_mid at or before its last compute; a fit ending at C_mid
       underestimates the ceiling with a deceptively narrow interval).
    3. Compute = step x ``compute_scale``; the target is in the same units.

    ``forecaster`` (default :class:`~scalerl.harness.optuna.EnsembleForecaster`) makes every
    forecast and fit; ``calibration`` (default the library's single-curve interval calibration)
    gives single-curve forecasts their intervals. Both are strategies passed in: a benchmark
    passes calibrations fitted without the curves it scores and a memoising forecaster.

    Thread-safe: one lock guards a pruner's caches, so ``study.optimize(n_jobs=...)`` may share an
    instance. Never prunes on a forecast that is not sound (a flat curve stuck at 0 is left to
    finish: pair it with a threshold if that matters).
    """

    rule: str  # the recipe's ``optuna.pruner.options.rule`` that selects the class

    def __init__(
        self,
        target: float,
        *,
        min_points: int = 8,
        compute_scale: float = 1.0,
        min_completed: int = 1,
        require_inflection: bool = True,
        interval_steps: int = 1,
        inflection_margin: float = 2.0,
        calibration: IntervalCalibration = LINEAR_CALIBRATION,
        forecaster: Forecaster = DEFAULT_FORECASTER,
    ) -> None:
        if not (math.isfinite(target) and target > 0):
            raise ConfigError(
                "must be a finite compute > 0", field="target", value=target, fix="use e.g. 1000"
            )
        check_calibration("calibration", calibration)
        if min_points < 4:
            raise ConfigError(
                "the forecaster needs >= 4 points", field="min_points", value=min_points, fix="use 5"
            )
        if not (math.isfinite(compute_scale) and compute_scale > 0):
            raise ConfigError("must be > 0", field="compute_scale", value=compute_scale, fix="use 2.0")
        if min_completed < 1:
            raise ConfigError("must be >= 1", field="min_completed", value=min_completed, fix="use 1")
        if not inflection_margin >= 1.0:
            raise ConfigError(
                "must be >= 1", field="inflection_margin", value=inflection_margin, fix="use 2.0"
            )
        if interval_steps < 1:
            raise ConfigError("must be >= 1", field="interval_steps", value=interval_steps, fix="use 1")
        self.target = float(target)
        self.min_points = int(min_points)
        self.compute_scale = float(compute_scale)
        self.min_completed = int(min_completed)
        self.require_inflection = bool(require_inflection)
        self.interval_steps = int(interval_steps)
        self.inflection_margin = float(inflection_margin)
        self.calibration = calibration
        self.forecaster = forecaster
        self._lock = threading.Lock()

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if len(study.directions) != 1:
            raise ConfigError(
                f"{type(self).__name__} prunes single-objective studies only",
                field="directions",
                value=[d.name for d in study.directions],
                fix="use one objective, or optuna.pruners.NopPruner",
            )
        n = len(trial.intermediate_values)
        if n < self.min_points or (n - self.min_points) % self.interval_steps:
            return False
        trials = study.get_trials(deepcopy=False, states=STATES)
        completed = [t for t in trials if t.state == TrialState.COMPLETE and t.number != trial.number]
        if len(completed) < self.min_completed:
            return False
        return self.decide(study, trial, trials, completed)

    @abc.abstractmethod
    def decide(
        self,
        study: optuna.study.Study,
        trial: FrozenTrial,
        trials: Sequence[FrozenTrial],
        completed: Sequence[FrozenTrial],
    ) -> bool:
        """The rule, once the trial is past the shared warm-up (``min_points``, ``interval_steps``,
        ``min_completed``): ``trials`` are the study's COMPLETE, RUNNING and PRUNED trials,
        ``completed`` the COMPLETE ones other than ``trial``. True prunes."""

    @staticmethod
    def minimize(study: optuna.study.Study) -> bool:
        return study.direction == StudyDirection.MINIMIZE

    def curve(self, trial: FrozenTrial, minimize: bool) -> Curve:
        """The trial's intermediate values as (compute, value), in the maximised frame."""
        steps = sorted(trial.intermediate_values)
        x = np.asarray(steps, dtype=np.float64) * self.compute_scale
        y = np.asarray([trial.intermediate_values[s] for s in steps], dtype=np.float64)
        return x, (1.0 - y if minimize else y)

    def past_inflection(self, curves: Sequence[Curve]) -> list[bool]:
        """Per curve: its sigmoid fit (R0 = its first value) puts ``inflection_margin`` x C_mid at
        or before its last compute, or it is decreasing (a collapsing run); all True without
        ``require_inflection``."""
        if not self.require_inflection:
            return [True] * len(curves)
        starts = []
        for _, y in curves:
            fin = y[np.isfinite(y)]
            starts.append(float(fin[0]) if fin.size else math.nan)
        fits = self.forecaster.sigmoid(list(curves), starts)
        return [
            fit.status == "decreasing"
            or (fit.status == "ok" and fit.c_mid * self.inflection_margin <= float(np.nanmax(x)))
            for (x, _), fit in zip(curves, fits, strict=True)
        ]
